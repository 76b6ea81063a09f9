"""An environment on the host that failed (raised, or gave a wrong shape or dtype) inside a
chunk: the one line naming the update and env step, and what of the run is kept. The bridge
(`envs/host.py`) records the fault; the chunk it happened in ran on zeros after it, so nothing
of that chunk is kept."""

from __future__ import annotations

from jaxppo.config import PPOConfig
from jaxppo.errors import EnvError
from jaxppo.rundir.checkpoint import saved_update


def host_fault(host_env, config: PPOConfig, start_update: int, update: int,
               good_update: int | None) -> BaseException | None:
    """The fault of `host_env` (a `HostVecEnv`, or None) as one line, if it happened in the
    updates up to `update` (a pipelined later chunk's is reported after this one is handled);
    a Ctrl-C that came while the env was inside a step is that KeyboardInterrupt again, with
    `during` naming the env and step (the stop at once it asked for);
    `start_update`: where this session began, `good_update`: the newest checkpointable one."""
    fault = None if host_env is None else host_env.fault
    if fault is None:
        return None
    T = config.num_steps
    failed = start_update + fault.step // T + 1
    if fault.where != "reset" and failed > update:
        return None
    where = ("reset" if fault.where == "reset" else
             f"update {failed}, env step {fault.step % T + 1} of {T}")
    if fault.interrupt is not None:  # a second Ctrl-C while the env was inside its step
        interrupt = fault.interrupt
        doing = "resetting" if fault.where == "reset" else f"stepping ({where})"
        interrupt.during = f"environment {config.env_id!r} was {doing}"
        return interrupt
    error = EnvError(f"environment {config.env_id!r} failed at {where} ({fault.what}); "
                     "the run stopped")
    error.kept_unsaid = True  # `say_what_is_kept` ends the line once the run has ended
    return error


def say_what_is_kept(error: BaseException, run_dir: str | None) -> None:
    """End a host fault's line with what of the run is kept, read from the files after the
    run's last save (not from what it meant to save): a run with no run directory keeps
    nothing, a run whose first checkpoint was never written has none."""
    if not getattr(error, "kept_unsaid", False):
        return
    update = saved_update(run_dir)
    kept = ("it has no run directory, so nothing of it was saved" if run_dir is None else
            "nothing before it was checkpointed" if update is None else
            f"the checkpoint at update {update} is kept")
    error.args = (f"{error.args[0]}, {kept}",)
    error.kept_unsaid = False

"""`profile_config`: the kernels a config's compiled program runs per update, on this CPU or on
a GPU this machine does not have (deviceless, `jaxppo.profile.gpu`).

Two parts can be profiled. `train`: the whole program, `jax.jit(make_train(config))` for one
agent and `jax.jit(jax.vmap(make_train(config)))` over `seeds` keys for more, as the
benchmarks and `jaxppo train --seeds` run it. `minibatch`: one
minibatch's loss gradient alone, for `seeds` agents by `vmap` (what `--seeds` compiles: XLA
sees one batched network; per-seed weights make a conv a grouped convolution) and by `lax.map`
(the seeds one after another). A host env (a Gymnasium or EnvPool env) steps on the CPU
through a callback, so its whole program has no GPU form: its `minibatch` part does.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from jaxppo.config import Hparams, PPOConfig
from jaxppo.core.loss import Minibatch, ppo_loss
from jaxppo.core.networks import init_params
from jaxppo.core.train import make_train
from jaxppo.envs.host import HostVecEnv
from jaxppo.errors import UsageError
from jaxppo.profile.gpu import GPUS, compiled_text, gpu_device
from jaxppo.profile.hlo import loop_table, summary_line

TARGETS = ("cpu", *GPUS)
PARTS = ("train", "minibatch")


@dataclass(frozen=True)
class ProgramProfile:
    """What `profile_config` found.

    Attributes:
        where: the device the program was compiled for (`this CPU`, or a GPU's name).
        text: Markdown: the loop table (`train`) or one line per form (`minibatch`).
        per_update: for `train`, kernels, copies and bytes written per update and the number
            of updates (`updates`); empty for `minibatch`.
        hlo: the optimized HLO text of each program profiled, by name.
    """

    where: str
    text: str
    per_update: dict[str, float]
    hlo: dict[str, str]


def profile_config(config: PPOConfig, *, target: str = "cpu", seeds: int = 1,
                   part: str = "train", top: int = 12, title: str = "") -> ProgramProfile:
    """Compile `config`'s program for `target` and count what it runs.

    Args:
        config: the run's config (`load_config`).
        target: `cpu` (this machine) or a GPU of `GPUS` (`h100`, `h200`, `a100`), compiled here
            without one (needs the `gpu-profile` extra).
        seeds: vmapped agents, as `jaxppo train --seeds`.
        part: `train` (the whole program) or `minibatch` (one minibatch's loss gradient).
        top: loops listed in the table.
        title: what the table's heading names (the config's path, say).

    Returns:
        A `ProgramProfile`. Raises `UsageError` in one line for a target, part or seed count it
        cannot profile (a host env's whole program on a GPU; the extra missing).
    """
    if target not in TARGETS:
        raise UsageError(f"--target {target!r} is not one of {', '.join(TARGETS)}")
    if part not in PARTS:
        raise UsageError(f"--part {part!r} is not one of {', '.join(PARTS)}")
    if seeds < 1:
        raise UsageError(f"--seeds {seeds}: the number of vmapped agents is at least 1")
    device = None if target == "cpu" else gpu_device(target)  # before the env starts JAX
    where = "this CPU" if device is None else f"{GPUS[target]['name']}, deviceless"
    trainer = make_train(config)
    if part == "minibatch":
        hlo = _minibatch_texts(config, trainer, seeds, device)
        return ProgramProfile(where, "\n".join(summary_line(k, v) for k, v in hlo.items()), {}, hlo)
    if device is not None and isinstance(trainer.env, HostVecEnv):
        raise UsageError(f"{config.env_id} steps on the host (through a callback), so its whole "
                         f"program has no {target} form: profile its update alone with "
                         "--part minibatch, or its whole program with --target cpu")
    text = compiled_text(*as_users_run(trainer, seeds), device)
    table, figures = loop_table(f"jaxppo make_train on {where}, {seeds} agent(s)"
                                + (f": {title}" if title else ""), text, top)
    return ProgramProfile(where, table, figures, {"jaxppo make_train": text})


def as_users_run(train, seeds: int) -> tuple:
    """`(fn, args)`: `train` as its users compile it for `seeds` agents: one alone
    (`jax.jit(train)(key)`, as `jaxppo train` and PureJaxRL's users run one; jaxppo's epochs
    then take their flat form, `jaxppo.core.epochs`), more vmapped over split keys."""
    keys = jax.random.split(jax.random.key(0), seeds)
    return (train, (keys[0],)) if seeds == 1 else (jax.vmap(train), (keys,))


def _minibatch_texts(config: PPOConfig, trainer, seeds: int, device) -> dict[str, str]:
    """One minibatch's loss gradient for `seeds` agents, by `vmap` and by `lax.map`."""
    net, env, hp = trainer.network, trainer.env, Hparams.from_config(config)
    b = config.batch_size // config.num_minibatches
    params = jax.eval_shape(lambda k: init_params(net, k, env.obs_shape), jax.random.key(0))
    action = (jax.ShapeDtypeStruct((b,), jnp.int32) if env.discrete
              else jax.ShapeDtypeStruct((b, env.action_dim), jnp.float32))
    f32 = jax.ShapeDtypeStruct((b,), jnp.float32)
    batch = Minibatch(jax.ShapeDtypeStruct((b, *env.obs_shape), env.obs_dtype), action, f32,
                      f32, f32, f32)

    def grad(p, mb):
        return jax.grad(lambda p: ppo_loss(p, net, mb, hp, clip_vloss=config.clip_vloss,
                                           norm_adv=config.norm_adv)[0])(p)

    forms = {"vmap": jax.vmap(grad),
             "lax.map": lambda p, mb: jax.lax.map(lambda a: grad(*a), (p, mb))}
    args = jax.tree.map(lambda x: jax.ShapeDtypeStruct((seeds, *x.shape), x.dtype),
                        (params, batch))
    return {f"one minibatch's gradient, {seeds} seeds by {name}": compiled_text(fn, args, device)
            for name, fn in forms.items()}

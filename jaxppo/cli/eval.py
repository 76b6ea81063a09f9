"""`jaxppo eval RUN_DIR`: play a run's checkpoint (every agent in one program, or
`--agent M`), write eval.json, and render an episode to a GIF or Brax's HTML viewer.

The stop signals are held for the whole command, as a run holds them: a Ctrl-C while XLA
compiles stops once the compile is done (one line, 128 + N), never inside XLA."""

from __future__ import annotations

import os
import signal
import sys

import jax
import numpy as np

from jaxppo.cli.common import add_import_arg, add_no_cache, import_modules, positive_int
from jaxppo.errors import UsageError
from jaxppo.policy import evaluate, load_policy
from jaxppo.policy.render import NoRenderer, missing_renderer, render_gif, render_html
from jaxppo.process import StopFlag, native_work
from jaxppo.rundir import names
from jaxppo.rundir.files import check_writable
from jaxppo.rundir.layout import run_dir_of
from jaxppo.rundir.plan import is_static_sweep
from jaxppo.rundir.reader import RunDir


def add_parser(sub) -> None:
    e = sub.add_parser("eval", help="evaluate a run's checkpoint (every seed in one program), "
                                    "greedy unless --stochastic")
    e.add_argument("run_dir")
    e.add_argument("--episodes", type=positive_int("--episodes"), default=10,
                   help="episodes per agent (default 10)")
    e.add_argument("--deterministic", dest="deterministic", action="store_true", default=True,
                   help="greedy actions: the policy's most likely action (its mean for "
                        "continuous actions); the default")
    e.add_argument("--stochastic", dest="deterministic", action="store_false",
                   help=f"sample actions from the policy instead (default: greedy); {names.EVAL} "
                        "and jaxppo report say which")
    e.add_argument("--gif", metavar="PATH", help="render one episode to a GIF")
    e.add_argument("--html", metavar="PATH",
                   help="write one episode as Brax's interactive 3D viewer (Brax envs only)")
    e.add_argument("--seed", type=int, default=0, help="evaluation seed (default 0)")
    e.add_argument("--agent", type=int, default=None, metavar="M",
                   help="only agent M of a multi-seed run or sweep (a row's runs, a PBT member); "
                        "its return, and its GIF/HTML (default: every agent, GIF of agent 0)")
    e.add_argument("--include-diverged", action="store_true",
                   help="also play agents that diverged (NaN/Inf parameters, or NaN/Inf before "
                        "the checkpoint); by default they are named and get no return")
    e.add_argument("--no-json", dest="json", action="store_false",
                   help=f"do not write RUN_DIR/{names.EVAL} (per-seed returns)")
    add_import_arg(e)
    add_no_cache(e)
    e.set_defaults(func=cmd_eval)


def eval_return_text(returns, completed, per_seed: bool = False) -> str:
    """The mean ± std of the completed episodes' returns; a cut-off episode (still running at
    the step cap) is counted apart, and "none" is all there is when none completed."""
    n, cut = returns.size, int((~completed).sum())
    if cut == n:
        return f"none (all {n} episodes cut off)"
    done = returns[completed]
    text = f"{done.mean():.2f} ± {done.std():.2f}"
    if not per_seed:
        text += f" over {done.size} {'completed ' if cut else ''}episodes"
    return text + (f" ({cut} of {n} cut off)" if cut else "")


def cmd_eval(args) -> int:
    done: dict = {}  # how far it got, for the line a stop signal ends it with
    try:
        with StopFlag() as stop, native_work():
            import_modules(args)  # a run from before env_imports: the module of its env
            stop.check("while starting")
            return _eval(args, done)
    except KeyboardInterrupt as e:  # held while XLA compiled, then raised; or a second one
        signum = getattr(e, "signum", signal.SIGINT)
        name, when = signal.Signals(signum).name, getattr(e, "when", None)
        problem = f"stopped by {name} {when}" if when else f"stopped at once by {name}"
        if "returns" in done:
            rendering = done.get("rendering")
            kept = f"the returns above are evaluated{done['json']}" + (
                f"; {rendering} was not written" if rendering else "")
        else:
            kept = f"nothing was evaluated (no {names.EVAL} written)"
        print(f"jaxppo eval: error: {problem}; {kept}", file=sys.stderr)
        return 128 + signum


def _env_id(run_dir: str) -> str:
    """The run's env id from its config.yaml ("" where it cannot be read: the checkpoint's
    own checks then speak)."""
    env_id = (RunDir(run_dir).config or {}).get("env_id")  # a FIFO is never read
    return env_id if isinstance(env_id, str) else ""


def _eval(args, done: dict) -> int:
    if is_static_sweep(args.run_dir):
        first = sorted(d for d in os.listdir(args.run_dir)
                       if os.path.isdir(os.path.join(args.run_dir, d, names.CHECKPOINT_DIR)))
        which = (f"evaluate one: jaxppo eval {os.path.join(args.run_dir, first[0])}" if first
                 else "none has a checkpoint yet: continue the sweep first, with jaxppo sweep "
                      f"--resume {args.run_dir}")
        raise UsageError(f"'{args.run_dir}' is a sweep over static settings: each static "
                         f"setting is a run directory of its own ({names.SWEEP}: group); {which}")
    for path, what in ((args.gif, "GIF"), (args.html, "HTML")):
        if path is not None:  # '' too: an empty path is bad input, not "no GIF"
            check_writable(path, what)  # before any episode is played
    missing = missing_renderer(_env_id(args.run_dir)) if args.gif is not None else None
    if missing:  # before anything is evaluated or written
        raise UsageError(f"--gif: {missing}, or evaluate without --gif")
    out = os.path.join(run_dir_of(args.run_dir), names.EVAL) if args.json else None
    if out is not None and os.path.isdir(run_dir_of(args.run_dir)):
        try:
            check_writable(out, names.EVAL)
        except UsageError as e:
            print(f"note: {e} (or --no-json); evaluating without it", file=sys.stderr)
            out = None
    res = evaluate(args.run_dir, args.episodes, seed=args.seed, deterministic=args.deterministic,
                   out=out, include_diverged=args.include_diverged)
    done["returns"], done["json"] = True, f" and written to {out}" if out else ""
    mode = "greedy" if args.deterministic else "sampled"
    completed = res.completed  # an episode cut off at the step cap has no return, only a sum
    bad = res.diverged or {}
    scored = res.scored  # [R]: the agents with returns (not a diverged one, unless asked)
    per_run = res.updates_per_run or [res.update] * res.returns.shape[0]
    ragged = len(set(per_run)) > 1  # a halving sweep: agents stopped at their rungs
    update = res.update
    if args.agent is not None and not 0 <= args.agent < res.returns.shape[0]:
        raise UsageError(f"--agent {args.agent}: this run has agents 0.."
                         f"{res.returns.shape[0] - 1} (a sweep row's runs, a PBT member)")
    if not scored.any() or (args.agent is not None and not scored[args.agent]):
        first = min(bad)
        who = (f"agent {args.agent} {bad[args.agent]}: it is no policy and has no return"
               if args.agent is not None else
               f"every agent diverged ({len(bad)} of {res.returns.shape[0]}; the first, agent "
               f"{first}, {bad[first]}): none is a policy, none has a return")
        healthy = np.flatnonzero(scored)
        other = (f"evaluate one that did not (--agent {healthy[0]}), or " if len(healthy)
                 else "")
        saved = f" ({out} records it)" if out else ""
        print(f"jaxppo eval: error: {who}{saved}; {other}pass --include-diverged to play "
              "anyway", file=sys.stderr)
        return 3
    # the agent a GIF shows: --agent's, else the first that did not diverge
    agent = int(np.flatnonzero(scored)[0]) if args.agent is None else args.agent
    if args.agent is not None:  # one agent of a sweep (a PBT member, a row's `runs` entry)
        one = slice(agent, agent + 1)
        res = res._replace(returns=res.returns[one], lengths=res.lengths[one],
                           cut_off=None if res.cut_off is None else res.cut_off[one],
                           updates_per_run=per_run[one])
        update = per_run[agent]
        completed, scored = res.completed, scored[one]
        print(f"agent {agent}:", end=" ")
    elif res.returns.shape[0] > 1:
        for r, ret in enumerate(res.returns):
            went = f" (update {per_run[r]})" if ragged else ""
            if r in bad and not scored[r]:
                print(f"seed {r}: {bad[r]}: no return{went}")
                continue
            played = f" ({bad[r]}; played as asked)" if r in bad else ""
            print(f"seed {r}: {eval_return_text(ret, completed[r], per_seed=True)}{went}"
                  f"{played}")
    print(f"{res.env_id} ({mode}, update {update}): return "
          f"{eval_return_text(res.returns[scored], completed[scored])}")
    skipped = sorted(r for r in bad if not res.scored[r]) if args.agent is None else []
    if skipped:
        print(f"note: {len(skipped)} of {len(per_run)} agents diverged (agents "
              f"{' '.join(map(str, skipped[:8]))}{' ...' if len(skipped) > 8 else ''}): not "
              "played, no return, left out of the mean (--include-diverged plays them)",
              file=sys.stderr)
    completed = completed[scored]
    if not completed.all():
        print(f"note: {int((~completed).sum())} of {completed.size} episodes were still "
              f"running at the evaluation's cap of {res.max_steps} steps (the env states no shorter time "
              "limit; set max_episode_steps to give it one): cut off, left out of the mean, "
              f"marked in {names.EVAL} (cut_off)", file=sys.stderr)
    for flag, path, render in (("--gif", args.gif, render_gif), ("--html", args.html, render_html)):
        if not path:
            continue
        done["rendering"] = path
        policy = load_policy(args.run_dir, agent, include_diverged=args.include_diverged)
        try:
            length = render(policy.config, policy.train_state, jax.random.key(args.seed), path,
                            args.deterministic)
        except NoRenderer as e:  # the evaluation stands: one line, its exit status
            print(f"jaxppo eval: {flag}: {e}; no GIF written", file=sys.stderr)
            continue
        except RuntimeError as e:
            print(f"jaxppo eval: {flag}: {e}", file=sys.stderr)
            return 1
        shown = f", agent {agent}" if args.agent is None and agent else ""
        print(f"wrote {path} ({length} steps{shown})")
    return 0

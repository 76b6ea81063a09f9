"""Every GPU figure the issues name, in one command, on whatever device JAX finds.

    python scripts/gpu_suite.py                        # every part (well over one lease)
    python scripts/gpu_suite.py --parts agents,envs    # a part or two per call (<= ~8 min each)
    python scripts/gpu_suite.py --parts atari --atari-steps 100000   # the atari rows' SPS only
    python scripts/gpu_suite.py --tiny                 # every part at toy sizes (CPU)
    python scripts/gpu_suite.py --tiny --one-row --one-process   # the quickest check (a test runs it)
    python scripts/gpu_suite.py --purejaxrl ~/purejaxrl --parts purejaxrl

Measured on one H200 (BENCHMARKS.md, session 10), with the process start and compiles: minatar
~80 s, agents ~150 s, sb3 ~150 s, purejaxrl at 1 seed ~35 s (2048 seeds did not fit); the atari
rows run at ~2k SPS there (a device round trip per env step), so their 1e7 steps take 70-80 min
each: cap them with `--atari-steps` inside a short lease.

Each row is printed as it is measured and the JSON and Markdown files are rewritten after every
row, so a call cut off by its time limit still leaves its figures. Each part runs in a process of
its own (its peak device memory is its own). The device is named in both
(kind, platform, driver, JAX/jaxlib versions). Parts:

- `agents`: CartPole-v1 default config, 1/64/512/2048/4096 vmapped agents x 5e5 steps each.
- `envs`: one CartPole agent, num_envs 4 -> 65,536 (5e5 steps or one update).
- `minatar`: MinAtar-Breakout at its published 1e7 steps, 1 and 16 seeds.
- `brax`: Brax ant and hopper throughput at 2048 and 8192 envs (where Brax is installed).
- `precision`: bf16 vs f32 compute, and matmul precision `default` (TF32 on Ampere/Hopper) vs
  `highest`, on CartPole and MinAtar-Breakout: return and speed.
- `atari`: EnvPool Breakout-v5 (`configs/atari_breakout.yaml`, CleanRL's settings) at 1e7 steps,
  1 and 8 seeds, and EnvPool HalfCheetah-v4 (`configs/mujoco_halfcheetah.yaml`) at 1e6 steps;
  rows say "skipped" where jaxppo has no envpool source or envpool is not installed.
- `sb3`: `jaxppo compare` on MinAtar-Breakout with the CNN torso, 2e5 steps: jaxppo on the
  device (1 seed and 16 vmapped seeds) vs SB3 PPO on the host's CPU cores (DummyVecEnv and
  SubprocVecEnv), the same network and hyperparameters (the compare extra).
- `purejaxrl`: PureJaxRL's `ppo.py` beside jaxppo on the same device (needs `--purejaxrl PATH`,
  a PureJaxRL checkout; run through a shim for gymnax 1.0, as in BENCHMARKS.md).

Every row runs through `jaxppo.Experiment` with no files (what `jaxppo train` runs), and records
compile s, run s, SPS, the mean final return, the device's peak memory where the device reports
it, and `jaxppo.estimate_memory`'s prediction beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo import Experiment, PPOConfig, estimate_memory, load_config
from jaxppo._xla import setup_compilation_cache
from jaxppo.machine import describe, peak_device_bytes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from purejaxrl_side import load_purejaxrl, purejaxrl_config  # noqa: E402  (scripts/, beside this file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ("agents", "envs", "minatar", "brax", "precision", "policies", "suites", "atari", "sb3",
         "purejaxrl")
COLUMNS = ["part", "what", "agents", "num_envs", "env_steps", "compile_s", "run_s", "sps",
           "final_return", "peak_mem_gib", "estimate_gib", "note"]


def device_info() -> dict:
    dev = jax.devices()[0]
    driver = ""
    if dev.platform == "gpu":
        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                     "--format=csv,noheader"], capture_output=True, text=True,
                                    timeout=30).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            driver = "unknown"
    return {"device": dev.device_kind, "platform": dev.platform, "devices": jax.device_count(),
            "driver": driver, "jax": jax.__version__, "jaxlib": jax.lib.__version__
            if hasattr(jax.lib, "__version__") else "", "machine": describe(),
            "date": time.strftime("%Y-%m-%d %H:%M")}


def peak_gib() -> float | None:
    """The device's peak allocation so far in this part's process (GPU/TPU; the CPU reports
    none). Each part runs in its own process (unless `--one-process`) and its rows grow, so it
    is each row's peak."""
    peak = peak_device_bytes()
    return None if peak is None else peak / 2**30


class Report:
    """The rows so far, printed as they come and rewritten to JSON and Markdown each time."""

    def __init__(self, out: str):
        self.out, self.info, self.rows = out, device_info(), []
        if os.path.exists(out + ".json"):  # the parts before this one (one process each)
            with open(out + ".json", encoding="utf-8") as f:
                self.rows = json.load(f)["rows"]
        print(f"# jaxppo GPU suite on {self.info['device']} ({self.info['platform']}), "
              f"JAX {self.info['jax']}", flush=True)

    def add(self, **row) -> None:
        row = {k: row.get(k) for k in COLUMNS}
        self.rows.append(row)
        print("| " + " | ".join(_fmt(row[k]) for k in COLUMNS) + " |", flush=True)
        self.write()

    def write(self) -> None:
        with open(self.out + ".json", "w", encoding="utf-8") as f:
            json.dump({"device": self.info, "rows": self.rows}, f, indent=1)
        i = self.info
        lines = [f"Device: **{i['device']}** ({i['platform']}, {i['devices']} device(s), driver "
                 f"{i['driver'] or '-'}); JAX {i['jax']}; host {i['machine']}; {i['date']}", "",
                 "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_fmt(r[k]) for k in COLUMNS) + " |" for r in self.rows]
        with open(self.out + ".md", "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
    return str(v)


ONE_ROW = False
"""`--one-row`: each part measures its first row only (a check that every part still runs)."""


def one_row_done(report: Report, part: str) -> bool:
    """`--one-row`, and `part` has measured its row: the rest are not even set up (the suites
    part's next configs imported their suites, ~2 s, and slowed this process's exit)."""
    return ONE_ROW and any(r["part"] == part and r["sps"] is not None for r in report.rows)


def run_row(report: Report, part: str, what: str, config: PPOConfig, agents: int,
            note: str = "", partner: bool = False) -> None:
    """One `Experiment` (no files), and its row (none after the part's first under
    `--one-row`, unless it is the `partner` of the row before it: PureJaxRL's jaxppo row)."""
    if not partner and one_row_done(report, part):
        return
    est = estimate_memory(config, agents, metrics_updates=None).total / 2**30
    t0 = time.perf_counter()
    try:
        r = Experiment(config, seeds=agents, logdir=None, progress=False).run()
    except Exception as e:  # noqa: BLE001 - a row that fails is a figure too (e.g. memory)
        report.add(part=part, what=what, agents=agents, num_envs=config.num_envs,
                   note=f"failed: {str(e).splitlines()[0][:160]}")
        return
    run_s = time.perf_counter() - t0 - r.compile_s
    report.add(part=part, what=what, agents=agents, num_envs=config.num_envs,
               env_steps=config.env_steps, compile_s=r.compile_s, run_s=run_s,
               sps=agents * config.env_steps / run_s,
               final_return=float(np.mean(r.final_return)), peak_mem_gib=peak_gib(),
               estimate_gib=est, note=note)


def part_agents(report: Report, tiny: bool) -> None:
    cfg = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"))
    if tiny:
        cfg = dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 4, hidden_sizes=(16,))
    for n in ((1, 2) if tiny else (1, 64, 512, 2048, 4096)):
        run_row(report, "agents", "CartPole-v1 default", cfg, n)


def part_envs(report: Report, tiny: bool) -> None:
    cfg = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"))
    for n in ((4, 8) if tiny else (4, 64, 1024, 8192, 65536)):
        steps = cfg.num_steps * n * (4 if tiny else 1)
        c = dataclasses.replace(cfg, num_envs=n, total_timesteps=steps if tiny else
                                max(cfg.total_timesteps, steps),
                                hidden_sizes=(16,) if tiny else cfg.hidden_sizes)
        run_row(report, "envs", "CartPole-v1 one agent", c, 1)


def part_minatar(report: Report, tiny: bool) -> None:
    cfg = load_config(os.path.join(ROOT, "configs", "minatar_breakout.yaml"))
    if tiny:
        cfg = dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 2, hidden_sizes=(16,))
    for n in ((1,) if tiny else (1, 16)):
        run_row(report, "minatar", f"Breakout-MinAtar, {cfg.env_steps:.0e} steps", cfg, n,
                note="target: <= 20 s for one agent incl. compile (H100)" if n == 1 else "")


def part_brax(report: Report, tiny: bool) -> None:
    if importlib.util.find_spec("brax") is None:
        report.add(part="brax", what="brax/ant, brax/hopper", note="skipped: Brax is not "
                   "installed (pip install 'jaxppo[brax]')")
        return
    envs = ("brax/ant", "brax/hopper")
    if tiny:  # first, the row `--tiny --one-row` keeps: Brax's test env, no physics to
        envs = ("brax/fast", "brax/inverted_pendulum", *envs)  # compile (~2 s, not ~10 s)
    for env in envs:
        cfg = load_config(os.path.join(ROOT, "configs", "brax_hopper.yaml"), {"env_id": env})
        for n in ((8,) if tiny else (2048, 8192)):
            steps = n * cfg.num_steps * (1 if tiny else 5)  # throughput: a few updates
            c = dataclasses.replace(cfg, num_envs=n, total_timesteps=steps,
                                    num_minibatches=min(cfg.num_minibatches, n),
                                    hidden_sizes=(16,) if tiny else cfg.hidden_sizes)
            run_row(report, "brax", f"{env} throughput", c, 1)


def part_policies(report: Report, tiny: bool) -> None:
    """Recurrent vs feedforward on CartPole (2048 agents), CNN vs MLP on MinAtar-Breakout."""
    cart = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"))
    small = dict(total_timesteps=cart.batch_size * 2, hidden_sizes=(16,), rnn_size=16)
    for net in ("feedforward", "gru", "lstm"):
        c = dataclasses.replace(cart, network=net, **(small if tiny else {}))
        if net != "feedforward" and not tiny:
            c = dataclasses.replace(c, hidden_sizes=(64,))
        run_row(report, "policies", f"CartPole-v1 {net}", c, 2 if tiny else 2048)
    for torso in ("mlp", "cnn"):
        cfg = load_config(os.path.join(ROOT, "configs", "minatar_breakout.yaml"),
                          {"torso": torso})
        if tiny:
            cfg = dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 2, hidden_sizes=(16,))
        run_row(report, "policies", f"Breakout-MinAtar {torso}, {cfg.env_steps:.0e} steps", cfg,
                1 if tiny else 16)


SUITE_CONFIGS = ("playground_cartpole_balance", "craftax_classic_symbolic", "jumanji_snake",
                 "navix_empty", "xminigrid_empty")


def part_suites(report: Report, tiny: bool) -> None:
    """One shipped config per JAX env suite (a budget cut to fit one call on a GPU)."""
    names = SUITE_CONFIGS
    if tiny:  # the quickest suite to compile first: the row `--tiny --one-row` keeps
        names = ("navix_empty", *(n for n in SUITE_CONFIGS if n != "navix_empty"))
    for name in names:
        if one_row_done(report, "suites"):
            break
        try:
            cfg = load_config(os.path.join(ROOT, "configs", f"{name}.yaml"))
        except Exception as e:  # noqa: BLE001 - a missing extra is a row, not a crash
            report.add(part="suites", what=name, note=f"skipped: {str(e)[:160]}")
            continue
        if tiny:
            c = dataclasses.replace(cfg, num_envs=8, num_steps=16, num_minibatches=2,
                                    total_timesteps=256, hidden_sizes=(16,))
        else:
            c = dataclasses.replace(cfg, total_timesteps=min(cfg.total_timesteps, 50_000_000))
        run_row(report, "suites", f"{cfg.env_id}, {c.env_steps:.0e} steps", c, 1)


ATARI_ROWS = (("atari_breakout", 10_000_000, (1, 8)), ("mujoco_halfcheetah", 1_000_000, (1,)))
"""EnvPool configs: (config, steps, seeds)."""


def part_atari(report: Report, tiny: bool, max_steps: int | None = None) -> None:
    """EnvPool tasks stepped on the host inside the compiled loop (the envpool/ source).
    `max_steps` caps each row's steps per agent (throughput under a short device lease)."""
    if importlib.util.find_spec("jaxppo.envs.sources.envpool") is None:
        for name, _, _ in ATARI_ROWS:
            report.add(part="atari", what=name, note="skipped: jaxppo has no envpool source "
                       "(jaxppo/envs/envpool_env.py) in this tree")
        return
    for name, steps, seeds in ATARI_ROWS:
        if one_row_done(report, "atari"):
            break
        try:
            cfg = load_config(os.path.join(ROOT, "configs", f"{name}.yaml"))
            cfg = dataclasses.replace(cfg, total_timesteps=min(steps, max_steps or steps))
            if tiny:
                cfg = dataclasses.replace(cfg, num_envs=4, num_steps=16, num_minibatches=2,
                                          update_epochs=1, total_timesteps=64)  # one update
        except Exception as e:  # noqa: BLE001 - a missing extra or config is a row, not a crash
            report.add(part="atari", what=name, note=f"skipped: {str(e)[:160]}")
            continue
        note = f"throughput: capped from {steps:.0e} steps" if cfg.env_steps < steps else ""
        for n in ((1,) if tiny else seeds):
            run_row(report, "atari", f"{cfg.env_id}, {cfg.env_steps:.0e} steps", cfg, n, note)


def part_sb3(report: Report, tiny: bool) -> None:
    """`jaxppo compare` on MinAtar-Breakout (CNN torso): every system in a child process."""
    from jaxppo.compare import compare as cmp

    cfg = load_config(os.path.join(ROOT, "configs", "minatar_breakout_cnn.yaml"),
                      {"total_timesteps": 200_000})
    systems, seeds = cmp.SYSTEMS, 16
    if tiny:
        cfg = dataclasses.replace(cfg, num_envs=4, num_steps=16, num_minibatches=2,
                                  update_epochs=1, total_timesteps=128, hidden_sizes=(16,))
        systems, seeds = ("jaxppo", "sb3-dummy"), 2
    try:
        rows, _ = cmp.compare(cfg, repeats=1, seeds=seeds, systems=systems, seed=0,
                              warm_cache=False, echo=lambda _: None)
    except Exception as e:  # noqa: BLE001 - the compare extra missing, or a system failing
        report.add(part="sb3", what="Breakout-MinAtar cnn vs SB3", note=f"failed: {str(e)[:160]}")
        return
    for r in rows:
        agents = seeds if r["system"] == "jaxppo-seeds" else 1
        report.add(part="sb3", what=r["label"], agents=agents, num_envs=cfg.num_envs,
                   env_steps=cfg.env_steps, compile_s=r["setup_s"], run_s=r["run_s"],
                   sps=r["sps"], final_return=r["final_return"],
                   note="SB3 runs on the host CPU" if r["system"].startswith("sb3") else "")


def part_precision(report: Report, tiny: bool) -> None:
    for name in ("cartpole.yaml", "minatar_breakout.yaml"):
        cfg = load_config(os.path.join(ROOT, "configs", name))
        if tiny:
            cfg = dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 2, hidden_sizes=(16,))
        elif name.startswith("minatar"):
            cfg = dataclasses.replace(cfg, total_timesteps=2_000_000)  # a fifth of the budget
        for dtype, precision in (("float32", "highest"), ("float32", "default"),
                                 ("bfloat16", "default")):
            c = dataclasses.replace(cfg, compute_dtype=dtype, matmul_precision=precision)
            run_row(report, "precision", f"{cfg.env_id}: {dtype}, matmul {precision}", c, 1)


def part_purejaxrl(report: Report, tiny: bool, path: str | None) -> None:
    if not path:
        report.add(part="purejaxrl", what="PureJaxRL ppo.py", note="skipped: pass --purejaxrl "
                   "PATH (a PureJaxRL checkout)")
        return
    make_train = load_purejaxrl(path)
    cfg = load_config(os.path.join(ROOT, "configs", "cartpole.yaml"))
    if tiny:
        cfg = dataclasses.replace(cfg, total_timesteps=cfg.batch_size * 4)
    for n in ((1,) if tiny else (1, 2048)):
        train = jax.jit(jax.vmap(make_train(purejaxrl_config(cfg))))
        keys = jax.random.split(jax.random.key(0), n)
        t0 = time.perf_counter()
        compiled = train.lower(keys).compile()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(keys))
        run_s = time.perf_counter() - t0
        ret = out["metrics"]["returned_episode_returns"]
        report.add(part="purejaxrl", what="PureJaxRL ppo.py (shimmed)", agents=n,
                   num_envs=cfg.num_envs, env_steps=cfg.env_steps, compile_s=compile_s,
                   run_s=run_s, sps=n * cfg.env_steps / run_s,
                   final_return=float(jnp.mean(ret[:, -1])), peak_mem_gib=peak_gib())
        run_row(report, "purejaxrl", "jaxppo, same config", cfg, n, partner=True)
        if ONE_ROW:
            break


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated: {','.join(PARTS)}")
    p.add_argument("--tiny", action="store_true",
                   help="toy sizes (CPU): proves every part runs (with the persistent "
                        "compilation cache on: a program compiled before is read back)")
    p.add_argument("--one-row", action="store_true",
                   help="the first row of each part only (with --tiny: the quickest check)")
    p.add_argument("--one-process", action="store_true",
                   help="every part in this process, not one process each (then a row's peak "
                        "memory is the process's so far, not its part's): a quicker check")
    p.add_argument("--purejaxrl", default=None, metavar="PATH", help="a PureJaxRL checkout")
    p.add_argument("--out", default="gpu_suite", help="writes OUT.json and OUT.md")
    p.add_argument("--atari-steps", type=int, default=None, metavar="N",
                   help="cap each atari row at N steps per agent (its SPS, not its score)")
    args = p.parse_args(argv)
    parts = [s.strip() for s in args.parts.split(",") if s.strip()]
    unknown = [s for s in parts if s not in PARTS]
    if unknown:
        p.error(f"--parts: unknown {unknown}; choose from {','.join(PARTS)}")
    if (len(parts) > 1 or args.one_process) and os.path.exists(args.out + ".json"):
        os.remove(args.out + ".json")  # a new report (a part's own process appends to it)
    if len(parts) > 1 and not args.one_process:  # one process per part: its own peak memory
        for part in parts:
            cmd = [sys.executable, os.path.abspath(__file__), "--parts", part, "--out", args.out,
                   *(["--tiny"] if args.tiny else []), *(["--one-row"] if args.one_row else []),
                   *(["--purejaxrl", args.purejaxrl] if args.purejaxrl else []),
                   *(["--atari-steps", str(args.atari_steps)] if args.atari_steps else [])]
            subprocess.run(cmd, check=False)
        print(f"wrote {args.out}.json and {args.out}.md", flush=True)
        return
    global ONE_ROW
    ONE_ROW = args.one_row
    if args.tiny:  # a check that every part runs: a program another row compiled is read back
        setup_compilation_cache()
    report = Report(args.out)
    print("| " + " | ".join(COLUMNS) + " |", flush=True)
    for part in parts:
        if part == "purejaxrl":
            part_purejaxrl(report, args.tiny, args.purejaxrl)
        elif part == "atari":
            part_atari(report, args.tiny, args.atari_steps)
        else:
            {"agents": part_agents, "envs": part_envs, "minatar": part_minatar,
             "brax": part_brax, "precision": part_precision, "policies": part_policies,
             "suites": part_suites, "sb3": part_sb3}[part](report, args.tiny)
    print(f"wrote {args.out}.json and {args.out}.md", flush=True)


if __name__ == "__main__":
    main()
    # All written: the interpreter's exit then skips its garbage collections over every
    # module's objects (~2-3 s on a CPU after the Brax, Navix and EnvPool rows).
    gc.freeze()

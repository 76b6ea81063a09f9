"""The two tested JAX lines side by side: jaxppo's `make_train` and PureJaxRL's `ppo.py` on
CartPole's default config at 1 seed (the config's 5e5 steps) and 32 vmapped seeds (65,536 steps
each), every run a fresh process of `scripts/benchmark.py`'s purejaxrl child, interleaved over
lines and systems within each repeat; medians (docs/benchmarks/jax-lines.md).

    python scripts/bench_lines.py --purejaxrl PATH [--repeats 3]

Line 1 runs in `.venv` (Python 3.11, `requirements-lock.txt`), line 2 in `.venv312` (Python
3.12, the same file); both made as docs/get-started/install.md says."""

import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = {"0.10.2 (py3.11)": f"{ROOT}/.venv/bin/python",
      "0.12.0.1 (py3.12)": f"{ROOT}/.venv312/bin/python"}
CASES = [(1, None), (32, 65536)]
p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--purejaxrl", required=True, metavar="PATH", help="a PureJaxRL checkout")
p.add_argument("--repeats", type=int, default=3)
args = p.parse_args()
env = {**os.environ, "JAXPPO_SAFE_SCHEDULER": "", "XLA_FLAGS": "", "NPROC": ""}
res = {}
for rep in range(args.repeats):
    for seeds, steps in CASES:
        for line, py in PY.items():
            for system in ("jaxppo", "purejaxrl"):
                cmd = [py, f"{ROOT}/scripts/benchmark.py", "--child", system, "--config",
                       f"{ROOT}/configs/cartpole.yaml", "--child-seeds", str(seeds),
                       "--purejaxrl", args.purejaxrl, *(["--child-steps", str(steps)] if steps else [])]
                load = os.getloadavg()[0]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
                try:
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                except (IndexError, json.JSONDecodeError):
                    print("FAILED", line, system, seeds, out.stderr[-2000:], flush=True)
                    continue
                r["load"] = load
                res.setdefault((line, system, seeds), []).append(r)
                shown = {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}
                print(rep, line, system, seeds, shown, flush=True)
print("\n| line | seeds | system | SPS (median) | compile s | runs | load at start |")
print("|---|---:|---|---:|---:|---:|---|")
for seeds, _ in CASES:
    for line in PY:
        for system in ("jaxppo", "purejaxrl"):
            rs = res.get((line, system, seeds), [])
            if not rs:
                continue
            sps = statistics.median(r["sps"] for r in rs)
            c = statistics.median(r["compile_s"] for r in rs)
            loads = f"{min(r['load'] for r in rs):.1f}-{max(r['load'] for r in rs):.1f}"
            print(f"| {line} | {seeds} | {system} | {sps:,.0f} | {c:.1f} | {len(rs)} | {loads} |")

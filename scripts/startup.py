"""What a `jaxppo` command costs before it does the work asked: the seconds to its first printed
line, and the CPU seconds a typo'd env id costs to answer (its one line is the command's end).

    python scripts/startup.py --repeats 5

Each case is a fresh process, the cases interleaved, each figure the median of `--repeats`;
CPU seconds are the child's user + system time (less sensitive to a busy machine than wall
seconds), and the machine's load is printed beside them. `warm`: the files jaxppo, JAX and
Python read are in the OS's page cache (any command after the first); `cold`: the page cache
dropped before the run (`--cold`; `/proc/sys/vm/drop_caches`, root only: a first command
after a boot; it slows everything else on the machine for a while).

    python scripts/startup.py --repeats 3 --cold
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from jaxppo.machine import describe

CASES = {
    "train CartPole: first line": ["train", "--config", "configs/cartpole.yaml", "--no-progress",
                                   "--no-tensorboard", "--set", "total_timesteps=2048",
                                   "--logdir", "{tmp}"],
    "typo'd env id: its one line": ["train", "--config", "configs/cartpole.yaml", "--set",
                                    "env_id=CartPoleX-v9"],
}


def one(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds to the first line on stdout or stderr, the child's CPU seconds (to its
    end), and that line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "jaxppo.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    first = time.perf_counter() - t0
    proc.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return first, cpu, line.strip()


DROP_CACHES = "/proc/sys/vm/drop_caches"


def drop_page_cache() -> bool:
    """Empty the OS's page cache (a cold start); False where this process may not."""
    try:
        os.sync()
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--tmp", default="/tmp/jaxppo-startup-runs", help="the runs' --logdir")
    p.add_argument("--cold", action="store_true",
                   help="also the first case after dropping the OS's page cache (root only)")
    args = p.parse_args(argv)
    cold = args.cold and drop_page_cache()
    runs = [(f"{name}, warm", case, False) for name, case in CASES.items()]
    if cold:
        first = next(iter(CASES))
        runs.append((f"{first}, cold", CASES[first], True))
    got: dict[str, list[tuple[float, float, str]]] = {name: [] for name, _, _ in runs}
    loads = []
    for _ in range(args.repeats):
        for name, case, drop in runs:
            if drop:
                drop_page_cache()
            loads.append(os.getloadavg()[0])
            got[name].append(one([a.format(tmp=args.tmp) for a in case]))
    print(f"Machine: {describe()}; load (1-min average) {min(loads):.1f}-{max(loads):.1f}; "
          f"medians of {args.repeats}, interleaved")
    if args.cold and not cold:
        print("cold: not measured (the page cache can be dropped by root only)")
    print("\n| case | wall s to the first line | CPU s of the whole command | the line |")
    print("|---|---|---|---|")
    for name, rows in got.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | `{rows[-1][2][:80]}` |")


if __name__ == "__main__":
    main()

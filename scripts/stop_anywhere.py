"""Stop signals at random moments of real commands, on a start-up slowed on purpose: the
adversarial pass of issue #52 (too long for the test suite; run it by hand).

    python scripts/stop_anywhere.py --draws 60 [--seed 0] [--out stop_anywhere.md]

Each draw starts one command (`train` with a compile, `train` from the compile cache, a host env
whose `step` never returns, `eval`, `sweep`, `report`) with tests/slow_env.py imported first
(it busy-works `--slow` seconds while it imports), sometimes as a shell's background job
(SIGINT inherited ignored), and sends one stop signal (SIGINT, SIGTERM or SIGHUP) or two (the
second another kind, as a kernel may merge two of one kind) at a random moment of its life.
Each outcome is one of:

- `stopped`: exit 128 + N, its last line the command's one error line (a checkpoint it names
  reads back whole);
- `finished`: exit 0, the signal sent only after the command printed its result;
- `FINISHED AFTER STOP`, `TRACEBACK`, `HANG` (no end 60 s after the last signal: killed),
  `BAD LINE` (exit 128 + N without the one line, or more than one): failures.

Prints the tally (per command and per outcome) and writes it to `--out`; a failed draw's whole
output is kept in the temp folder (`stop_anywhere-PID-T.log`).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
TINY = ["--set", "total_timesteps=8192", "--set", "num_envs=4", "--set", "num_steps=32",
        "--set", "hidden_sizes=[16,16]", "--no-progress", "--checkpoint-every", "4"]
CRASH = ("Traceback", "Fatal Python error", "Segmentation fault", "core dumped",
         "terminate called")
RESULT = ("final return:", "agents,", "agents in", "return:", "wrote", "report")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def command(kind: str, work: str, finished: str) -> tuple[list[str], dict, float]:
    """(argv, extra environment, seconds of its life to draw the moment from)."""
    logdir = ["--logdir", os.path.join(work, "runs")]
    train = ["train", "--config", CARTPOLE, "--import", "slow_env", *TINY, *logdir]
    if kind == "train":
        return ["--no-cache", *train], {}, 16.0
    if kind == "train-cached":
        return train, {}, 10.0
    if kind == "host-blocking":
        return (["--no-cache", "train", "--config", CARTPOLE, "--set",
                 "env_id=gymnasium/slow_env:Blocking-v0", *TINY, *logdir],
                {"JAXPPO_TEST_BLOCK_AFTER": "200"}, 25.0)
    if kind == "eval":
        return ["eval", finished, "--episodes", "8", "--import", "slow_env"], {}, 12.0
    if kind == "sweep":
        return (["sweep", "--config", CARTPOLE, "--import", "slow_env", "--grid",
                 "lr=1e-3,3e-4", *TINY, *logdir], {}, 10.0)
    if kind == "report":
        return ["report", finished, "--out", os.path.join(work, "report")], {}, 12.0
    raise ValueError(kind)


def draw(rng: random.Random, kind: str, work: str, finished: str, slow: float) -> dict:
    argv, env_extra, life = command(kind, work, finished)
    ignored = rng.random() < 0.3  # a shell's background job: SIGINT inherited ignored
    first = rng.choice(SIGNALS)
    signals = [first] + ([rng.choice([s for s in SIGNALS if s != first])]
                         if rng.random() < 0.4 or kind == "host-blocking" else [])
    at = rng.uniform(0.0, life)
    gap = rng.uniform(0.2, 3.0)
    env = {**os.environ, **env_extra, "PYTHONUNBUFFERED": "1",
           "JAXPPO_TEST_SLOW_IMPORT_S": str(slow),
           "PYTHONPATH": os.pathsep.join(p for p in (TESTS, ROOT, os.environ.get("PYTHONPATH"))
                                         if p)}
    cmd = [sys.executable, "-m", "jaxppo.cli", *argv]
    if ignored:
        cmd = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *cmd]
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(x.rstrip("\n") for x in proc.stdout),
                              daemon=True)
    reader.start()
    try:
        return _signal_and_wait(proc, lines, reader, kind, ignored, at, gap, signals)
    finally:
        if proc.poll() is None:
            proc.kill()


def _signal_and_wait(proc, lines, reader, kind, ignored, at, gap, signals) -> dict:
    start = time.monotonic()
    sent, result_before, before = [], False, "caught"
    for i, s in enumerate(signals):
        wait = (at if i == 0 else gap) - (time.monotonic() - start if i == 0 else 0.0)
        if proc.poll() is None and wait > 0:
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is not None:
            break
        result_before = result_before or any(x.startswith(RESULT) for x in list(lines))
        if i == 0:
            before = disposition(proc.pid, s)
        proc.send_signal(s)
        sent.append(signal.Signals(s).name)
    try:
        proc.wait(timeout=60 if sent else 300)
        hang = False
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        hang = True
    reader.join(timeout=10)
    outcome = classify(proc.returncode, lines, sent, result_before, hang, before)
    if outcome.isupper() or outcome.startswith(("BAD", "NOT", "exit")):  # kept to read
        with open(os.path.join(tempfile.gettempdir(), f"stop_anywhere-{os.getpid()}-"
                               f"{int(start)}.log"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return dict(kind=kind, ignored=ignored, at=round(at, 2), sent=sent, rc=proc.returncode,
                outcome=outcome, last=lines[-1] if lines else "")


def disposition(pid: int, sig: int) -> str:
    """What the process did with `sig` as it was sent: "caught" (a handler: Python's or
    jaxppo's), "ignored" (inherited SIG_IGN, before jaxppo took it) or "default" (before Python
    installed its own handler: the kernel ends the process)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return "caught"
    bit = 1 << (int(sig) - 1)
    if int(fields.get("SigCgt", "0"), 16) & bit:
        return "caught"
    return "ignored" if int(fields.get("SigIgn", "0"), 16) & bit else "default"


def classify(rc: int, lines: list[str], sent: list[str], result_before: bool,
             hang: bool, before: str = "caught") -> str:
    if hang:
        return "HANG"
    if any(c in x for x in lines for c in CRASH):
        return "TRACEBACK"
    if not sent:
        return "ended before the signal"
    if before == "ignored" and len(sent) == 1 and rc == 0:
        return "finished: the signal came before Python ran jaxppo (inherited SIG_IGN)"
    if before == "default" and rc is not None and rc < 0:
        return "killed by the signal before Python started (nothing ran)"
    if rc == 0:
        return "finished" if result_before else "FINISHED AFTER STOP"
    if rc is not None and rc - 128 in (int(s) for s in SIGNALS):
        errors = [x for x in lines if x.startswith("jaxppo") and ": error:" in x
                  or x.startswith("stopped by ") or " interrupted;" in x]
        if len(errors) != 1:
            return "BAD LINE"
        if "--resume " in errors[0] and not resumable(errors[0]):
            return "NOT RESUMABLE"
        return "stopped"
    return f"exit {rc}"


def resumable(line: str) -> bool:
    """The run the line tells to resume has a checkpoint that reads back whole."""
    run_dir = line.rsplit("--resume ", 1)[1].split()[0]
    code = ("import sys; from jaxppo.rundir.checkpoint import saved_update; "
            "sys.exit(0 if saved_update(sys.argv[1]) is not None else 1)")
    return subprocess.run([sys.executable, "-c", code, run_dir], cwd=ROOT,
                          capture_output=True).returncode == 0


def _end(signum, frame):
    raise KeyboardInterrupt  # `draw` kills its command (one that blocks would live on)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow", type=float, default=4.0, help="seconds slow_env busy-works at import")
    p.add_argument("--out", default=None, help="write the tally (Markdown) here")
    args = p.parse_args()
    for s in SIGNALS:  # the commands start as a user's would (this script may run under
        signal.signal(s, _end)  # nohup: SIG_IGN is inherited, a handler is not)
    rng = random.Random(args.seed)
    kinds = ["train"] * 4 + ["train-cached"] * 2 + ["host-blocking"] * 2 + ["eval"] * 2 + \
        ["sweep"] * 2 + ["report"]
    with tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (TESTS, ROOT, os.environ.get("PYTHONPATH")) if p)}
        finished = os.path.join(work, "finished")
        subprocess.run([sys.executable, "-m", "jaxppo.cli", "train", "--config", CARTPOLE, *TINY,
                        "--logdir", work, "--run-name", "finished"], cwd=work, env=env,
                       check=True, capture_output=True)
        rows = []
        for i in range(args.draws):
            row = draw(rng, rng.choice(kinds), work, finished, args.slow)
            rows.append(row)
            print(f"{i + 1:3d} {row['kind']:14s} {'ign ' if row['ignored'] else '    '}"
                  f"at {row['at']:5.1f} s {'+'.join(row['sent']) or '-':14s} rc {row['rc']}: "
                  f"{row['outcome']} | {row['last'][:110]}", flush=True)
    tally = collections.Counter(r["outcome"] for r in rows)
    by_kind = collections.Counter((r["kind"], r["outcome"]) for r in rows)
    text = [f"{args.draws} draws (seed {args.seed}, start-up slowed by {args.slow:g} s): "
            + ", ".join(f"{n} {o}" for o, n in tally.most_common()), "",
            "| command | outcome | draws |", "|---|---|---|"]
    text += [f"| {k} | {o} | {n} |" for (k, o), n in sorted(by_kind.items())]
    print("\n".join(text))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(text) + "\n")
    bad = sum(n for o, n in tally.items() if o.isupper() or o.startswith(("BAD", "NOT")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

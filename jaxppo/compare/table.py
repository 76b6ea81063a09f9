"""`jaxppo compare`'s table: one row per system (medians over the repeats), the ratios, and
the files (compare.md, compare.csv, config.json, compare.png)."""

from __future__ import annotations

import csv
import io
import json
import os
import statistics

from jaxppo.compare import systems
from jaxppo.compare.fit import threads_text
from jaxppo.config import PPOConfig
from jaxppo.plots import has_bar, plot_compare
from jaxppo.writes import write_failed, write_whole


def label(system: str, config: PPOConfig, seeds: int) -> str:
    return systems.label(system, config.num_envs, seeds)


FAIR_BAND = 0.2
"""On an env with a solve threshold, a system's final return must lie within this fraction of
the threshold below the best system's final return (CartPole: within 95 of it). Not narrower:
a final return is one seed's per repeat (jaxppo-seeds': the mean of N seeds), and PPO's
CartPole seeds end between ~400 and 500 at the default budget; a wrong mapping that does not
learn (or learns far less) ends far below."""


def fairness(rows: list[dict], threshold: float | None) -> list[str]:
    """Flag (row["band"] = "OUT") every system whose final return falls below the band the
    best system sets on an env with a threshold, unless it solved in every repeat (the final
    return is the last rollout's episodes: one late dip of a learner that solved is no sign of
    a different algorithm). The same hyperparameters must learn alike, so a system far below
    the others likely runs a different algorithm (a mapping error). Returns the notes."""
    ran = [r for r in rows if not r.get("skipped")]
    finals = [r["final_return"] for r in ran if r.get("final_return") is not None]
    if threshold is None or len(ran) < 2 or not finals:
        for r in ran:
            r["band"] = "-"
        return []
    top, width = max(finals), FAIR_BAND * abs(threshold)
    notes = []
    for r in ran:
        final = r.get("final_return")
        if final is not None and final >= top - width:
            r["band"] = "ok"
            continue
        if r.get("repeats") and r.get("solved") == f"{r['repeats']}/{r['repeats']}":
            r["band"] = "ok (solved every repeat)"  # a last rollout's dip, not a lesser learner
            continue
        r["band"] = "OUT"
        got = "no episode ended" if final is None else f"final return {final:.1f}"
        notes.append(f"FAIRNESS: {r['label']}: {got}, below the band {top - width:.1f} to "
                     f"{top:.1f} (the best system's final return less {FAIR_BAND:.0%} of the "
                     "solve threshold): the same hyperparameters should learn alike; check "
                     "this system's mapping")
    return notes


def skipped_row(system: str, config: PPOConfig, seeds: int, reason: str) -> dict:
    """The row of a system that cannot run this env: "-" everywhere, and why."""
    return {"system": system, "label": label(system, config, seeds), "repeats": 0,
            "skipped": reason}


def aggregate(system: str, results: list[dict], config: PPOConfig, seeds: int,
              has_threshold: bool = True) -> dict:
    """One table row: medians over the repeats; solve columns only where the env has a
    threshold (None/"-" otherwise: "not solved" would claim a bar that does not exist); the
    threads the system computed with, the highest load read before one of its runs and the most
    cores other work kept busy during one."""
    med = lambda key: statistics.median(r[key] for r in results)  # noqa: E731
    solves = [r["solve_s"] for r in results if r["solve_s"] is not None]
    finals = [r["final_return"] for r in results if r["final_return"] is not None]
    loads = [r["load"] for r in results if r.get("load") is not None]
    others = [r["other_cores"] for r in results if r.get("other_cores") is not None]
    return {
        "system": system,
        "label": label(system, config, seeds),
        "repeats": len(results),
        "setup_s": med("setup_s"),
        "run_s": med("run_s"),
        "sps": med("sps"),
        "solve_s": statistics.median(solves) if len(solves) == len(results) else None,
        "has_threshold": has_threshold,
        "solved": f"{len(solves)}/{len(results)}" if has_threshold else "-",
        "final_return": statistics.mean(finals) if finals else None,
        "threads": threads_text(system, config, results[0]),
        "peak_mb": _med_or_none([r.get("peak_bytes") for r in results], 2**20),
        "procs": _max_or_none([r.get("procs") for r in results]),
        "tree_threads": _max_or_none([r.get("tree_threads") for r in results]),
        "load": max(loads) if loads else None,
        "other_cores": max(others) if others else None,
    }


def _med_or_none(values: list, scale: float = 1.0) -> float | None:
    seen = [v for v in values if v is not None]
    return statistics.median(seen) / scale if seen else None


def _max_or_none(values: list) -> int | None:
    seen = [v for v in values if v is not None]
    return max(seen) if seen else None


def stopped_early(system: str, k: int, result: dict, config: PPOConfig,
                  seeds: int) -> str | None:
    """The note for a child that stopped before its budget (a signal, a divergence): such a
    run is no measurement of the system and is never counted. None for a whole run."""
    want = config.env_steps * (seeds if system == "jaxppo-seeds" else 1)
    status = result.get("status", "finished")
    if status == "finished" and result["env_steps"] >= want:
        return None
    return (f"{system} repeat {k + 1} stopped early ({status}, {result['env_steps']:,} of "
            f"{want:,} steps): not counted")


class CompareInterrupted(KeyboardInterrupt):
    """A Ctrl-C (or SIGTERM) during compare after some runs completed: their rows and notes,
    for `compare_and_report` to write before the command stops (`out_dir`: where)."""

    def __init__(self, rows: list[dict], notes: list[str], cause: BaseException):
        super().__init__("interrupted")
        self.rows, self.notes = rows, notes
        self.signum = getattr(cause, "signum", 2)
        self.out_dir: str | None = None


def measured(runs: dict[str, list[dict]], config: PPOConfig, seeds: int, has_threshold: bool,
             notes: list[str], stop: BaseException | None,
             repeats: int) -> tuple[list[dict], list[str]]:
    """The rows of the systems with a complete run, and the notes; after a stop, a
    `CompareInterrupted` holding them (the stop itself when nothing completed)."""
    rows = [aggregate(s, r, config, seeds, has_threshold) for s, r in runs.items() if r]
    missing = [s for s, r in runs.items() if not r]
    if stop is not None:
        done = sum(len(r) for r in runs.values())
        if not done:
            raise stop
        raise CompareInterrupted(rows, notes + [
            f"interrupted after {done} complete run(s) of {repeats * len(runs)}: the table "
            "holds what was measured (its repeats column says how many each)"], stop)
    if not rows:
        raise RuntimeError("no system completed a run (every one stopped early)")
    if missing:
        notes = notes + [f"no complete run of {', '.join(missing)}: left out of the table"]
    return rows, notes


def add_ratios(rows: list[dict]) -> None:
    """SPS of each system over each SB3 variant's (the headline ×)."""
    for ref in ("sb3-dummy", "sb3-subproc"):
        base = next((r for r in rows if r["system"] == ref), None)
        for r in rows:
            if not r.get("skipped"):
                r[f"sps_x_{ref}"] = r["sps"] / base["sps"] if base else None


def _fmt(v, spec: str, none: str = "-") -> str:
    return none if v is None else format(v, spec)


def table_markdown(rows: list[dict], notes: list[str], header: str) -> str:
    lines = [header, "",
             "| system | threads | setup/compile (s) | SPS (median) | × SB3 Dummy | "
             "× SB3 Subproc | time to solve incl. setup (s) | solved | final return | "
             "return band | peak memory, process tree (MB) | processes / threads (tree) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['label']} | - | - | - | - | - | - | - | - | - | - | - |")
            continue
        procs = ("-" if r.get("procs") is None
                 else f"{r['procs']} / {r.get('tree_threads') or '-'}")
        lines.append(
            f"| {r['label']} | {r.get('threads', '-')} | {r['setup_s']:.1f} | {r['sps']:,.0f} | "
            f"{_fmt(r.get('sps_x_sb3-dummy'), ',.1f')} | "
            f"{_fmt(r.get('sps_x_sb3-subproc'), ',.1f')} | "
            f"{_fmt(r['solve_s'], '.1f', 'not solved' if has_bar(r) else '-')} | "
            f"{r['solved']} | "
            f"{_fmt(r['final_return'], '.1f')} | {r.get('band', '-')} | "
            f"{_fmt(r.get('peak_mb'), ',.0f')} | {procs} |")
    skipped = [f"{r['label']}: - ({r['skipped']})" for r in rows if r.get("skipped")]
    lines += ["", *[f"- {n}" for n in skipped + notes]]
    return "\n".join(lines) + "\n"


def write_outputs(out_dir: str, rows: list[dict], config: PPOConfig, notes: list[str],
                  header: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    md = table_markdown(rows, notes, header)
    table = io.StringIO(newline="")
    w = csv.DictWriter(table, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    w.writeheader()
    w.writerows(rows)
    for name, data in (("compare.md", md), ("compare.csv", table.getvalue()),
                       ("config.json", json.dumps(config.to_dict(), indent=2))):
        write_whole(os.path.join(out_dir, name), data, f"compare's {name}")
    png = os.path.join(out_dir, "compare.png")
    try:
        plot_compare(png, [r for r in rows if not r.get("skipped")],
                     f"{config.env_id}, {config.env_steps:,} steps")
    except OSError as e:
        raise write_failed(png, "compare's figure", e) from None
    return md

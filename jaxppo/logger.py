"""Host-side logging for a run directory: metrics.csv, TensorBoard (CleanRL's tag names),
live progress, the solve point, summary.json and curve.png.

Only the host writes files, between compiled chunks; nothing here runs inside jit.
"""

from __future__ import annotations

import csv
import json
import os
import queue
import sys
import threading
import time

import numpy as np
import yaml

from jaxppo.config import PPOConfig
from jaxppo.envs import SOLVE_THRESHOLDS
from jaxppo.train import METRIC_NAMES

SOLVE_WINDOW = 20
"""A run counts as solved once the mean over seeds of each seed's mean return over its last
SOLVE_WINDOW episodes reaches the env's threshold (Gymnasium's reward_threshold, which it
defines over 100 episodes; 20 keeps short runs meaningful). One lucky episode is not a solve."""

TB_TAGS = {
    "episodic_return": "charts/episodic_return",
    "episodic_length": "charts/episodic_length",
    "episodes": "charts/episodes",
    "learning_rate": "charts/learning_rate",
    "policy_loss": "losses/policy_loss",
    "value_loss": "losses/value_loss",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac",
    "explained_variance": "losses/explained_variance",
    "grad_norm": "losses/grad_norm",
    "minibatch_fraction": "losses/minibatch_fraction",
}


def import_tensorboardx():
    """Import tensorboardX without torch. Where torch is installed, tensorboardX imports it
    (~1 s) only to accept torch tensors, which jaxppo never logs; that second would otherwise
    sit between compiling and the first update of every run."""
    if "tensorboardX" not in sys.modules and "torch" not in sys.modules:
        sys.modules["torch"] = None  # `import torch` raises ImportError during this import
        try:
            import tensorboardX  # noqa: F401
        finally:
            del sys.modules["torch"]
    import tensorboardX

    return tensorboardX


def write_config(run_dir: str, config: PPOConfig) -> None:
    with open(os.path.join(run_dir, "config.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(config.to_dict(), f, sort_keys=False)


class SolveTracker:
    """The solve rule, fed one update (or one SB3 rollout) at a time, so jaxppo and the PyTorch
    pipeline in `jaxppo compare` are judged by the same code."""

    def __init__(self, threshold: float | None, num_runs: int):
        self.threshold = threshold
        self.history: list[list[tuple[float, float]]] = [[] for _ in range(num_runs)]

    def add(self, mean_returns, counts) -> bool:
        """Record each run's (mean return, episode count) of one update; True once solved."""
        window = []
        for r, hist in enumerate(self.history):
            if counts[r] > 0:
                hist.append((float(mean_returns[r]), float(counts[r])))
            window.append(self._trailing_mean(hist))
        return (self.threshold is not None and all(w is not None for w in window)
                and float(np.mean(window)) >= self.threshold)

    @staticmethod
    def _trailing_mean(history: list[tuple[float, float]]) -> float | None:
        """Episode-weighted mean return over the last >= SOLVE_WINDOW episodes, or None."""
        total = count = 0.0
        for mean, n in reversed(history):
            total += mean * n
            count += n
            if count >= SOLVE_WINDOW:
                return total / count
        return None


class Progress:
    """A tqdm bar on a terminal; plain flushed lines otherwise (CI logs, pipes)."""

    def __init__(self, total_steps: int, enabled: bool, start_steps: int = 0):
        self.enabled = enabled
        self.total = total_steps
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, initial=start_steps, unit="step",
                            unit_scale=True, dynamic_ncols=True)

    def update(self, steps: int, sps: float, mean_return: float, wall_s: float) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.n = steps
            self.bar.set_postfix(SPS=f"{sps:,.0f}", ret=f"{mean_return:.1f}", refresh=False)
            self.bar.refresh()
        else:
            pct = 100.0 * steps / self.total
            print(f"[{pct:5.1f}%] steps {steps:,} | SPS {sps:,.0f} | mean return "
                  f"{mean_return:.2f} | t={wall_s:.1f}s", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class RunLogger:
    """Writes everything a run directory holds, chunk by chunk. Runs = seeds (or settings x seeds)."""

    def __init__(self, run_dir: str, config: PPOConfig, num_runs: int, *, run_names: list[str],
                 progress: bool, tensorboard: bool = True, start_update: int = 0,
                 previous: dict | None = None):
        self.run_dir = run_dir
        self.config = config
        self.num_runs = num_runs
        self.run_names = run_names
        self.threshold = SOLVE_THRESHOLDS.get(config.env_id)
        prev = previous or {}
        self.solved = prev.get("solved")
        self.time_offset = float(prev.get("wall_s", 0.0))  # resumed runs keep counting
        self.episodes = np.asarray(prev.get("episodes_per_run", np.zeros(num_runs)), float)
        self.tracker = SolveTracker(self.threshold, num_runs)
        self.steps_timed = 0
        self.run_time = 0.0
        self.last_returns = None
        csv_path = os.path.join(run_dir, "metrics.csv")
        new_csv = not os.path.exists(csv_path) or start_update == 0
        self._csv_file = open(csv_path, "w" if new_csv else "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._csv_file)
        if new_csv:
            self._csv.writerow(["update", "run", "env_steps", "wall_s", *METRIC_NAMES])
        self.writers = []
        if tensorboard:
            SummaryWriter = import_tensorboardx().SummaryWriter
            for name in run_names:
                w = SummaryWriter(os.path.join(run_dir, "tb", name))
                if start_update == 0:
                    rows = "\n".join(f"|{k}|{v}|" for k, v in config.to_dict().items())
                    w.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
                self.writers.append(w)
        self.progress = Progress(config.env_steps, progress,
                                 start_steps=start_update * config.batch_size)
        # CSV and TensorBoard writes run on a writer thread, overlapping the next chunk's compute
        # (XLA releases the GIL while it runs); `close` waits for every row to be written.
        self._queue: queue.Queue = queue.Queue()
        self._write_error: BaseException | None = None
        self._writer = threading.Thread(target=self._write_loop, daemon=True)
        self._writer.start()

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._write_error is None:
                try:
                    self._write(*item)
                except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                    self._write_error = e

    def _raise_write_error(self) -> None:
        if self._write_error is not None:
            raise self._write_error

    def _write(self, m: dict, first_update: int, wall: float, sps: float) -> None:
        R, C = m["env_steps"].shape
        for j in range(C):
            for r in range(R):
                self._csv.writerow([first_update + j + 1, r, int(m["env_steps"][r, j]),
                                    f"{wall:.3f}", *(f"{float(m[k][r, j]):.6g}"
                                                     for k in METRIC_NAMES)])
        self._csv_file.flush()
        from tensorboardX.proto.summary_pb2 import Summary

        for r, w in enumerate(self.writers):
            file_writer = w._get_file_writer()
            for j in range(C):
                # One event per update carrying every scalar: ~12x fewer events than add_scalar.
                values = [Summary.Value(tag=tag, simple_value=float(m[k][r, j]))
                          for k, tag in TB_TAGS.items()]
                file_writer.add_summary(Summary(value=values), int(m["env_steps"][r, j]))
            w.add_scalar("charts/SPS", sps, int(m["env_steps"][r, -1]))
            w.flush()

    def log_chunk(self, result) -> None:
        self._raise_write_error()  # a failed write (disk full, ...) stops the run loudly
        m = result.metrics
        R, C = m["env_steps"].shape
        first_update = result.update - C
        wall = self.time_offset + result.wall_s
        # SPS over the compiled chunks only (compile time excluded), per run.
        self.steps_timed += C * self.config.batch_size
        self.run_time += result.chunk_s
        sps = self.steps_timed / max(self.run_time, 1e-9)
        self._queue.put((m, first_update, wall, sps))
        self._check_solved(m, result, first_update)
        self.episodes += m["episodes"].sum(1)
        self.last_returns = m["episodic_return"][:, -1]
        self.progress.update(int(m["env_steps"][0, -1]), sps * R,
                             float(np.mean(self.last_returns)), wall)

    def _check_solved(self, m, result, first_update) -> None:
        if self.solved is not None or self.threshold is None:
            return
        C = m["episodic_return"].shape[1]
        j = next((c for c in range(C)
                  if self.tracker.add(m["episodic_return"][:, c], m["episodes"][:, c])), None)
        if j is None:
            return
        # The wall second inside a chunk is interpolated: updates take equal time.
        wall = self.time_offset + result.wall_s - result.chunk_s * (C - j - 1) / C
        episodes = self.episodes + m["episodes"][:, : j + 1].sum(1)
        self.solved = {"env_steps": int(m["env_steps"][0, j]), "update": first_update + j + 1,
                       "episodes": float(np.mean(episodes)), "wall_s": round(float(wall), 3),
                       "threshold": self.threshold}

    def close(self, *, compile_s: float, wall_s: float, finished: bool,
              env_steps_done: int, diverged: dict | None = None) -> dict:
        self.progress.close()
        self._queue.put(None)
        self._writer.join()
        self._raise_write_error()
        self._csv_file.close()
        for w in self.writers:
            w.close()
        returns = self.last_returns if self.last_returns is not None else np.zeros(self.num_runs)
        total_wall = self.time_offset + wall_s
        summary = {
            "env_id": self.config.env_id,
            "num_runs": self.num_runs,
            "final_return": [float(x) for x in returns],
            "final_return_mean": float(np.mean(returns)),
            "final_return_std": float(np.std(returns)),
            "wall_s": round(total_wall, 3),
            "compile_s": round(compile_s, 3),
            "sps": round(self.steps_timed * self.num_runs / max(self.run_time, 1e-9), 1),
            "sps_per_run": round(self.steps_timed / max(self.run_time, 1e-9), 1),
            "env_steps": int(env_steps_done),
            "episodes_per_run": [float(x) for x in self.episodes],
            "solved": self.solved,
            "finished": finished,
            "diverged": diverged,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        with open(os.path.join(self.run_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        return summary


class NullLogger:
    """What processes other than 0 log in a multi-process run: nothing."""

    def log_chunk(self, result) -> None:
        pass

    def close(self, **kwargs) -> dict:
        return {}


def read_metrics_csv(run_dir: str) -> dict[str, np.ndarray]:
    """metrics.csv back as arrays [R, U] per column."""
    with open(os.path.join(run_dir, "metrics.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    runs = max(int(r["run"]) for r in rows) + 1
    out = {}
    for k in rows[0]:
        col = np.array([float(r[k]) for r in rows])
        out[k] = col.reshape(-1, runs).T
    return out

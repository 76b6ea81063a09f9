"""Weights & Biases, off unless asked for (CleanRL's `--track`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxppo.core.metrics import ENV_METRIC_PREFIX, EPISODE_METRICS, TB_TAGS
from jaxppo.errors import UsageError
from jaxppo.run.events import Callback, ChunkEvent, RunInfo, RunResult


class WandbLogger(Callback):
    """Weights & Biases (`pip install 'jaxppo[wandb]'`), off unless asked for (CleanRL's
    `--track`): one W&B run per jaxppo run, the mean over runs of every metric per update
    under CleanRL's tags, and each run's return as `charts/episodic_return/<run name>`.

    Pass it as `Experiment(config, callbacks=[jaxppo.WandbLogger("my-project")])` (the CLI:
    `jaxppo train --wandb`). The W&B run gets the config, logs against env steps, resumes
    with the jaxppo run (`resume="allow"`), and ends with the scalar entries of
    `summary.json` in its summary. Episode metrics are averaged over the runs whose episode
    ended in that update.

    Args:
      project: the W&B project.
      **init_kwargs: further keyword arguments for `wandb.init` (`entity`, `name`, `tags`,
        ...).

    Raises:
      UsageError: wandb is not installed (checked here, before a run directory exists).
    """

    def __init__(self, project: str = "jaxppo", **init_kwargs: Any):
        try:  # at construction: a missing extra is refused before a run directory exists
            import wandb
        except ImportError:
            raise UsageError("logging to Weights & Biases needs wandb: "
                             "pip install 'jaxppo[wandb]'") from None
        self.wandb, self.project, self.init_kwargs = wandb, project, init_kwargs

    def on_start(self, info: RunInfo) -> None:
        try:
            self.run = self.wandb.init(project=self.project, config=info.config.to_dict(),
                                       dir=info.run_dir, resume="allow", **self.init_kwargs)
        except Exception as e:  # noqa: BLE001 - W&B's own (no API key, no network): one line
            text = (str(e).strip().splitlines() or [""])[0]
            raise UsageError(f"Weights & Biases could not start ({type(e).__name__}: {text}); "
                             "log in (wandb login), or set WANDB_MODE=offline, or drop "
                             "--wandb") from None
        self.names = info.run_names

    def on_chunk(self, event: ChunkEvent) -> None:
        m = event.metrics
        stepped = slice(None) if event.active is None else event.active  # not stopped agents
        for j in range(m["episodes"].shape[1]):
            ended = m["episodes"][:, j] > 0
            row = {tag: float(np.mean(m[k][stepped, j])) for k, tag in TB_TAGS.items()
                   if k not in EPISODE_METRICS}
            if ended.any():
                for k in (*EPISODE_METRICS, *(k for k in m if k.startswith(ENV_METRIC_PREFIX))):
                    row[TB_TAGS.get(k, k)] = float(np.mean(m[k][ended, j]))
                for r in np.flatnonzero(ended):
                    row[f"charts/episodic_return/{self.names[r]}"] = float(m["episodic_return"][r, j])
            row["charts/SPS"] = event.sps
            self.run.log(row, step=int(m["env_steps"][0, j]))

    def on_end(self, result: RunResult) -> None:
        self.run.summary.update({k: v for k, v in result.summary.items()
                                 if isinstance(v, (int, float, str))})
        self.run.finish()

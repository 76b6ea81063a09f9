"""The one table of the metrics an update reports: name, TensorBoard tag, and whether it is
per-episode. Everything that lists metrics (the CSV columns, TensorBoard's tags, the memory
estimate) derives from it, so adding a metric is one row here plus computing it in
`train.update_step` (a test checks the two agree).

Each metric is one float32 scalar per update: [U] per run, U = num_updates.
"""

from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    name: str
    tb_tag: str | None  # CleanRL's TensorBoard tag; None: not written to TensorBoard
    per_episode: bool = False  # logged only for updates in which an episode ended


METRICS: tuple[Metric, ...] = (
    # The mean over the episodes that ended in this update (else the latest such mean).
    Metric("episodic_return", "charts/episodic_return", per_episode=True),
    Metric("episodic_length", "charts/episodic_length", per_episode=True),
    Metric("episodes", "charts/episodes"),  # episodes ended in this update
    # The clipped objective's statistics (`loss.LossInfo`), mean over applied minibatches.
    Metric("policy_loss", "losses/policy_loss"),
    Metric("value_loss", "losses/value_loss"),
    Metric("entropy", "losses/entropy"),
    Metric("approx_kl", "losses/approx_kl"),
    Metric("old_approx_kl", "losses/old_approx_kl"),
    Metric("clipfrac", "losses/clipfrac"),
    Metric("explained_variance", "losses/explained_variance"),
    Metric("learning_rate", "charts/learning_rate"),
    Metric("grad_norm", "losses/grad_norm"),
    Metric("minibatch_fraction", "losses/minibatch_fraction"),  # applied before the KL stop
    Metric("env_steps", None),  # the x axis: TensorBoard's step, a CSV column of its own
    Metric("nonfinite", None),  # 1.0 where the update diverged
    Metric("nonfinite_source", None),  # k: NONFINITE_SOURCES[k - 1]; 0 for a clean update
)
"""In CSV column order (`metrics.csv` depends on it: append new rows, never reorder)."""

METRIC_NAMES = tuple(m.name for m in METRICS)
TB_TAGS = {m.name: m.tb_tag for m in METRICS if m.tb_tag is not None}
EPISODE_METRICS = tuple(m.name for m in METRICS if m.per_episode)

NONFINITE_SOURCES = ("env_obs", "env_reward", "action_mask", "normaliser", "loss", "params")
"""What `metrics["nonfinite_source"]` = k names (k = 1..6; 0: a clean update), in the order
data flows through an update: NaN/Inf env observations or rewards, an action mask that allows
nothing, the obs/reward normaliser's statistics, the losses or gradients, the parameters or
optimizer state. The first that fails is the cause; the later ones are its consequences."""

ENV_METRIC_PREFIX = "env/"
"""Metrics an environment reports at episode end (`episode_metrics`) are logged under this,
outside the table: which there are depends on the env."""

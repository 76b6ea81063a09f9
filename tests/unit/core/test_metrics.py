"""The metric table (`core/metrics.py`) and what `update_step` computes agree, so a metric is
added in two places only: its row and its value."""

import csv
import functools
import os

import jax
import pytest
from conftest import FIXTURES

from jaxppo import Hparams, make_train
from jaxppo.core.metrics import (
    ENV_METRIC_PREFIX,
    EPISODE_METRICS,
    METRIC_NAMES,
    METRICS,
    TB_TAGS,
)
from jaxppo.core.train import update_step

pytestmark = pytest.mark.unit

LEGACY = os.path.join(FIXTURES, "legacy")


def test_update_step_computes_exactly_the_tables_metrics(tiny_config):
    """Traced only (`jax.eval_shape`, no compile): each metric is one 4-byte scalar per update,
    the size the memory estimate counts."""
    trainer = make_train(tiny_config)
    step = functools.partial(update_step, hp=Hparams.from_config(tiny_config),
                             config=tiny_config, env=trainer.env, network=trainer.network)
    runner = jax.eval_shape(trainer.init, jax.random.key(0))
    _, metrics = jax.eval_shape(step, runner, None)
    computed = {k for k in metrics if not k.startswith(ENV_METRIC_PREFIX)}
    assert computed - set(METRIC_NAMES) == set(), "computed, but no row in core/metrics.py"
    assert set(METRIC_NAMES) - computed == set(), "a row in core/metrics.py, never computed"
    for name, m in metrics.items():
        assert m.shape == () and m.dtype.itemsize == 4, name


def test_the_table_names_each_metric_and_tensorboard_tag_once():
    assert len(set(METRIC_NAMES)) == len(METRIC_NAMES) == len(METRICS)
    assert len(set(TB_TAGS.values())) == len(TB_TAGS)
    assert all(tag.split("/")[0] in ("charts", "losses") for tag in TB_TAGS.values())
    assert set(EPISODE_METRICS) == {"episodic_return", "episodic_length"} <= set(TB_TAGS)
    assert not any(name.startswith(ENV_METRIC_PREFIX) for name in METRIC_NAMES)


def test_csv_columns_keep_the_order_earlier_runs_were_written_in():
    """Resumed runs append to their `metrics.csv`: new rows go at the table's end only."""
    with open(os.path.join(LEGACY, "train_2seeds_stopped", "metrics.csv")) as f:
        header = next(csv.reader(f))
    assert header[:4] == ["update", "run", "env_steps", "wall_s"]
    columns = [name for name in METRIC_NAMES if name != "env_steps"]
    assert columns[:len(header) - 4] == header[4:]

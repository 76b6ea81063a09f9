"""Learning tests: the CartPole configs solve CartPole-v1 within their budgets and stay solved.

What is asserted is what a user relies on, over 8 seeds and with margin, never one seed's
late trajectory: XLA:CPU picks kernels by CPU model, so float rounding (amplified over a long
RL run) differs across machines (a seed that holds 500 here can sag on another CPU)."""

import os

import pytest
from conftest import ROOT

from jaxppo import Experiment, load_config


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cartpole.yaml", "cartpole_fast.yaml"])
def test_cartpole_configs_solve_and_stay_solved(name):
    config = load_config(os.path.join(ROOT, "configs", name))
    # 8 seeds: 2 x 16 of each config all held 500 (docs/benchmarks/returns.md), and "at most
    # one of 8 below 400" catches a change that sinks one seed in ten about as often as "at
    # most two of 16" did (0.19 against 0.21), in half the time
    result = Experiment(config, seeds=8, logdir=None, progress=False).run()
    # The solve rule: the mean over seeds of each seed's mean return over its last 20 episodes
    # reached Gymnasium's 475, within the budget.
    assert result.solved is not None and result.solved["env_steps"] <= config.env_steps
    returns = result.metrics["episodic_return"]  # [8 seeds, updates]
    last = returns[:, -returns.shape[1] // 10:].mean(axis=1)  # each seed's last 10% of updates
    assert last.mean() >= 450, f"mean return over the last 10% of updates per seed: {last}"
    assert (last >= 400).sum() >= 7, f"mean return over the last 10% of updates per seed: {last}"

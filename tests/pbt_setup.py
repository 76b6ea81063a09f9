"""What the PBT tests share (tests/unit/search/test_pbt_pieces.py, tests/integration/test_pbt.py):
a tiny CartPole config of 8 updates and a space of a log range, a range and a choice."""

import os

from conftest import ROOT

from jaxppo.config import load_config, parse_overrides

CARTPOLE = os.path.join(ROOT, "configs", "cartpole.yaml")
SETS = ["total_timesteps=512", "num_envs=4", "num_steps=16", "hidden_sizes=[16,16]"]
TINY = [a for s in SETS for a in ("--set", s)] + ["--no-tensorboard", "--no-progress"]
SPACE_ARGS = ["lr=1e-4:1e-2:log", "ent_coef=0:0.02", "clip_eps=0.1,0.2,0.3"]
SPACE = {"lr": (1e-4, 1e-2, "log"), "ent_coef": (0.0, 0.02), "clip_eps": [0.1, 0.2, 0.3]}
PBT = ["--search", "pbt", "--population", "4", "--interval", "2",
       *(a for s in SPACE_ARGS for a in ("--space", s))]


def pbt_config():
    return load_config(CARTPOLE, parse_overrides(SETS))  # 8 updates of 64 steps

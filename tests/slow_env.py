"""Test helpers for stop signals at awkward moments (tests/integration/test_faults_stop_anywhere.py,
scripts/stop_anywhere.py): imported with `--import slow_env` (this folder on PYTHONPATH).

- `JAXPPO_TEST_SLOW_IMPORT_S`: seconds of busy work while this module imports, so the
  command's start-up is slow on any machine (a busy machine's start-up took 23-30 s).
  `JAXPPO_TEST_SLOW_IMPORT_UNTIL_HELD=1`: the work ends early once jaxppo's start-up holds a
  stop signal (a signal it dropped leaves the work to run its whole time, and the run on).
- `gymnasium/slow_env:Blocking-v0`: a Gymnasium corridor whose `step` never returns once it has
  taken `JAXPPO_TEST_BLOCK_AFTER` steps (per env; unset or 0: it never blocks), as a hung
  simulator's would: not even a KeyboardInterrupt raised in it ends it.
"""

import os
import sys
import threading
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

print("slow_env: importing", file=sys.stderr, flush=True)  # what a test waits for
_end = time.monotonic() + float(os.environ.get("JAXPPO_TEST_SLOW_IMPORT_S", "0"))
_until_held = os.environ.get("JAXPPO_TEST_SLOW_IMPORT_UNTIL_HELD") == "1"
_process = sys.modules.get("jaxppo.process")
while time.monotonic() < _end:
    sum(range(20_000))  # Python work, as a heavy import's
    if _until_held and _process is not None and _process.signals_seen():
        break  # the signal is held: the rest of the import would only take time


class Blocking(gym.Env):
    """Step right (1) or left (0); the right end pays 1 and ends the episode."""

    def __init__(self, size: int = 4):
        self.size, self.steps = size, 0
        self.block_after = int(os.environ.get("JAXPPO_TEST_BLOCK_AFTER", "0"))
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return np.array([self.pos / self.size, 1.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        if self.block_after and self.steps > self.block_after:
            print("slow_env: blocked", file=sys.stderr, flush=True)
            while True:  # never returns, whatever is raised in it (where XLA runs the
                try:  # callback on the main thread, a stop signal's KeyboardInterrupt)
                    threading.Event().wait()
                except BaseException:  # noqa: BLE001, S110 - a hung simulator's C code
                    pass
        self.pos = max(-self.size, min(self.size, self.pos + (1 if int(action) == 1 else -1)))
        done = self.pos == self.size
        return self._obs(), float(done), done, False, {}


gym.register(id="Blocking-v0", entry_point="slow_env:Blocking", max_episode_steps=40)

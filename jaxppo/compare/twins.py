"""Which environment the PyTorch systems of `jaxppo compare` run for a jaxppo env id: the kind
of twin it has and the Gymnasium id. Plain data and string rules, imported by the parent and by
the PyTorch systems' processes, which import no JAX (`torch_child.py`)."""

from __future__ import annotations

from jaxppo.errors import ConfigError

GYMNASIUM_IDS = {
    "CartPole-v1": "CartPole-v1",
    "Acrobot-v1": "Acrobot-v1",
    "MountainCar-v0": "MountainCar-v0",
    "MountainCarContinuous-v0": "MountainCarContinuous-v0",
    "Pendulum-v1": "Pendulum-v1",
}
"""gymnax ids whose gymnasium twin has the same dynamics, spaces and time limit."""

MINATAR_GAMES = {"Asterix-MinAtar": "asterix", "Breakout-MinAtar": "breakout",
                 "Freeway-MinAtar": "freeway", "Seaquest-MinAtar": "seaquest",
                 "SpaceInvaders-MinAtar": "space_invaders"}
"""gymnax's MinAtar games -> the reference `minatar` package's game names: the PyTorch side
runs the reference package (`sb3_envs.MinAtarEnv`)."""
MINATAR_IDS = tuple(MINATAR_GAMES)

MINATAR_TIME_LIMITS = {"Asterix-MinAtar": 1000, "Breakout-MinAtar": 1000,
                       "Freeway-MinAtar": 2500, "Seaquest-MinAtar": 1000,
                       "SpaceInvaders-MinAtar": 1000}
"""gymnax's own `max_steps_in_episode` per MinAtar game (its `EnvParams` default; held equal to
gymnax's by tests/integration/test_compare.py): a table, because asking gymnax builds its env,
which starts JAX's backend (a GPU's memory, in the parent of every run)."""

ATARI_PREFIX = "envpool/"
GYMNASIUM_PREFIX = "gymnasium/"


def env_kind(env_id: str) -> str:
    """Which SB3 twin `env_id` has: `classic` (gymnasium's classic control), `minatar` (the
    reference MinAtar), `atari` (EnvPool Atari vs ALE under SB3's Atari wrappers) or
    `gymnasium` (the same Gymnasium id on both sides); one line if none."""
    if env_id in GYMNASIUM_IDS:
        return "classic"
    if env_id in MINATAR_IDS:
        return "minatar"
    if env_id.startswith(ATARI_PREFIX) and env_id.endswith("-v5"):
        return "atari"
    if env_id.startswith(GYMNASIUM_PREFIX) and len(env_id) > len(GYMNASIUM_PREFIX):
        return "gymnasium"
    raise ConfigError(f"config key 'env_id': jaxppo compare runs envs that gymnasium has too "
                      f"({', '.join(GYMNASIUM_IDS)}), gymnax's MinAtar games, EnvPool's Atari "
                      f"games (envpool/<Game>-v5) and gymnasium/<id>, not {env_id!r}")


def minatar_time_limit(env_id: str, max_episode_steps: int | None) -> int | None:
    """The time limit jaxppo's gymnax MinAtar runs under: gymnax's own, or the config's
    `max_episode_steps` where that is shorter (jaxppo truncates at the min); None for an env
    that is no MinAtar game (its twin keeps its own limit)."""
    own = MINATAR_TIME_LIMITS.get(env_id)
    if own is None:
        return None
    return min(own, max_episode_steps) if max_episode_steps else own


def gym_id(env_id: str) -> str:
    """The Gymnasium id a classic-control or `gymnasium/<id>` env runs as on the PyTorch side
    (MinAtar and Atari build their own: `sb3_envs`)."""
    return GYMNASIUM_IDS.get(env_id) or env_id.removeprefix(GYMNASIUM_PREFIX)

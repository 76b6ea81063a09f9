"""How `reset: auto` picks a reset strategy (`jaxppo/envs/resets.py`): the config's word first,
then the env's (or its suite's) declaration, then XLA's estimate of the reset against a step;
and that estimate tells a world-generating reset from a cheap one without running either."""

import jax
import jax.numpy as jnp
import pytest

from jaxppo.envs import VecEnv
from jaxppo.envs.resets import COSTLY_RESET, choose_reset, note, reset_cost_ratio


def _never():
    raise AssertionError("the estimate was asked for where a word was given")


@pytest.mark.parametrize("reset", ["predrawn", "cond", "optimistic"])
def test_the_configs_reset_wins_over_any_declaration(reset):
    assert choose_reset(reset, True, "the env", _never) == (reset, "set in the config")
    assert choose_reset(reset, False, "the env", _never).mode == reset


def test_a_declaration_wins_over_the_estimate_and_names_who_declared():
    assert choose_reset("auto", True, "the env", _never) == (
        "optimistic", "costly reset, declared by the env")
    assert choose_reset("auto", False, "its suite", _never) == (
        "predrawn", "cheap reset, declared by its suite")


@pytest.mark.parametrize("ratio, mode", [(COSTLY_RESET, "optimistic"), (40.0, "optimistic"),
                                         (COSTLY_RESET - 0.1, "predrawn"), (1.0, "predrawn")])
def test_the_estimate_decides_at_the_threshold(ratio, mode):
    choice = choose_reset("auto", None, "the env", lambda: ratio)
    assert choice.mode == mode
    assert f"~{ratio:.1f} steps by XLA's estimate" in choice.why


def test_no_estimate_is_taken_as_cheap_and_said():
    choice = choose_reset("auto", None, "the env", lambda: None)
    assert choice == ("predrawn", "no cost estimate from XLA: taken as cheap")
    assert note(choice, 2) == "resets: predrawn (no cost estimate from XLA: taken as cheap)"


class _Grid:
    """A grid world whose reset carves an S x S level by `carves` rounds of a smoothing pass
    (a stand-in for procedural generation; none: an open room); its step moves one cell.
    Declares nothing about its reset's cost."""

    default_params = None
    S = 32

    def __init__(self, carves: int):
        self.carves = carves

    def reset_env(self, key, params):
        start = jax.random.randint(key, (2,), 0, self.S // 2)
        if not self.carves:  # an open room: only the start is drawn
            state = (jnp.zeros((self.S, self.S), bool), start)
            return self._obs(state), state
        level = jax.random.uniform(key, (self.S, self.S))
        for _ in range(self.carves):  # unrolled: XLA's estimate counts every pass
            level = 0.25 * (jnp.roll(level, 1, 0) + jnp.roll(level, -1, 0)
                            + jnp.roll(level, 1, 1) + jnp.roll(level, -1, 1))
        state = (level > 0.5, start)
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        walls, pos = state
        pos = jnp.clip(pos + jnp.array([[0, 1], [1, 0], [0, -1], [-1, 0]])[action], 0, self.S - 1)
        state = (walls, pos)
        return self._obs(state), state, jnp.float32(0.0), pos[0] == self.S - 1, {}

    def _obs(self, state):
        return jnp.concatenate([state[1].astype(jnp.float32),
                                state[0][state[1][0]].astype(jnp.float32)])

    def observation_space(self, params):
        from jaxppo.envs import Box
        return Box(0.0, float(self.S), (2 + self.S,))

    def action_space(self, params):
        from jaxppo.envs import Discrete
        return Discrete(4)


def test_the_estimate_tells_a_generated_level_from_a_cheap_reset():
    costly, cheap = _Grid(carves=30), _Grid(carves=0)
    one = VecEnv("custom/grid", 1, env=cheap)
    ratio_costly = reset_cost_ratio(costly, None, one.info.state, one.info.action_in)
    ratio_cheap = reset_cost_ratio(cheap, None, one.info.state, one.info.action_in)
    assert ratio_costly >= COSTLY_RESET > ratio_cheap, (ratio_costly, ratio_cheap)
    # an own env that declares nothing: auto follows the estimate, and says so
    env = VecEnv("custom/grid", 16, env=costly)
    assert env.reset_mode == "optimistic" and "by XLA's estimate" in env.reset_choice.why
    assert env.reset_note.startswith("resets: optimistic, 2 per step (costly reset, ~")
    assert VecEnv("custom/grid", 16, env=cheap).reset_mode == "predrawn"
    assert VecEnv("custom/grid", 16, env=cheap).reset_note == ""  # the default: no word


def test_an_env_that_breaks_under_lowering_gets_no_estimate():
    class Broken(_Grid):
        def reset_env(self, key, params):
            raise RuntimeError("no")
    one = VecEnv("custom/grid", 1, env=_Grid(0))
    assert reset_cost_ratio(Broken(0), None, one.info.state, one.info.action_in) is None


def test_the_estimate_is_made_once_per_env_and_for_the_cpu(monkeypatch):
    """Several VecEnvs of one env (the memory check, the checkpoint's template, evaluation)
    lower its reset and step once; the programs are lowered for the CPU, which has a cost
    model on every machine (a GPU plugin's lowering gives none)."""
    env = _Grid(carves=30)
    one = VecEnv("custom/grid", 1, env=_Grid(0))
    platforms = []
    real_jit = jax.jit

    def watching_jit(fn, *a, **k):
        jitted = real_jit(fn, *a, **k)

        class Watch:
            def lower(self, *args):
                platforms.extend({x.sharding.device_set.pop().platform
                                  for x in jax.tree.leaves(args)})
                return jitted.lower(*args)
        return Watch()

    import jaxppo.envs.resets as resets
    monkeypatch.setattr(resets.jax, "jit", watching_jit)
    first = reset_cost_ratio(env, None, one.info.state, one.info.action_in)
    assert first >= COSTLY_RESET and set(platforms) == {"cpu"}
    platforms.clear()
    assert reset_cost_ratio(env, None, one.info.state, one.info.action_in) == first
    assert platforms == []  # the second answer came from the cache


def test_gymnax_ids_take_their_suites_word_and_skip_the_estimate(monkeypatch):
    import jaxppo.envs.resets as resets

    monkeypatch.setattr(resets, "reset_cost_ratio", lambda *a: _never())
    assert VecEnv("CartPole-v1", 8).reset_choice == ("predrawn",
                                                      "cheap reset, declared by its suite")
    assert VecEnv("probe/Action-v0", 8).reset_choice.why == "cheap reset, declared by the env"
    assert VecEnv("CartPole-v1", 8, reset="optimistic").reset_note == (
        "resets: optimistic, 1 per step (set in the config)")
    assert VecEnv("CartPole-v1", 8, reset="predrawn").reset_note == (
        "resets: predrawn (set in the config)")

"""The EnvPool host source (`envpool/<task>`) against EnvPool's own step, on real games (the
checklist every source passes, on envpool/CartPole-v1, is tests/integration/test_env_sources.py): the same
observations, rewards and episode ends on the same actions and seeds, with EnvPool's auto-reset
transition taken out; Atari's lost life vs game over and clipped reward vs score; MuJoCo's float
observations and time limit; determinism; one-line errors, the missing assets among them."""

import importlib
import subprocess
import sys

import numpy as np
import pytest

from jaxppo import ConfigError
from jaxppo.envs import check_env_id
from jaxppo.envs.sources import envpool as E

envpool = pytest.importorskip("envpool")


def _reference(task: str, seed: int, options: dict):
    """EnvPool's own pool, one per env: env i of a source seeded `seed` is seeded `seed + i`."""
    return envpool.make(task, env_type="gymnasium", num_envs=1, seed=seed, **options)


def _layout(obs: np.ndarray) -> np.ndarray:
    """What the source gives for one of EnvPool's observations: (C, H, W) frames as (H, W, C),
    floats as float32."""
    if obs.dtype == np.uint8 and obs.ndim == 3:
        return np.transpose(obs, (1, 2, 0))
    return obs.astype(np.float32)


def _step_for_step(task: str, options: dict, actions: np.ndarray, *, seed: int = 3,
                   evaluation: bool = False) -> list[dict]:
    """Step the source and, env by env, EnvPool's own pool on the same actions; check every
    field, and return each episode end seen (with what EnvPool's next step did)."""
    num_envs = actions.shape[1]
    source = E.make_source(task, num_envs, options, evaluation)
    if task.endswith("-v5"):  # Atari: jaxppo trains under episodic life and clipped rewards
        options = {**options, "episodic_life": not evaluation, "reward_clip": not evaluation}
    refs = [_reference(task, seed + i, options) for i in range(num_envs)]
    obs = source.reset(seed)
    assert obs.dtype == source.observation_space.dtype
    assert obs.shape == (num_envs, *source.observation_space.shape)
    for i, ref in enumerate(refs):
        np.testing.assert_array_equal(obs[i], _layout(ref.reset()[0][0]))
    ends = []
    for t, action in enumerate(actions):
        step = source.step(action)
        for i, ref in enumerate(refs):
            o, r, te, tr, info = ref.step(action[i:i + 1])
            np.testing.assert_array_equal(step.final_obs[i], _layout(o[0]))
            assert (step.reward[i], step.terminated[i], step.truncated[i]) == (r[0], te[0], tr[0])
            if "lives" in info:  # Atari: the game's own points and the game's end
                assert step.score[i] == info["reward"][0]
                assert step.game_over[i] == (bool(info["terminated"][0]) or tr[0])
            else:
                assert step.score[i] == r[0] and step.game_over[i] == (te[0] or tr[0])
            if not (te[0] or tr[0]):
                np.testing.assert_array_equal(step.obs[i], step.final_obs[i])
                continue
            # EnvPool's next step resets: it ignores the action and gives reward 0. The source
            # took that step already; its `obs` is what EnvPool's reset step returns.
            o2, r2, te2, tr2, info2 = ref.step(action[i:i + 1])
            assert (r2[0], te2[0], tr2[0]) == (0.0, False, False)
            np.testing.assert_array_equal(step.obs[i], _layout(o2[0]))
            ends.append({"t": t, "env": i, "terminated": bool(te[0]), "truncated": bool(tr[0]),
                         "game_over": bool(step.game_over[i]), "obs": step.obs[i],
                         "final_obs": step.final_obs[i],
                         "elapsed": (int(info["elapsed_step"][0]),
                                     int(info2["elapsed_step"][0]))})
    source.close()
    return ends


def _actions(n: int, shape: tuple, discrete: int | None = None, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if discrete:
        return rng.integers(0, discrete, (n, *shape))
    return rng.uniform(-1.0, 1.0, (n, *shape)).astype(np.float32)


def test_breakout_matches_envpool_with_its_reset_step_taken_out():
    """Under episodic life a lost life ends the learner's episode but not the game: EnvPool's
    reset step keeps the game and the frame stack (shifted by one frame, FIRE pressed). At the
    time limit (truncated, a game over for the log) it restarts the game: four equal frames."""
    ends = _step_for_step("Breakout-v5", {"max_episode_steps": 40}, _actions(130, (3,), 4))
    lost = [e for e in ends if e["terminated"]]
    timed = [e for e in ends if e["truncated"]]
    assert lost and timed
    for e in lost:
        assert not e["game_over"]
        np.testing.assert_array_equal(e["obs"][..., :3], e["final_obs"][..., 1:])
        assert e["elapsed"][1] == e["elapsed"][0]  # the same game goes on
    for e in timed:
        assert e["game_over"] and e["elapsed"] == (40, 0)
        assert all((e["obs"][..., k] == e["obs"][..., 0]).all() for k in range(1, 4))


def test_evaluation_plays_whole_games_for_their_points():
    ends = _step_for_step("Breakout-v5", {"max_episode_steps": 40}, _actions(90, (2,), 4),
                          evaluation=True)
    assert ends and all(e["truncated"] and e["game_over"] for e in ends)


def test_a_game_is_five_lives_for_the_learner_and_one_episode_for_the_log():
    source = E.make_source("Breakout-v5", 2, {}, evaluation=False)
    source.reset(0)
    terminated, game_over = [], []
    for action in _actions(400, (2,), 4, seed=1):
        step = source.step(action)
        terminated.append(step.terminated)
        game_over.append(step.game_over)
    terminated, game_over = np.array(terminated), np.array(game_over)
    for i in range(2):
        first = np.flatnonzero(game_over[:, i])[0]
        assert terminated[first, i]  # the game ends with its last life
        assert terminated[:first + 1, i].sum() == 5  # Breakout's five lives
    evaluation = E.make_source("Breakout-v5", 1, {"episodic_life": True}, evaluation=True)
    evaluation.reset(0)
    ends = [evaluation.step(a) for a in _actions(400, (1,), 4, seed=1)]
    first = next(t for t, s in enumerate(ends) if s.game_over[0])
    assert sum(s.terminated[0] for s in ends[:first + 1]) == 1  # evaluation overrides it


def test_the_logged_score_is_the_games_points_and_the_reward_is_clipped():
    """SpaceInvaders' aliens are worth 5 to 30 points: the learner's reward is their sign,
    the score the points themselves (EnvPool's `info["reward"]`); in evaluation both are the
    points."""
    actions = _actions(300, (2,), 6)
    scores = []
    for evaluation in (False, True):
        source = E.make_source("SpaceInvaders-v5", 2, {}, evaluation)
        source.reset(0)
        steps = [source.step(a) for a in actions]
        reward = np.array([s.reward for s in steps])
        score = np.array([s.score for s in steps])
        assert score.max() > 1.0
        np.testing.assert_array_equal(reward, np.sign(score) if not evaluation else score)
        scores.append(score[:20])
    np.testing.assert_array_equal(scores[0], scores[1])  # the same game before a life is lost


def test_pong_and_halfcheetah_and_hopper_match_envpool():
    _step_for_step("Pong-v5", {"max_episode_steps": 25}, _actions(60, (2,), 6))
    timed = _step_for_step("HalfCheetah-v4", {"max_episode_steps": 5}, _actions(12, (2, 6)))
    assert [e["t"] for e in timed] == [4, 4, 9, 9]
    assert all(e["truncated"] and not e["terminated"] for e in timed)
    fell = _step_for_step("Hopper-v4", {}, np.ones((40, 1, 3), np.float32))
    assert fell and all(e["terminated"] and not e["truncated"] for e in fell)


def test_spaces_and_dtypes():
    atari = E.make_source("Breakout-v5", 2, {}, False)
    assert atari.observation_space.shape == (84, 84, 4)
    assert atari.observation_space.dtype == np.uint8
    assert atari.action_space.n == 4 and atari.max_episode_steps == 27000
    atari.reset(0)
    frame = atari.render(1)
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8
    mujoco = E.make_source("HalfCheetah-v4", 2, {}, False)
    assert mujoco.observation_space.shape == (17,)
    assert mujoco.observation_space.dtype == np.float32
    assert mujoco.action_space.shape == (6,) and mujoco.action_space.dtype == np.float32
    assert mujoco.max_episode_steps == 1000
    mujoco.reset(0)
    step = mujoco.step(np.zeros((2, 6), np.float32))
    assert step.obs.dtype == np.float32 and step.reward.dtype == np.float32
    with pytest.raises(NotImplementedError, match="Atari"):
        mujoco.render(0)


def test_the_pool_of_num_envs_is_made_once_for_a_run(monkeypatch):
    """Seeds are fixed when EnvPool makes a pool, and a run's come with its first reset: the
    source's check before compiling makes a pool of one env, not a second full pool (~4 s for
    64 Atari envs)."""
    made, make = [], envpool.make
    monkeypatch.setattr(envpool, "make", lambda task, **kw: made.append(kw["num_envs"])
                        or make(task, **kw))
    source = E.make_source("Breakout-v5", 8, {}, False)
    assert made == [1] and source.observation_space.shape == (84, 84, 4)
    assert source.reset(3).shape == (8, 84, 84, 4) and made == [1, 8]
    assert source.step(np.zeros(8, np.int32)).obs.shape == (8, 84, 84, 4) and made == [1, 8]
    for index in (-1, 8):  # EnvPool itself would read past its envs and segfault
        with pytest.raises(IndexError, match=f"no env {index} to draw; the pool holds 8$"):
            source.render(index)
    lone = E.make_source("Breakout-v5", 1, {}, False)
    lone.reset(0)  # the check's pool already has seed 0's env: kept
    assert made == [1, 8, 1]
    lone.reset(1)
    assert made == [1, 8, 1, 1]
    with pytest.raises(IndexError, match="holds 1 .one env until the first reset"):
        E.make_source("Breakout-v5", 4, {}, False).render(2)


def test_the_same_seed_gives_the_same_episodes():
    source = E.make_source("Breakout-v5", 2, {}, False)
    actions = _actions(60, (2,), 4)

    def play(seed):
        first = source.reset(seed)
        return [first] + [source.step(a).final_obs for a in actions]

    one, two = play(5), play(5)  # the second reset rebuilds the pool (its seeds are fixed)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    cheetah = E.make_source("HalfCheetah-v4", 2, {}, False)
    assert not np.array_equal(cheetah.reset(0), cheetah.reset(1))
    np.testing.assert_array_equal(cheetah.reset(2**31 + 4)[0], cheetah.reset(4)[0])  # int32


def test_unknown_task_kwarg_and_num_envs_are_one_line():
    cases = [
        (("Zelda-v5", 2, {}), "one <Game>-v5 per ROM in"),
        (("Breakout-v5", 2, {"episodic_lives": True}), "takes no 'episodic_lives'; did you "
                                                         "mean 'episodic_life'"),
        (("Breakout-v5", 2, {"seed": 1}), "'seed' is set by jaxppo"),
        (("Breakout-v5", 2, {"noop_max": 0}), "noop_max .* must be an integer >= 1"),
        (("Breakout-v5", 2, {"task": "pong"}), "'task' is set by jaxppo"),
        (("Breakout-v5", 0, {}), "'num_envs': EnvPool needs at least one"),
        (("Breakout-v5", 1, {"mode": 99}), "refused: Invalid game mode requested"),
        (("HalfCheetah-v4", 1, {"xml_file": "nope.xml"}), "cannot open a file it needs"),
        (("CheetahRun-v1", 1, {}), "Dict observation space"),
    ]
    for args, match in cases:
        with pytest.raises(ConfigError, match=match) as e:
            E.make_source(*args, False)
        assert "\n" not in str(e.value)
    with pytest.raises(AssertionError) as e:  # what EnvPool itself says about num_envs=0
        envpool.make("Breakout-v5", env_type="gymnasium", num_envs=0)
    assert str(e.value) == ""
    check_env_id("envpool/Breakout-v5")


def test_settings_envpool_dies_on_are_refused_before_it_sees_them():
    """`noop_max: 0` aborts the interpreter inside EnvPool's C++, and an Atari `task` without
    a ROM exits it (no Python exception either time)."""
    for setting in ("noop_max=0", "task='zzz'"):
        code = ("import envpool; envpool.make('Breakout-v5', env_type='gymnasium', num_envs=1, "
                f"{setting}).reset()")
        assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode != 0


def test_missing_assets_are_one_line(monkeypatch):
    """EnvPool lists its ROM and map folders at import: without them, a FileNotFoundError."""
    real = importlib.import_module

    def fake(name, *args):
        if name == "envpool":
            raise FileNotFoundError("/x/atari/roms")
        return real(name, *args)

    monkeypatch.setattr(E.importlib, "import_module", fake)
    with pytest.raises(ConfigError, match="envpool-assets") as e:
        E.make_source("Breakout-v5", 2, {}, False)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="envpool-assets"):
        check_env_id("envpool/Breakout-v5")


def test_box_actions_are_clipped_to_the_space_as_in_training():
    """EnvPool's MuJoCo clips the torques but charges its control cost on the action as given
    (HalfCheetah: reward -14 for 5.0 where 1.0 earns 0.4): the source clips, as `VecEnv` does
    for JAX envs and CleanRL's ClipAction wrapper for Gymnasium's."""
    rewards = []
    for value in (1.0, 5.0):
        source = E.make_source("HalfCheetah-v4", 1, {}, False)
        source.reset(0)
        rewards.append(source.step(np.full((1, 6), value, np.float32)).reward[0])
    assert rewards[0] == rewards[1]

"""The `host` section of scripts/benchmark.py: env steps/s of rollouts on host envs (Gymnasium's
CartPole and, if EnvPool is installed, its Breakout), three ways, interleaved: the io_callback
bridge's rollout inside the compiled program, a host-driven rollout around a compiled policy,
and the bare vector env; beside SB3's SubprocVecEnv Atari pipeline where it applies.

    python scripts/benchmark.py --only host [--host-shapes 1x8,4x8] [--host-envs ID,...]
"""

from __future__ import annotations

import importlib.util
import time

import jax
import numpy as np

from jaxppo import PPOConfig, make_train
from jaxppo.core.rollout import RolloutSettings, rollout
from jaxppo.policy.episodes import policy_action


def table(title: str, header: list[str], rows: list[list]) -> str:
    """A Markdown table under a heading (benchmark.py's form)."""
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]) + "\n"


def _bridge_rollouts(train, seeds: int, rollouts: int):
    """`rollouts` rollouts of `seeds` vmapped agents, the env stepped by the bridge."""
    c = train.config
    settings = RolloutSettings(c.num_steps, c.normalize_obs, c.normalize_reward)
    run_key = jax.random.key(1)

    def one(runner):
        ts = runner.train_state

        def body(env_carry, key):
            env_carry, *_ = rollout(key, env_carry, ts.normalizer, ts.params, env=train.env,
                                    network=train.network, gamma=c.gamma, settings=settings)
            return env_carry, None

        return jax.lax.scan(body, runner.env, jax.random.split(run_key, rollouts))[0].obs

    runner = jax.jit(jax.vmap(train.init))(jax.random.split(jax.random.key(0), seeds))
    return jax.jit(jax.vmap(one)), runner


def _host_driven(train, seeds: int, rollouts: int):
    """The same rollouts driven from Python: a jitted policy call per step, the pool stepped
    between (no value, log-prob or storage: a lower bound on what a host-driven PPO costs)."""
    c, env = train.config, train.env
    ts = jax.jit(jax.vmap(train.init))(jax.random.split(jax.random.key(0), seeds)).train_state
    act = jax.jit(jax.vmap(lambda t, o, k, i: policy_action(
        train.network, t, o, jax.random.fold_in(k, i), deterministic=False, normalize=False),
        in_axes=(0, 0, 0, None)))
    pool = env.source

    def run():
        if pool.num_envs != seeds * c.num_envs:
            raise RuntimeError("pool size changed")
        obs = pool.reset(np.arange(pool.num_envs))
        keys = jax.random.split(jax.random.key(1), seeds)
        for t in range(rollouts * c.num_steps):
            o = obs.reshape(seeds, c.num_envs, *obs.shape[1:])
            a = act(ts, o, keys, t)
            obs = pool.step(np.asarray(a).reshape(pool.num_envs, *a.shape[2:])).obs
        return obs

    return run


def bench_host(repeats: int, quick: bool, shapes: list[tuple[int, int]] | None = None,
               envs: list[str] | None = None) -> str:
    """Env steps/s of rollouts on host envs, three ways, interleaved (medians of `repeats`).
    `shapes` are (seeds, num_envs) pairs; `envs` picks among the cases by env id."""
    cases = [("gymnasium/CartPole-v1", {})]
    if importlib.util.find_spec("envpool") is not None:  # the envpool extra
        cases.append(("envpool/Breakout-v5", {}))
    cases = [c for c in cases if envs is None or c[0] in envs]
    shapes = shapes or ([(1, 4)] if quick else [(1, 8), (4, 8), (1, 64)])
    rows = []
    for env_id, kwargs in cases:
        for seeds, num_envs in shapes:
            cfg = PPOConfig(env_id=env_id, env_kwargs=kwargs, num_envs=num_envs, num_steps=32,
                            total_timesteps=num_envs * 32, num_minibatches=1, update_epochs=1,
                            hidden_sizes=(64, 64))
            rollouts = 1 if quick else 8
            train = make_train(cfg)
            bridge, runner = _bridge_rollouts(train, seeds, rollouts)
            jax.block_until_ready(bridge(runner))  # compile, and the pool of seeds x num_envs
            driven = _host_driven(train, seeds, rollouts)
            driven()
            pool = train.env.source
            steps = seeds * num_envs * rollouts * cfg.num_steps
            times = {"bridge": [], "driven": [], "bare": []}
            for _ in range(repeats):
                t0 = time.perf_counter()
                jax.block_until_ready(bridge(runner))
                times["bridge"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                driven()
                times["driven"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                zero = np.zeros((pool.num_envs, *train.env.action_shape),
                                np.float32 if not train.env.discrete else np.int32)
                for _ in range(rollouts * cfg.num_steps):
                    pool.step(zero)
                times["bare"].append(time.perf_counter() - t0)
            sps = {k: f"{steps / float(np.median(v)):,.0f}" for k, v in times.items()}
            train.env.close()
            sps["sb3"] = (_sb3_subproc_sps(env_id, num_envs, rollouts * cfg.num_steps, repeats)
                          if env_id.startswith("envpool/") and seeds == 1 and num_envs <= 8
                          and not quick and importlib.util.find_spec("ale_py") is not None
                          else "-")
            rows.append([env_id, seeds, num_envs, sps["bridge"], sps["driven"], sps["bare"],
                         sps["sb3"]])
    return table("Host environments: env steps/s of rollouts (io_callback bridge vs host-driven "
                 "vs the bare pool vs SB3's SubprocVecEnv)",
                 ["env", "seeds", "num_envs", "bridge (one compiled scan)",
                  "host-driven (jitted policy per step)", "bare pool (no policy)",
                  "SB3 SubprocVecEnv + Atari wrappers (no policy)"], rows)


def _sb3_subproc_sps(env_id: str, num_envs: int, steps: int, repeats: int) -> str:
    """Env steps/s of SB3's Atari pipeline for the same game (ALE under SB3's Atari wrappers,
    one process per env, 4 frames stacked), stepped with no-ops and no policy."""
    from jaxppo.compare.sb3 import make_vec  # the compare extra (torch, SB3, ale-py, opencv)

    vec = make_vec("atari", env_id, num_envs, subproc=True, seed=0)
    try:
        vec.reset()
        zero = np.zeros((num_envs,), np.int64)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                vec.step(zero)
            times.append(time.perf_counter() - t0)
    finally:
        vec.close()
    return f"{num_envs * steps / float(np.median(times)):,.0f}"

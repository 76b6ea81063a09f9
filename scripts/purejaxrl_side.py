"""PureJaxRL's `ppo.py` beside jaxppo, for the benchmark drivers (gpu_suite.py, benchmark.py,
kernels.py): jaxppo's config in its keys, and its `make_train` loaded from a checkout through a
shim for gymnax 1.0 (its `step` returns 6 values where `ppo.py` unpacks 5) and stand-ins for
what it imports but never uses here (distrax's Categorical, Brax and navix wrappers).

    from purejaxrl_side import load_purejaxrl, purejaxrl_config
    train = load_purejaxrl("~/purejaxrl")(purejaxrl_config(jaxppo.load_config(...)))
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types

import jax
import jax.numpy as jnp

from jaxppo import PPOConfig


def purejaxrl_config(cfg: PPOConfig) -> dict:
    """jaxppo's config in PureJaxRL's `ppo.py` keys."""
    return {"LR": cfg.lr, "NUM_ENVS": cfg.num_envs, "NUM_STEPS": cfg.num_steps,
            "TOTAL_TIMESTEPS": cfg.total_timesteps, "UPDATE_EPOCHS": cfg.update_epochs,
            "NUM_MINIBATCHES": cfg.num_minibatches, "GAMMA": cfg.gamma,
            "GAE_LAMBDA": cfg.gae_lambda, "CLIP_EPS": cfg.clip_eps, "ENT_COEF": cfg.ent_coef,
            "VF_COEF": cfg.vf_coef, "MAX_GRAD_NORM": cfg.max_grad_norm,
            "ACTIVATION": cfg.activation, "ENV_NAME": cfg.env_id, "ANNEAL_LR": cfg.anneal_lr,
            "DEBUG": False}


class _Categorical:
    """What `ppo.py` uses of distrax's Categorical (distrax does not install on this stack)."""

    def __init__(self, logits):
        self.logits = jax.nn.log_softmax(logits)

    def sample(self, seed):
        return jax.random.categorical(seed, self.logits)

    def log_prob(self, value):
        return jnp.take_along_axis(self.logits, value[..., None].astype(jnp.int32), -1)[..., 0]

    def entropy(self):
        return -jnp.sum(jnp.exp(self.logits) * self.logits, axis=-1)


class _FiveTuple:
    """gymnax >= 1.0's `step` (obs, state, reward, terminated, truncated, info) as the
    5-tuple `ppo.py` unpacks (done = terminated or truncated)."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        out = self._env.step(key, state, action, params)
        if len(out) == 6:
            obs, state, reward, terminated, truncated, info = out
            return obs, state, reward, jnp.logical_or(terminated, truncated), info
        return out


def _stand_in(name: str) -> None:
    """An empty module `name` in sys.modules, with a spec (so `find_spec` answers for it)."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = module


def load_purejaxrl(path: str):
    """`make_train` of `PATH/purejaxrl/ppo.py` (or `PATH/ppo.py`), with the shim in place."""
    folder = os.path.join(path, "purejaxrl") if os.path.isdir(os.path.join(path, "purejaxrl")) \
        else path
    file = os.path.join(folder, "ppo.py")
    if not os.path.isfile(file):
        raise SystemExit(f"--purejaxrl {path}: no ppo.py there (pass a PureJaxRL checkout)")
    if importlib.util.find_spec("distrax") is None:
        sys.modules["distrax"] = types.SimpleNamespace(Categorical=_Categorical)
    # `wrappers.py` imports Brax and navix at its top but uses them only in wrappers that
    # `ppo.py` on gymnax never builds: stand-ins where they are not installed (a GPU image).
    if importlib.util.find_spec("brax") is None:
        for name in ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"):
            _stand_in(name)
        sys.modules["brax.envs.wrappers.training"].EpisodeWrapper = None
        sys.modules["brax.envs.wrappers.training"].AutoResetWrapper = None
        sys.modules["brax"].envs = sys.modules["brax.envs"]
        sys.modules["brax.envs"].wrappers = sys.modules["brax.envs.wrappers"]
        sys.modules["brax.envs.wrappers"].training = sys.modules["brax.envs.wrappers.training"]
    if importlib.util.find_spec("navix") is None:
        _stand_in("navix")
    import gymnax

    make = gymnax.make
    gymnax.make = lambda *a, **k: (lambda env, params: (_FiveTuple(env), params))(*make(*a, **k))
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("purejaxrl_ppo", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_train

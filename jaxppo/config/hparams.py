"""`Hparams`: the float hyperparameters as a pytree that `train(key, hparams)` takes as data.

`PPOConfig` is static (fixed at trace time); the floats a sweep varies are also copied here, so
one compile serves a whole `jax.vmap` over settings, and PBT can change them between chunks.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxppo.config.schema import FIELDS, PPOConfig, freeze
from jaxppo.errors import ConfigError


class Hparams(NamedTuple):
    """The float hyperparameters as traced arrays, so `jax.vmap` can sweep them with one compile.

    `PPOConfig` is static (fixed at trace time); these seven of its keys are also copied here,
    and `train(key, hparams)` takes them as data. Pass `None` (the default) to train with the
    config's own values; pass `Hparams.stack([...])` with `jax.vmap(train, in_axes=(None, 0))`
    to run several settings in one compiled program. Each field is a float32 array: a scalar
    for one setting, or `[S]` for S stacked settings.

    Attributes:
      lr: Adam learning rate (the start value when `anneal_lr`).
      gamma: discount factor.
      gae_lambda: GAE lambda: 0 is one-step TD, 1 is Monte Carlo.
      clip_eps: the PPO ratio clip (the paper's epsilon); also clips the value update when
        `clip_vloss`.
      ent_coef: entropy bonus coefficient.
      vf_coef: value loss coefficient (the value loss already carries CleanRL's factor 0.5).
      max_grad_norm: global-norm gradient clip.
    """

    lr: Any
    gamma: Any
    gae_lambda: Any
    clip_eps: Any
    ent_coef: Any
    vf_coef: Any
    max_grad_norm: Any

    @classmethod
    def from_config(cls, config: PPOConfig) -> Hparams:
        """The config's own values of the seven fields, as float32 scalars.

        Args:
          config: the config to read them from.

        Returns:
          One setting: what `train(key)` uses when given no `hparams`.
        """
        return cls(**{k: jnp.asarray(getattr(config, k), jnp.float32) for k in cls._fields})

    @classmethod
    def stack(cls, configs_or_hparams: list) -> Hparams:
        """Stack several settings along a leading axis, for `jax.vmap(train, in_axes=(None, 0))`.

        Only the `Hparams` fields can differ: configs that differ in anything else (a size, a
        switch) raise, since one compiled `train` would silently run them all the same way.

        Args:
          configs_or_hparams: the settings, each a `PPOConfig` (its float hyperparameters are
            taken) or an `Hparams` of scalars.

        Returns:
          One `Hparams` whose fields are `[S]` arrays, S = the number of settings, in order.

        Raises:
          ConfigError: no settings were given, or the configs differ in a static key (sweep
            those with one `make_train` per static setting, as `jaxppo.sweep` does).
        """
        items = list(configs_or_hparams)
        if not items:
            raise ConfigError("Hparams.stack: got no settings; pass at least one PPOConfig "
                              "or Hparams")
        configs = [c for c in items if isinstance(c, PPOConfig)]
        static = [name for name in FIELDS if name not in cls._fields
                  and len({repr(freeze(getattr(c, name))) for c in configs}) > 1]
        if static:
            raise ConfigError(f"Hparams.stack: the configs differ in {', '.join(static)}, which "
                              "are static (shapes, loop lengths, switches); sweep them with "
                              "separate make_train calls (one compile each), as jaxppo.sweep "
                              "does for a grid with static keys")
        hps = [h if isinstance(h, Hparams) else cls.from_config(h) for h in items]
        return cls(*(jnp.stack(leaves) for leaves in zip(*hps, strict=True)))

    @classmethod
    def of_settings(cls, config: PPOConfig, settings: list[dict], repeat: int = 1) -> Hparams:
        """A sweep's settings as one `Hparams` with leaves `[S * repeat]` (each setting
        `repeat` times in a row: its seeds), every field a setting lacks from `config`; the
        values `Hparams.stack` of each setting's config would hold, without building a config
        per setting (a sweep may have 10^5).

        Args:
          config: the sweep's base config.
          settings: dicts of float hyperparameters (`Hparams` fields).
          repeat: copies of each setting (seeds per setting).

        Returns:
          The stacked `Hparams` (float32 leaves).
        """
        return cls(*(jnp.asarray(np.repeat(np.asarray(
            [s.get(k, getattr(config, k)) for s in settings], np.float64), repeat), jnp.float32)
            for k in cls._fields))

    def check(self) -> Hparams:
        """Refuse impossible values (one line, as a config would) where they are concrete;
        traced values (inside jit) cannot be looked at and pass through.

        `train` calls it on the `hparams` it is given, so a bad value passed as data is refused
        as a bad config value would be.

        Returns:
          These `Hparams`, unchanged.

        Raises:
          ConfigError: a concrete value is not finite or out of its key's range (`lr`,
            `clip_eps` and `max_grad_norm` positive, `gamma` and `gae_lambda` in [0, 1],
            `ent_coef` and `vf_coef` >= 0).
        """
        for name, value in zip(self._fields, self, strict=True):
            if isinstance(value, jax.core.Tracer) or value is None:
                continue
            v = np.asarray(value, dtype=np.float64)
            low, high, fix = _HP_RANGES[name]
            if not np.isfinite(v).all() or (v < low).any() or (v > high).any() or (
                    name in _POSITIVE and (v <= 0).any()):
                raise ConfigError(f"hparams '{name}': got {v.tolist()}; {fix}")
        return self


_POSITIVE = ("lr", "clip_eps", "max_grad_norm")
_HP_RANGES = {
    "lr": (0.0, np.inf, "use a positive number"),
    "gamma": (0.0, 1.0, "use a value in [0, 1]"),
    "gae_lambda": (0.0, 1.0, "use a value in [0, 1]"),
    "clip_eps": (0.0, np.inf, "use a positive number"),
    "ent_coef": (0.0, np.inf, "use a number >= 0"),
    "vf_coef": (0.0, np.inf, "use a number >= 0"),
    "max_grad_norm": (0.0, np.inf, "use a positive number"),
}


def check_settings(config: PPOConfig, settings: list[dict]) -> None:
    """A sweep's settings (`Experiment(hparams=...)`): float hyperparameters only (a static
    key is a program of its own), each valid with `config`, checked on the host before any
    compile."""
    if not settings:
        raise ConfigError("hparams: an empty list of settings; give at least one dict")
    keys = {}
    for s in settings:
        keys.update(dict.fromkeys(s))
    bad = [k for k in keys if k not in Hparams._fields]
    if bad:
        raise ConfigError(f"hparams: {bad[0]!r} is static (fixed when compiled), and one "
                          f"Experiment is one program: its hparams take "
                          f"{', '.join(Hparams._fields)}; jaxppo.sweep(config, "
                          f"{{{bad[0]!r}: [...]}}) compiles one program per static setting")
    # Each float hyperparameter's rule is an interval (schema.validate), so a key's smallest
    # and largest value (and any NaN) stand for all of its values: a sweep of 10^5 settings
    # is checked in milliseconds, not one config per setting.
    for key in keys:
        values = [s[key] for s in settings if key in s]
        plain = all(isinstance(v, (int, float, np.integer, np.floating))
                    and not isinstance(v, (bool, np.bool_)) for v in values)
        x = np.asarray(values, dtype=np.float64) if plain else None
        if x is None:  # not all numbers: the config names the first that is not
            for v in values:
                dataclasses.replace(config, **{key: v})
            continue
        picks = {int(np.nanargmin(x)), int(np.nanargmax(x))} if not np.isnan(x).all() else set()
        picks |= set(np.flatnonzero(np.isnan(x))[:1].tolist())
        for i in sorted(picks):
            dataclasses.replace(config, **{key: values[i]})

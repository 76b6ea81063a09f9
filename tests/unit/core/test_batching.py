"""`batched_like`: a vmapped train fn (seeds, a sweep's settings, both nested) and the
evaluator trace each loop body once, and trace the program the carries would have reached
anyway (the same scan carries: no copy per agent that the program did not have).

Traced only, never compiled. Batching is counted at JAX's `batch_jaxpr_axes` (an internal
function, on both JAX lines): a scan's rule calls it once per pass over its body, and again for every scan
nested in a body it passes over again with other inputs batched."""

import collections

import jax
import jax.numpy as jnp
import pytest
from jax.extend.core import jaxprs_in_params

from jaxppo import Hparams, PPOConfig, make_train
from jaxppo.core import batching as jaxppo_batching
from jaxppo.core.batching import batched_like
from jaxppo.policy.episodes import _returns

batching = pytest.importorskip("jax._src.interpreters.batching")

TINY = dict(total_timesteps=4 * 8 * 2, num_envs=4, num_steps=8, num_minibatches=2,
            update_epochs=2, hidden_sizes=(8,))
CONFIGS = {
    "mlp": PPOConfig(**TINY),
    "gru": PPOConfig(network="gru", rnn_size=8, **TINY),
    "kl-normalized": PPOConfig(target_kl=0.01, normalize_obs=True, normalize_reward=True,
                               **TINY),
}


def _forms(config):
    """The vmapped forms users write, each with the arguments to trace it with."""
    train = make_train(config)
    keys = jax.random.split(jax.random.key(0), 2)
    hps = Hparams.stack([Hparams.from_config(config)._replace(lr=lr) for lr in (1e-3, 3e-4)])
    return {
        "seeds": (jax.vmap(train), (keys,)),
        "sweep": (jax.vmap(train, in_axes=(None, 0)), (jax.random.key(0), hps)),
        "legacy-seeds": (jax.vmap(train), (jax.random.split(jax.random.PRNGKey(0), 2),)),
        "sweep-of-seeds": (jax.vmap(jax.vmap(train, in_axes=(0, None)), in_axes=(None, 0)),
                           (keys, hps)),
    }


def _traced(fn, args, monkeypatch):
    """`fn`'s jaxpr, and the batching work on the way: `(equations batched, equations of
    the bodies batched)`, equal when each body is batched once."""
    passes, kept = collections.defaultdict(set), {}
    real = batching.batch_jaxpr_axes

    def counting(closed_jaxpr, axis_data, in_axes, *a, **k):
        # a pass with the same inputs batched is JAX's cache, or a cond's second pass over
        # its branches (for their outputs): the bodies nested in it are not batched again
        kept[id(closed_jaxpr.jaxpr)] = closed_jaxpr  # alive: no other body takes its id
        passes[id(closed_jaxpr.jaxpr)].add(tuple(type(ax) is int for ax in in_axes))
        return real(closed_jaxpr, axis_data, in_axes, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(batching, "batch_jaxpr_axes", counting)
        jaxpr = jax.make_jaxpr(fn)(*args)
    size = {k: len(c.jaxpr.eqns) for k, c in kept.items()}
    assert size, "no loop body was batched: JAX no longer batches them where this counts"
    return jaxpr, (sum(len(p) * size[k] for k, p in passes.items()), sum(size.values()))


def _scan_inputs(jaxpr) -> list[list[str]]:
    """The input types (constants, carry, scanned) of every scan in `jaxpr`, nested ones
    included, in order."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            out.append([str(v.aval) for v in eqn.invars])
        for sub in jaxprs_in_params(eqn.params):
            out += _scan_inputs(sub)
    return out


def _unforced(monkeypatch):
    """`batched_like` as the identity it is outside a vmap: the loops find their carries."""
    monkeypatch.setattr(jaxppo_batching, "_batched_like", lambda tree, like: tree)


def _same_program(forced, found, nested: bool):
    """The same scan carries; nested vmaps: Adam's step count (int32, one per agent of the
    inner vmap) is also one per agent of the outer, where the inner vmap's per-leaf epochs
    (`core/epochs.py`) hand it on as plain code and it stays unbatched."""
    for a, b in zip(_scan_inputs(forced.jaxpr), _scan_inputs(found.jaxpr), strict=True):
        for x, y in zip(a, b, strict=True):
            assert x == y or (nested and x.startswith("int32[") and x.replace("[2,", "[", 1) == y
                              ), (x, y)


@pytest.mark.parametrize("name, form", [("mlp", "seeds"), ("mlp", "sweep"),
                                        ("mlp", "sweep-of-seeds"), ("gru", "seeds"),
                                        ("kl-normalized", "legacy-seeds")])
def test_each_loop_body_is_batched_once_into_the_same_program(name, form, monkeypatch):
    """Within 10%: autodiff's transposed loops (a GRU's backward pass over time) start from
    zero cotangents that only JAX builds, and are batched twice; they are small."""
    # a fresh train fn for each trace: JAX keeps the traces of a function it has seen
    jaxpr, (work, bodies) = _traced(*_forms(CONFIGS[name])[form], monkeypatch)
    assert work <= 1.1 * bodies, (work, bodies)
    with monkeypatch.context() as m:
        _unforced(m)
        reference, (work, bodies) = _traced(*_forms(CONFIGS[name])[form], m)
    _same_program(jaxpr, reference, nested=form == "sweep-of-seeds")
    assert work >= 2 * bodies, (work, bodies)  # without it: the update body again, and more


def test_the_evaluators_episode_loop_is_batched_once(monkeypatch):
    """`jaxppo eval` of several seeds: their learners vmapped over one key."""
    train = make_train(CONFIGS["mlp"])
    states = jax.vmap(train.init)(jax.random.split(jax.random.key(0), 2)).train_state

    def returns():
        return jax.vmap(lambda ts: _returns(ts, jax.random.key(1), env=train.env,
                                            network=train.network, deterministic=True,
                                            normalize=False))

    jaxpr, (work, bodies) = _traced(returns(), (states,), monkeypatch)
    assert work == bodies, (work, bodies)
    with monkeypatch.context() as m:
        _unforced(m)
        reference, (work, bodies) = _traced(returns(), (states,), m)
    _same_program(jaxpr, reference, nested=False)
    assert work >= 2 * bodies, (work, bodies)


def test_batched_like_is_the_identity_and_batches_only_under_a_vmap_of_like():
    tree = {"zeros": jnp.zeros(3), "count": jnp.int32(4)}
    out = batched_like(tree, 1.0)
    assert set(out) == set(tree) and all(bool(jnp.all(out[k] == tree[k])) for k in tree)
    keys = jax.random.split(jax.random.key(0), 3)
    # out_axes=None: the vmap refuses an output that is batched
    kept = jax.vmap(lambda k: batched_like(jnp.zeros(2), 0.0), out_axes=None)(keys)
    assert kept.shape == (2,)
    with pytest.raises(ValueError):
        jax.vmap(lambda k: batched_like(jnp.zeros(2), k), out_axes=None)(keys)
    both = jax.vmap(lambda k: batched_like((jnp.zeros(2), k), k))(keys)
    assert both[0].shape == (3, 2) and both[1].shape == (3,)

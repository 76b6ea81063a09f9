"""Action spaces read exactly or refused in one line, before anything compiles: Gymnasium's
MultiBinary(n) is n two-way choices; a nested MultiDiscrete or MultiBinary and an integer Box
are refused (they used to be read as Discrete(n), a flat MultiDiscrete, and real actions)."""

import numpy as np
import pytest

from jaxppo import ConfigError
from jaxppo.envs.spaces import Box, Discrete, MultiDiscrete, action_spec

spaces = pytest.importorskip("gymnasium.spaces")
pytestmark = pytest.mark.unit


@pytest.mark.parametrize("space, kind, shape, nvec", [
    (spaces.MultiBinary(3), "multidiscrete", (3,), (2, 2, 2)),
    (spaces.MultiBinary((4,)), "multidiscrete", (4,), (2, 2, 2, 2)),
    (spaces.Discrete(5), "discrete", (), (5,)),
    (spaces.MultiDiscrete([2, 3]), "multidiscrete", (2,), (2, 3)),
    (spaces.Box(-1.0, 1.0, (2,)), "continuous", (2,), ()),
    (Discrete(3), "discrete", (), (3,)),
    (MultiDiscrete((2, 4)), "multidiscrete", (2,), (2, 4)),
    (Box(-2.0, 2.0, (3,)), "continuous", (3,), ()),
])
def test_supported_spaces_are_read_exactly(space, kind, shape, nvec):
    spec = action_spec(space, "env")
    assert (spec.kind, spec.shape, spec.nvec) == (kind, shape, nvec)


@pytest.mark.parametrize("space, culprits", [
    (spaces.MultiBinary((2, 2)), ["MultiBinary", "(2, 2)", "flatten"]),
    (spaces.MultiDiscrete([[2, 3], [2, 2]]), ["MultiDiscrete", "(2, 2)", "nested"]),
    (spaces.Box(0, 5, (2,), np.int64), ["Box", "int64", "Discrete or MultiDiscrete"]),
    (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), ["Tuple", "not supported"]),
    (spaces.Dict({"a": spaces.Discrete(2)}), ["Dict", "not supported"]),
])
def test_other_spaces_are_refused_naming_the_space(space, culprits):
    with pytest.raises(ConfigError) as e:
        action_spec(space, "environment 'gymnasium/X-v0'")
    text = str(e.value)
    assert "\n" not in text and text.startswith("environment 'gymnasium/X-v0'")
    for c in culprits:
        assert c in text, (c, text)

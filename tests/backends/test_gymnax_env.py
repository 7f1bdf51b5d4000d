"""The gymnax backend's conversion of gymnax spaces into the core's space trees."""

import numpy as np
import pytest

from batchppo.backends.gymnax import import_gymnax
from batchppo.backends.gymnax_env import from_gymnax
from batchppo.core import spaces


def test_from_gymnax_minatar_is_a_float_image():
    env, params = import_gymnax().make("Breakout-MinAtar")
    tree = from_gymnax(env.observation_space(params))
    assert spaces.is_image(tree) and tree.shape == (10, 10, 4) and tree.dtype == np.float32
    action = from_gymnax(env.action_space(params))
    assert isinstance(action, spaces.Discrete) and action.n == 3


def test_from_gymnax_nests_dict_and_tuple():
    from gymnax.environments import spaces as xs

    space = xs.Dict(
        {"pos": xs.Box(-2.0, 2.0, (3,), np.float32), "pair": xs.Tuple([xs.Discrete(4)] * 2)}
    )
    tree = from_gymnax(space)
    assert spaces.leaf_paths(tree) == ["['pair'][0]", "['pair'][1]", "['pos']"]
    assert tree["pair"][1].n == 4
    np.testing.assert_array_equal(tree["pos"].high, [2.0, 2.0, 2.0])


def test_from_gymnax_refuses_other_spaces_in_one_line():
    from gymnax.environments import spaces as xs

    space = xs.Dict({"a": xs.Space()})
    with pytest.raises(spaces.UnsupportedSpaceError) as info:
        from_gymnax(space, "observation space")
    assert str(info.value).startswith("observation space: space <gymnax.environments.spaces.")
    assert str(info.value).endswith(
        " at ['a'] is not supported; supported: Box (any dtype and rank), Discrete (start 0), "
        "MultiDiscrete and MultiBinary, nested in Dict and Tuple."
    )

"""The host backend's conversion of Gymnasium spaces into the core's space trees."""

import gymnasium as gym
import numpy as np
import pytest

from batchppo.backends.host_env import from_gymnasium
from batchppo.core import spaces


def test_from_gymnasium_keeps_dtypes_and_narrows_64_bit():
    space = gym.spaces.Dict(
        {
            "frame": gym.spaces.Box(0, 255, (84, 84, 4), np.uint8),
            "pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float64),
            "count": gym.spaces.Box(0, 9, (2,), np.int64),
            "mode": gym.spaces.Discrete(5),
            "keys": gym.spaces.MultiDiscrete([2, 3]),
            "bits": gym.spaces.MultiBinary(4),
            "pair": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,)))),
        }
    )
    tree = from_gymnasium(space)
    assert sorted(tree) == ["bits", "count", "frame", "keys", "mode", "pair", "pos"]
    assert (tree["frame"].shape, tree["frame"].dtype) == ((84, 84, 4), np.dtype(np.uint8))
    assert tree["pos"].dtype == np.float32 and tree["count"].dtype == np.int32
    assert tree["mode"].n == 5 and tree["mode"].dtype == np.int32 and tree["mode"].shape == ()
    assert tree["keys"].nvec == (2, 3) and tree["keys"].shape == (2,)
    assert tree["bits"].n == 4 and tree["bits"].dtype == np.int8
    assert isinstance(tree["pair"], tuple) and tree["pair"][0].n == 2
    np.testing.assert_array_equal(tree["pos"].low, [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(tree["count"].high, [9.0, 9.0])
    assert spaces.leaf_paths(tree) == [
        "['bits']", "['count']", "['frame']", "['keys']", "['mode']", "['pair'][0]",
        "['pair'][1]", "['pos']",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            gym.spaces.Text(5, charset="ab"),
            "observation space: space Text(1, 5, charset=ab) is not supported; supported: Box "
            "(any dtype and rank), Discrete (start 0), MultiDiscrete and MultiBinary, nested in "
            "Dict and Tuple.",
        ),
        (
            gym.spaces.Dict({"a": gym.spaces.Discrete(3, start=1)}),
            "observation space: space Discrete(3, start=1) at ['a'] is not supported; "
            "supported: Box (any dtype and rank), Discrete (start 0), MultiDiscrete and "
            "MultiBinary, nested in Dict and Tuple.",
        ),
        (
            gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiDiscrete([[2, 2]]))),
            "observation space: space MultiDiscrete([[2 2]]) at [1] is not supported; "
            "supported: Box (any dtype and rank), Discrete (start 0), MultiDiscrete and "
            "MultiBinary, nested in Dict and Tuple.",
        ),
    ],
)
def test_unsupported_space_is_one_line(space, message):
    with pytest.raises(spaces.UnsupportedSpaceError) as info:
        from_gymnasium(space, "observation space")
    assert str(info.value) == message

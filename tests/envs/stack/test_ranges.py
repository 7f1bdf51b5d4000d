"""The range-normalisation rule of batchppo.core.ranges and RangeNormalize's use of it."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

from batchppo.core.ranges import bounded_dims, range_map
from batchppo.envs.stack.wrappers import RangeNormalize

F32MAX = np.finfo(np.float32).max


class BoxEnv(gymnasium.Env):
    """Observation and action spaces both ``Box(low, high)``; never stepped."""

    def __init__(self, low, high):
        self.observation_space = spaces.Box(low, high, dtype=low.dtype)
        self.action_space = spaces.Box(low, high, dtype=low.dtype)


def test_bounded_dims_is_decided_in_float32():
    low = np.array([-1.0, -np.inf, 2.0, -F32MAX, 0.0, -(2.0**126), -1e39, 1.0], np.float64)
    high = np.array([1.0, 3.0, 2.0, F32MAX, F32MAX, 2.0**126, 1.0, 1.0 + 1e-12], np.float64)
    # Finite; one bound infinite; empty; span overflows float32; span float32.max, too wide;
    # span 2**127, the widest normalised; a bound beyond float32; empty in float32.
    np.testing.assert_array_equal(
        bounded_dims(low, high), [True, False, False, False, False, True, False, False]
    )
    with np.errstate(over="ignore"):
        low32 = low.astype(np.float32)
    np.testing.assert_array_equal(bounded_dims(low32, high), bounded_dims(low, high))


def test_range_map_arrays_and_identity_on_unmapped_dims():
    low = np.array([-2.0, -np.inf, -F32MAX, 3.0], np.float32)
    high = np.array([6.0, np.inf, F32MAX, 3.0], np.float32)
    ranges = range_map(low, high)
    assert ranges.low.dtype == np.float32 and ranges.any
    np.testing.assert_array_equal(ranges.mask, [True, False, False, False])
    np.testing.assert_array_equal(ranges.low, [-2, 0, 0, 0])
    np.testing.assert_array_equal(ranges.half_span, [4, 1, 1, 1])
    np.testing.assert_array_equal(ranges.one, [1, 0, 0, 0])
    np.testing.assert_array_equal(ranges.unit_low, [-1, -np.inf, -F32MAX, 3])
    np.testing.assert_array_equal(ranges.unit_high, [1, np.inf, F32MAX, 3])
    x = np.array([[2.0, -0.0, 1e38, np.nan], [-2.0, np.inf, -F32MAX, 7.0]], np.float32)
    got = ranges.normalize(x)
    np.testing.assert_array_equal(got, np.where(ranges.mask, [[0.0], [-1.0]], x))
    assert np.signbit(got[0, 1])
    a = np.array([[0.5, 5.0, 1e38, 9.0], [-3.0, -np.inf, -np.inf, 1.0]], np.float32)
    # Clipped to [-1, 1] on mapped dims and to the env's own bounds elsewhere.
    want = np.array([[4.0, 5.0, 1e38, 3.0], [-2.0, -np.inf, -F32MAX, 3.0]], np.float32)
    np.testing.assert_array_equal(ranges.denormalize(a), want)
    np.testing.assert_array_equal(
        ranges.denormalize(a, clip=False)[1], [-10.0, -np.inf, -np.inf, 1.0]
    )
    assert not range_map(np.full(2, -np.inf), np.full(2, np.inf)).any


def test_range_normalize_leaves_float32_max_bounds_alone():
    # CartPole marks its velocities unbounded with float32.max: rescaling by their overflowing
    # span used to map every observation there to -1.
    low = np.array([-4.8, -F32MAX, -0.42, -F32MAX], np.float32)
    high = np.array([4.8, F32MAX, 0.42, F32MAX], np.float32)
    env = RangeNormalize(BoxEnv(low, high))
    np.testing.assert_array_equal(env.observation_space.low, [-1, -F32MAX, -1, -F32MAX])
    np.testing.assert_array_equal(env.observation_space.high, [1, F32MAX, 1, F32MAX])
    obs = np.array([2.4, 1.5, 0.21, -3.0], np.float32)
    np.testing.assert_array_equal(env.observation(obs), [0.5, 1.5, 0.5, -3.0])
    action = np.array([0.5, 2.0, 3.0, -1e30], np.float32)
    want = np.array([2.4, 2.0, 0.42, -1e30], np.float32)
    np.testing.assert_array_equal(env.action(action), want)

"""The ``jnp`` maps of range normalisation (``batchppo.core.ranges``), which the pure-JAX adapters
apply: the formulas by hand, and the same mapping as the host wrapper's
(tests/envs/stack/test_ranges.py has the NumPy rule)."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.core.ranges import (
    bounded_dims,
    denormalize_action,
    normalized_bounds,
    range_normalize_obs,
)
from batchppo.envs.stack.wrappers import RangeNormalize


def test_range_normalize_obs_hand_computed():
    low = np.array([-1.2, -0.07, -np.inf, -np.finfo(np.float32).max], np.float32)
    high = np.array([0.6, 0.07, 5.0, np.finfo(np.float32).max], np.float32)
    np.testing.assert_array_equal(bounded_dims(low, high), [True, True, False, False])
    obs = jnp.array([[-0.3, 0.035, 7.0, -3.0], [0.6, -0.07, -1.0, 1e30]], jnp.float32)
    got = range_normalize_obs(obs, low, high)
    # 2 * (-0.3 + 1.2) / 1.8 - 1 = 0 ; 2 * (0.035 + 0.07) / 0.14 - 1 = 0.5 ; others unchanged.
    np.testing.assert_allclose(got, [[0.0, 0.5, 7.0, -3.0], [1.0, -1.0, -1.0, 1e30]], atol=1e-6)
    assert got.dtype == jnp.float32


def test_denormalize_action_hand_computed():
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32)
    action = jnp.array([[0.5, -0.5], [3.0, -7.0], [-1.0, 1.0]], jnp.float32)
    # Clip to [-1, 1], then low + (a + 1) / 2 * (high - low).
    np.testing.assert_allclose(
        denormalize_action(action, low, high), [[1.0, 2.5], [2.0, 0.0], [-2.0, 10.0]], atol=1e-6
    )


class _BoxEnv(gym.Env):
    """Observation and action spaces both ``Box(low, high)``; never stepped."""

    def __init__(self, low, high):
        self.observation_space = gym.spaces.Box(low, high, dtype=low.dtype)
        self.action_space = gym.spaces.Box(low, high, dtype=low.dtype)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``|got - want|`` in float32 ulps of ``|want| + 1``.

    ``want`` is ``q - 1``; an error of the quotient ``q`` carries over in ``q``'s ulps.
    """
    scale = np.spacing((np.abs(want) + 1).astype(np.float32))
    return np.abs(got.astype(np.float64) - want) / scale


@pytest.mark.parametrize("compiled", [False, True])
def test_host_wrapper_and_jax_adapters_map_the_same_box(compiled):
    f32 = np.finfo(np.float32).max
    # Finite; both bounds infinite; empty; +-float32.max (span overflows); finite, wide;
    # finite; one bound infinite; span 2**127 (the widest normalised); span float32.max.
    low = np.array([-3.0, -np.inf, 2.0, -f32, -7.5, -1.2, -np.inf, -(2.0**126), 0.0], np.float32)
    high = np.array([5.0, np.inf, 2.0, f32, 1e4, 0.6, 3.0, 2.0**126, f32], np.float32)
    mapped = np.array([True, False, False, False, True, True, False, True, False])
    host = RangeNormalize(_BoxEnv(low, high))
    obs_fn = partial(range_normalize_obs, low=low, high=high)
    act_fn = partial(denormalize_action, low=low, high=high)
    if compiled:
        obs_fn, act_fn = jax.jit(obs_fn), jax.jit(act_fn)

    np.testing.assert_array_equal(bounded_dims(low, high), mapped)
    # The bounds GymnaxEnv's spec reports are the wrapper's spaces.
    spec_low, spec_high = normalized_bounds(low, high)
    np.testing.assert_array_equal(spec_low, host.observation_space.low)
    np.testing.assert_array_equal(spec_high, host.action_space.high)
    np.testing.assert_array_equal(spec_low, np.where(mapped, -1, low))
    assert spec_low.dtype == host.observation_space.dtype

    rng = np.random.default_rng(0)
    obs = (rng.standard_normal((500, 9)) * 10).astype(np.float32)
    obs[0] = [4.0, np.nan, -0.0, 3e38, 1.0, 0.0, -np.inf, 2.0**125, 1e38]
    obs[1, ~mapped] = [np.inf, np.nan, -f32, -0.0, -3.0]
    want = host.observation(obs)
    got = np.asarray(obs_fn(obs))
    # Dims left alone are the identity on both sides, bitwise (NaN, inf and -0.0 included).
    np.testing.assert_array_equal(got[:, ~mapped], obs[:, ~mapped])
    signed = ~np.isnan(obs) & ~mapped
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(obs[signed]))
    np.testing.assert_array_equal(want[:, ~mapped], obs[:, ~mapped])
    # Same formula on mapped dims, but XLA divides by multiplying with the reciprocal (two
    # roundings where NumPy has one), so the quotient may differ in its last bit or two.
    assert _ulps(got[:, mapped], want[:, mapped]).max() <= 2

    action = (rng.standard_normal((500, 9)) * 2).astype(np.float32)
    action[0] = [5.0, np.inf, 9.0, -np.inf, -5.0, 0.0, 7.0, 0.5, np.inf]
    want = host.action(action)
    got = np.asarray(act_fn(action))
    # Clipped to [-1, 1] on mapped dims and to the env's bounds elsewhere, on both sides.
    np.testing.assert_array_equal(
        want[0], np.float32([5.0, np.inf, 2.0, -f32, -7.5, -0.3, 3.0, 2.0**125, f32])
    )
    if compiled:
        # Compiled, XLA fuses low + (a + 1) * half_span into one FMA, skipping the rounding
        # of the product: at most an ulp or two of the bounds apart.
        np.testing.assert_array_equal(got[:, ~mapped], want[:, ~mapped])
        bound = np.spacing(np.maximum(np.abs(low), np.abs(high))[mapped])
        assert (np.abs(got[:, mapped] - want[:, mapped]) <= 2 * bound).all()
    else:
        np.testing.assert_array_equal(got, want)

"""The restart rules the pure-JAX adapters share (``batchppo.core.pure_env``)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.core.pure_env import check_max_length, check_reset_ratio, optimistic_reset


def test_optimistic_reset_hands_fresh_resets_to_finished_envs_in_env_order():
    """The j-th finished env takes fresh reset j modulo their number; the others keep theirs."""
    done = jnp.array([False, True, True, False, True, True])
    fresh = {"x": jnp.array([10.0, 20.0, 30.0]), "y": jnp.array([[1, 1], [2, 2], [3, 3]])}
    current = {"x": jnp.arange(6.0), "y": jnp.zeros((6, 2), jnp.int32)}
    out = optimistic_reset(done, fresh, current)
    np.testing.assert_array_equal(out["x"], [0.0, 10.0, 20.0, 3.0, 30.0, 10.0])
    np.testing.assert_array_equal(out["y"], [[0, 0], [1, 1], [2, 2], [0, 0], [3, 3], [1, 1]])


def test_reset_ratio_is_a_positive_int():
    assert check_reset_ratio(16) == 16
    with pytest.raises(
        ValueError, match=r"^reset_ratio must be >= 1 \(envs per fresh reset\), got 0\.$"
    ):
        check_reset_ratio(0)
    with pytest.raises(ValueError, match=r"^reset_ratio must be an int, got 2\.5\.$"):
        check_reset_ratio(2.5)


def test_max_length_is_a_positive_int_or_none_for_the_envs_own():
    assert check_max_length(None) is None and check_max_length(500) == 500
    with pytest.raises(
        ValueError, match=r"^max_length must be >= 1 \(or None for the env's own\), got 0\.$"
    ):
        check_max_length(0)
    with pytest.raises(ValueError, match=r"^max_length must be an int or None, got 9\.5\.$"):
        check_max_length(9.5)

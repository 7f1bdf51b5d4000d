"""Streaming normaliser against NumPy on random batches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.core import normalize as norm


def _numpy_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(0), ((x - x.mean(0)) ** 2).sum(0)


def test_batched_updates_match_numpy_over_all_samples():
    rng = np.random.default_rng(0)
    state = norm.init((3,))
    seen = []
    for size in (1, 7, 64, 5, 200):
        batch = rng.normal(loc=[1.0, -3.0, 50.0], scale=[0.5, 2.0, 10.0], size=(size, 3))
        seen.append(batch)
        state = norm.update(state, jnp.asarray(batch, jnp.float32))
        allx = np.concatenate(seen)
        mean, var_sum = _numpy_stats(allx)
        np.testing.assert_allclose(state.mean, mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(state.var_sum, var_sum, rtol=1e-4)
        assert float(state.count) == len(allx)
    # The original's std: sqrt(var_sum / (n - 1) + 1e-4); transform (x - mean) / (std + 1e-8).
    allx = np.concatenate(seen)
    std = np.sqrt(allx.var(0, ddof=1) + 1e-4)
    np.testing.assert_allclose(norm.std(state), std, rtol=1e-5)
    x = rng.normal(size=(10, 3)) * 100
    expected = np.clip((x - allx.mean(0)) / (std + 1e-8), -5, 5)
    got = norm.normalize(state, jnp.asarray(x, jnp.float32), clip=5.0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert np.abs(np.asarray(got)).max() == pytest.approx(5.0)


def test_leading_axes_and_mask():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 6, 2)).astype(np.float32)
    mask = rng.random((4, 6)) < 0.5
    state = norm.update(norm.init(2), jnp.asarray(x), jnp.asarray(mask))
    kept = x[mask]
    mean, var_sum = _numpy_stats(kept)
    np.testing.assert_allclose(state.mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.var_sum, var_sum, rtol=1e-5, atol=1e-6)
    assert float(state.count) == mask.sum()


def test_no_scaling_before_two_samples_and_scale_only():
    state = norm.init(())
    x = jnp.asarray([3.0, -2.0])
    # Empty statistics: centring with mean 0, no scaling.
    np.testing.assert_allclose(norm.normalize(state, x), [3.0, -2.0])
    state = norm.update(state, jnp.asarray([4.0]))
    assert float(state.mean) == 4.0
    np.testing.assert_allclose(norm.normalize(state, x), [-1.0, -6.0])
    state = norm.update(state, jnp.asarray([6.0, 8.0]))  # samples 4, 6, 8: var 4, mean 6
    std = np.sqrt(4.0 + 1e-4)
    np.testing.assert_allclose(
        norm.normalize(state, x, center=False, clip=10.0),
        np.array([3.0, -2.0]) / (std + 1e-8),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        norm.normalize(state, jnp.asarray([100.0]), center=False, clip=10.0), [10.0]
    )


def test_jit_and_shape_error():
    state = jax.jit(norm.update)(norm.init((2,)), jnp.ones((5, 2)))
    assert float(state.count) == 5
    with pytest.raises(ValueError, match="sample shape"):
        norm.update(norm.init((2,)), jnp.ones((5, 3)))

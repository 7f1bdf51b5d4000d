"""Discounted returns and GAE against hand-computed numbers, with truncation mid-rollout."""

import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.core.returns import discounted_returns, gae, running_returns

# One env, T = 5: the episode is truncated at t = 1 (bootstrap from V(final_obs) = 10) and
# terminated at t = 3 (no bootstrap); t = 4 is the last step of the rollout (bootstrap 7).
R = jnp.array([[1.0], [2.0], [3.0], [4.0], [5.0]])
V = jnp.array([[0.5], [1.0], [1.5], [2.0], [2.5]])
NV = jnp.array([[1.0], [10.0], [2.0], [99.0], [7.0]])  # V(final_obs_t); 99 must be ignored
TERM = jnp.array([[False], [False], [False], [True], [False]])
TRUNC = jnp.array([[False], [True], [False], [False], [False]])


def test_discounted_returns_by_hand():
    g = 0.5
    ret = discounted_returns(R, TERM, TRUNC, NV, g)
    # t4: 5 + .5*7 = 8.5; t3: 4 (terminal); t2: 3 + .5*4 = 5; t1: 2 + .5*10 = 7; t0: 1 + .5*7 = 4.5
    np.testing.assert_allclose(ret[:, 0], [4.5, 7.0, 5.0, 4.0, 8.5])


def test_gae_by_hand():
    g, lam = 0.5, 0.5
    adv, ret = gae(R, V, NV, TERM, TRUNC, g, lam)
    # deltas: r + g * (1 - term) * nv - v
    d = [1 + 0.5 * 1 - 0.5, 2 + 0.5 * 10 - 1.0, 3 + 0.5 * 2 - 1.5, 4 - 2.0, 5 + 0.5 * 7 - 2.5]
    assert d == [1.0, 6.0, 2.5, 2.0, 6.0]
    # A4 = 6; A3 = 2 (done); A2 = 2.5 + .25*2 = 3; A1 = 6 (done, truncated); A0 = 1 + .25*6 = 2.5
    np.testing.assert_allclose(adv[:, 0], [2.5, 6.0, 3.0, 2.0, 6.0])
    np.testing.assert_allclose(ret, adv + V)


def test_lambda_one_equals_discounted_returns_minus_values():
    rng = np.random.default_rng(0)
    T, B = 17, 4
    r = jnp.asarray(rng.normal(size=(T, B)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(T, B)), jnp.float32)
    nv_free = rng.normal(size=(T, B)).astype(np.float32)
    term = rng.random((T, B)) < 0.15
    trunc = (rng.random((T, B)) < 0.15) & ~term
    # Consistent bootstraps: where the episode goes on, V(final_obs_t) = V(obs_{t+1}).
    done = term | trunc
    nv = nv_free.copy()
    nv[:-1] = np.where(done[:-1], nv_free[:-1], np.asarray(v[1:]))
    nv = jnp.asarray(nv)
    adv, ret = gae(r, v, nv, jnp.asarray(term), jnp.asarray(trunc), 0.9, 1.0)
    expected = discounted_returns(r, jnp.asarray(term), jnp.asarray(trunc), nv, 0.9)
    np.testing.assert_allclose(ret, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, expected - v, rtol=1e-5, atol=1e-5)


def test_lambda_zero_is_one_step_td():
    adv, _ = gae(R, V, NV, TERM, TRUNC, 0.5, 0.0)
    np.testing.assert_allclose(adv[:, 0], [1.0, 6.0, 2.5, 2.0, 6.0])


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="time-major"):
        gae(R, V[:-1], NV, TERM, TRUNC, 0.5, 0.5)


def test_running_returns_by_hand():
    # Two envs, gamma 0.5; env 0 ends its episode at t = 1, env 1 starts from a carried 4.
    rewards = jnp.array([[1.0, 1.0], [2.0, 0.0], [3.0, 2.0]])
    done = jnp.array([[False, False], [True, False], [False, False]])
    returns, carry = running_returns(rewards, done, jnp.array([0.0, 4.0]), 0.5)
    # env 0: 1, 2 + .5 = 2.5 (ends), 3; env 1: 1 + 2 = 3, 1.5, 2 + .75 = 2.75
    np.testing.assert_array_equal(returns, [[1.0, 3.0], [2.5, 1.5], [3.0, 2.75]])
    np.testing.assert_array_equal(carry, [3.0, 2.75])
    _, carry = running_returns(rewards[:2], done[:2], jnp.zeros(2), 0.5)
    np.testing.assert_array_equal(carry, [0.0, 0.5])  # the episode that ended restarts at 0
    with pytest.raises(ValueError, match=r"start has shape \(3,\), expected \(2,\)"):
        running_returns(rewards, done, jnp.zeros(3), 0.5)

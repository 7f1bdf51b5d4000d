"""PPO losses: KL penalty with cutoff, beta adaptation, clipping, value loss; exact numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.ppo import losses


def test_adapt_beta_thresholds():
    kappa = 0.01
    beta = jnp.asarray(1.0)
    assert float(losses.adapt_beta(beta, jnp.asarray(0.0131), kappa)) == pytest.approx(1.5)
    assert float(losses.adapt_beta(beta, jnp.asarray(0.0129), kappa)) == pytest.approx(1.0)
    assert float(losses.adapt_beta(beta, jnp.asarray(0.0071), kappa)) == pytest.approx(1.0)
    assert float(losses.adapt_beta(beta, jnp.asarray(0.0069), kappa)) == pytest.approx(1 / 1.5)
    # Repeated increases compound.
    b = beta
    for _ in range(3):
        b = losses.adapt_beta(b, jnp.asarray(1.0), kappa)
    assert float(b) == pytest.approx(1.5**3)


def test_adapt_lr_scale_thresholds_and_ceiling():
    cap = 0.02
    one = jnp.asarray(1.0)
    assert float(losses.adapt_lr_scale(one, jnp.asarray(0.0201), cap)) == pytest.approx(1 / 1.5)
    assert float(losses.adapt_lr_scale(one, jnp.asarray(0.0199), cap)) == 1.0
    half = jnp.asarray(0.5)
    assert float(losses.adapt_lr_scale(half, jnp.asarray(0.0051), cap)) == 0.5
    assert float(losses.adapt_lr_scale(half, jnp.asarray(0.0049), cap)) == pytest.approx(0.75)
    # The scale never exceeds 1: the schedule stays the ceiling.
    assert float(losses.adapt_lr_scale(jnp.asarray(0.9), jnp.asarray(0.0), cap)) == 1.0
    s = one
    for _ in range(3):
        s = losses.adapt_lr_scale(s, jnp.asarray(1.0), cap)
    assert float(s) == pytest.approx(1.5**-3)


def test_kl_penalty_loss_by_hand():
    # Two sequences of length 2; the second is past the cutoff (threshold 2 * 0.01 = 0.02).
    log_prob = jnp.log(jnp.array([[1.0, 2.0], [1.0, 1.0]]))
    old_log_prob = jnp.zeros((2, 2))  # ratios: [[1, 2], [1, 1]]
    kl = jnp.array([[0.0, 0.02], [0.04, 0.06]])  # KL_i = [0.01, 0.05]
    entropy = jnp.array([[1.0, 1.0], [2.0, 2.0]])
    adv = jnp.array([[1.0, -1.0], [2.0, 0.0]])
    mask = jnp.ones((2, 2))
    loss, m = losses.kl_penalty_policy_loss(
        log_prob, old_log_prob, kl, entropy, adv, mask, jnp.asarray(2.0), 0.01, 2.0, 1000.0, 0.1
    )
    surr = np.array([-(1 * 1 + 2 * -1) / 2, -(1 * 2 + 0) / 2])  # [0.5, -1]
    kl_i = np.array([0.01, 0.05])
    cut = np.array([0.0, 1000 * (0.05 - 0.02) ** 2])  # [0, 0.9]
    ent = np.array([1.0, 2.0])
    expected = np.mean(surr + 2.0 * kl_i + cut - 0.1 * ent)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(m["kl_cutoff"]) == pytest.approx(0.45, rel=1e-4)
    assert float(m["cutoff_fraction"]) == 0.5
    assert float(m["kl"]) == pytest.approx(0.03)


def test_kl_penalty_mask_divides_by_padded_length():
    # The original's per-sequence mean: masked sum over the padded length L.
    ones = jnp.ones((1, 4))
    mask = jnp.array([[1.0, 1.0, 0.0, 0.0]])
    loss, _ = losses.kl_penalty_policy_loss(
        jnp.zeros((1, 4)),
        jnp.zeros((1, 4)),
        0 * ones,
        0 * ones,
        ones * 3,
        mask,
        jnp.asarray(1.0),
        0.01,
        2.0,
        1000.0,
        0.0,
    )
    assert float(loss) == pytest.approx(-(3 + 3) / 4)


def test_cutoff_gradient_pushes_kl_down():
    def f(k):
        kl = jnp.full((1, 3), k)
        z = jnp.zeros((1, 3))
        return losses.kl_penalty_policy_loss(
            z, z, kl, z, z, jnp.ones((1, 3)), jnp.asarray(0.0), 0.01, 2.0, 1000.0, 0.0
        )[0]

    assert float(jax.grad(f)(0.019)) == 0.0
    assert float(jax.grad(f)(0.03)) == pytest.approx(2 * 1000 * 0.01, rel=1e-4)


def test_clip_loss_by_hand():
    ratio = jnp.array([[0.5, 1.1, 1.5, 1.5]])
    adv = jnp.array([[1.0, 1.0, 1.0, -1.0]])
    loss, m = losses.clip_policy_loss(
        jnp.log(ratio), jnp.zeros((1, 4)), jnp.ones((1, 4)), adv, jnp.ones((1, 4)), 0.2, 0.01
    )
    # min(r A, clip(r) A): 0.5, 1.1, 1.2, -1.5
    assert float(loss) == pytest.approx(-(0.5 + 1.1 + 1.2 - 1.5) / 4 - 0.01, rel=1e-5)
    assert float(m["clip_fraction"]) == 0.75


def test_value_loss_and_clipping():
    v = jnp.array([[2.0, 0.0]])
    old = jnp.array([[0.0, 0.0]])
    target = jnp.array([[3.0, 1.0]])
    mask = jnp.ones((1, 2))
    assert float(losses.value_loss(v, old, target, mask, None)) == pytest.approx((1 + 1) / 2)
    # Clipped: V_clip = [0.5, 0]; errors max(1, 6.25) and max(1, 1).
    assert float(losses.value_loss(v, old, target, mask, 0.5)) == pytest.approx((6.25 + 1) / 2)


def test_normalize_advantages():
    a = jnp.array([[1.0, 2.0, 3.0, 100.0]])
    mask = jnp.array([[1.0, 1.0, 1.0, 0.0]])
    n = losses.normalize_advantages(a, mask)
    np.testing.assert_allclose(n[0, :3], np.array([-1, 0, 1]) / np.sqrt(2 / 3), rtol=1e-5)

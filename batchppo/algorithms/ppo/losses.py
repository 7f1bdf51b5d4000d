"""PPO losses as pure functions returning ``(loss, metrics)``.

Data come as batch-major sequences ``(N, L)`` with a float ``mask`` (1 for real steps). Two
policy objectives:

* ``kl_penalty`` (the original Batch PPO): per sequence ``i`` ``surr_i = -(1/L) sum_t m_t rho_t
  A_t``, ``KL_i = (1/L) sum_t m_t KL(pi_old || pi)``, ``cut_i = coef * 1[KL_i > f kappa] (KL_i - f
  kappa)^2`` and the loss is ``mean_i(surr_i + beta KL_i + cut_i - eta H_i)``; ``beta`` adapts after
  each update (``adapt_beta``).
* ``clip`` (modern PPO): ``-mean(min(rho A, clip(rho, 1 - eps, 1 + eps) A)) - eta H``.

The value loss is ``mean(m (R - V)^2)`` (optionally clipped around the old values); the total
loss weights it with ``value_coef`` (0.5 reproduces the original's ``0.5 * mean``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from batchppo.algorithms.networks.networks import DistParams, Network
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.hparams import HParams

PyTree = Any
Metrics = dict[str, jax.Array]


class Batch(NamedTuple):
    """Training data as sequences, every leaf with leading axes ``(N, L)`` (except ``carry0``).

    Attributes:
        obs: Observations as the network takes them (float vector leaves normalised, others
            in their own dtype: a uint8 image stays uint8).
        action: Actions taken (a pytree of the action space).
        first: True where ``obs`` starts an episode (recurrent state resets there).
        old_dist: Distribution parameters of the behaviour policy.
        old_log_prob: Log-probabilities of ``action`` under the behaviour policy.
        old_value: Values predicted during the rollout.
        advantage: Advantage estimates (not yet normalised).
        target: Value targets (returns).
        mask: float, 1 for real steps and 0 for padding; None where every step is real (the
            masked means are then plain means, without the products and the count).
        carry0: Recurrent state at the start of each sequence, ``(N, ...)``; ``()`` if none.
    """

    obs: PyTree
    action: PyTree
    first: jax.Array
    old_dist: DistParams
    old_log_prob: jax.Array
    old_value: jax.Array
    advantage: jax.Array
    target: jax.Array
    mask: jax.Array | None
    carry0: PyTree


def _seq_mean(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Per-sequence masked mean over time, dividing by the padded length like the original."""
    if mask is not None:
        x = x * mask
    return x.sum(-1) / x.shape[-1]


def _masked_mean(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Mean of ``x`` over the entries where ``mask`` is 1 (all of them where it is None)."""
    if mask is None:
        return x.sum() / jnp.float32(x.size)
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def normalize_advantages(advantage: jax.Array, mask: jax.Array) -> jax.Array:
    """Standardises advantages over the masked entries: ``(A - mean) / (std + 1e-8)``."""
    mean = _masked_mean(advantage, mask)
    var = _masked_mean((advantage - mean) ** 2, mask)
    return (advantage - mean) / (jnp.sqrt(var) + 1e-8)


def kl_penalty_policy_loss(
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    kl: jax.Array,
    entropy: jax.Array,
    advantage: jax.Array,
    mask: jax.Array,
    beta: jax.Array,
    kl_target: float,
    kl_cutoff_factor: float,
    kl_cutoff_coef: float,
    entropy_coef: float,
) -> tuple[jax.Array, Metrics]:
    """The original's policy loss: surrogate + adaptive KL penalty + quadratic KL cutoff.

    Args:
        log_prob: ``(N, L)`` log pi(a|s) under the current policy.
        old_log_prob: ``(N, L)`` log pi_old(a|s).
        kl: ``(N, L)`` KL(pi_old || pi) per step.
        entropy: ``(N, L)`` entropy of pi per step.
        advantage: ``(N, L)`` advantages (already normalised if wanted; no gradient flows).
        mask: ``(N, L)`` float mask.
        beta: KL penalty coefficient (scalar).
        kl_target: kappa.
        kl_cutoff_factor: The cutoff starts at ``kl_cutoff_factor * kappa``.
        kl_cutoff_coef: Coefficient of the quadratic cutoff.
        entropy_coef: Entropy bonus eta.

    Returns:
        ``(loss, metrics)`` with metrics ``surrogate``, ``kl``, ``kl_cutoff``,
        ``cutoff_fraction`` (share of sequences past the cutoff), ``entropy``.
    """
    ratio = jnp.exp(log_prob - old_log_prob)
    surr = -_seq_mean(ratio * jax.lax.stop_gradient(advantage), mask)
    kl_i = _seq_mean(kl, mask)
    threshold = kl_target * kl_cutoff_factor
    over = (kl_i > threshold).astype(jnp.float32)
    cut = kl_cutoff_coef * over * (kl_i - threshold) ** 2
    ent_i = _seq_mean(entropy, mask)
    loss = jnp.mean(surr + beta * kl_i + cut - entropy_coef * ent_i)
    metrics = {
        "surrogate": jnp.mean(surr),
        "kl": jnp.mean(kl_i),
        "kl_cutoff": jnp.mean(cut),
        "cutoff_fraction": jnp.mean(over),
        "entropy": _masked_mean(entropy, mask),
    }
    return loss, metrics


def clip_policy_loss(
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    entropy: jax.Array,
    advantage: jax.Array,
    mask: jax.Array,
    clip_epsilon: float,
    entropy_coef: float,
    diagnostics: bool = True,
) -> tuple[jax.Array, Metrics]:
    """The clipped surrogate objective of PPO with an entropy bonus.

    Args:
        log_prob: ``(N, L)`` log pi(a|s).
        old_log_prob: ``(N, L)`` log pi_old(a|s).
        entropy: ``(N, L)`` entropy of pi.
        advantage: ``(N, L)`` advantages (no gradient flows).
        mask: ``(N, L)`` float mask.
        clip_epsilon: Ratio clipping range.
        entropy_coef: Entropy bonus eta.
        diagnostics: Also ``clip_fraction`` and ``approx_kl``, which the loss does not need.

    Returns:
        ``(loss, metrics)`` with metrics ``surrogate``, ``entropy`` and, with ``diagnostics``,
        ``clip_fraction`` and ``approx_kl`` (the ``(rho - 1) - log rho`` estimator).
    """
    advantage = jax.lax.stop_gradient(advantage)
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantage
    clipped = jnp.clip(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantage
    surr = -_masked_mean(jnp.minimum(unclipped, clipped), mask)
    entropy_mean = _masked_mean(entropy, mask)
    loss = surr - entropy_coef * entropy_mean
    metrics = {"surrogate": surr, "entropy": entropy_mean}
    if diagnostics:
        metrics["clip_fraction"] = _masked_mean(
            (jnp.abs(ratio - 1.0) > clip_epsilon).astype(jnp.float32), mask
        )
        metrics["approx_kl"] = _masked_mean((ratio - 1.0) - log_ratio, mask)
    return loss, metrics


def value_loss(
    value: jax.Array,
    old_value: jax.Array,
    target: jax.Array,
    mask: jax.Array,
    value_clip: float | None,
) -> jax.Array:
    """``mean(m (R - V)^2)``, or with ``value_clip`` the max of it and the clipped version.

    Args:
        value: ``(N, L)`` current values.
        old_value: ``(N, L)`` values of the rollout (the clipping centre).
        target: ``(N, L)`` returns.
        mask: ``(N, L)`` float mask.
        value_clip: Clip ``V - V_old`` to ``[-value_clip, value_clip]``; None disables.

    Returns:
        The scalar value loss.
    """
    err = (target - value) ** 2
    if value_clip is not None:
        clipped = old_value + jnp.clip(value - old_value, -value_clip, value_clip)
        err = jnp.maximum(err, (target - clipped) ** 2)
    return _masked_mean(err, mask)


def adapt_beta(beta: jax.Array, kl: jax.Array, kl_target: float) -> jax.Array:
    """The original's penalty schedule: ``x1.5`` if ``kl > 1.3 kappa``, ``/1.5`` if ``< 0.7 kappa``.

    Args:
        beta: Current KL penalty coefficient.
        kl: Mean KL(pi_old || pi) over the whole batch after the update.
        kl_target: kappa.

    Returns:
        The new beta.
    """
    beta = jnp.where(kl > 1.3 * kl_target, beta * 1.5, beta)
    return jnp.where(kl < 0.7 * kl_target, beta / 1.5, beta)


def adapt_lr_scale(scale: jax.Array, kl: jax.Array, cap: float) -> jax.Array:
    """The learning rate's scale under ``lr_kl_cap``: ``/1.5`` if ``kl > cap``, ``x1.5`` (to at
    most 1) if ``kl < cap / 4``, else unchanged.

    Args:
        scale: Current factor on the scheduled learning rate, in (0, 1].
        kl: Mean KL(pi_old || pi) of the update's minibatch steps.
        cap: ``lr_kl_cap``.

    Returns:
        The new scale.
    """
    scale = jnp.where(kl > cap, scale / 1.5, scale)
    return jnp.where(kl < 0.25 * cap, jnp.minimum(scale * 1.5, 1.0), scale)


def ppo_loss(
    params: PyTree,
    batch: Batch,
    beta: jax.Array,
    network: Network,
    config: PPOConfig,
    hp: HParams | None = None,
) -> tuple[jax.Array, Metrics]:
    """The full loss of one minibatch: policy objective + ``value_coef`` * value loss.

    Args:
        params: Network parameters.
        batch: A minibatch of sequences.
        beta: KL penalty coefficient (used by ``kl_penalty`` only).
        network: The network's functions.
        config: The run's config (objective and switches).
        hp: The coefficients (``clip_epsilon``, ``entropy_coef``, ``value_coef``, the KL
            target and cutoff, ``value_clip``): a member's (``batchppo.algorithms.ppo.hparams``);
            None: the config's.

    Returns:
        ``(loss, metrics)``; metrics hold ``policy_loss``, ``value_loss``, ``entropy``, the
        objective's own terms and, with ``config.minibatch_diagnostics``, ``kl`` (exact mean
        KL(pi_old || pi)) and ``clip_fraction``.
    """
    dist_params, value = network.policy_sequence_and_value(
        params, batch.carry0, batch.obs, batch.first
    )
    dist = network.distribution(dist_params)
    old_dist = network.distribution(batch.old_dist)
    log_prob = dist.log_prob(batch.action)
    entropy = dist.entropy()
    hp = HParams.of(config) if hp is None else hp
    diagnostics = config.minibatch_diagnostics
    kl = old_dist.kl_divergence(dist) if diagnostics or config.objective == "kl_penalty" else None
    advantage = batch.advantage
    if config.normalize_advantages:
        advantage = normalize_advantages(advantage, batch.mask)
    if config.objective == "kl_penalty":
        pol_loss, pol_metrics = kl_penalty_policy_loss(
            log_prob,
            batch.old_log_prob,
            kl,
            entropy,
            advantage,
            batch.mask,
            beta,
            hp.kl_target,
            hp.kl_cutoff_factor,
            hp.kl_cutoff_coef,
            hp.entropy_coef,
        )
        if diagnostics:
            ratio = jnp.exp(log_prob - batch.old_log_prob)
            pol_metrics["clip_fraction"] = _masked_mean(
                (jnp.abs(ratio - 1.0) > hp.clip_epsilon).astype(jnp.float32), batch.mask
            )
    else:
        pol_loss, pol_metrics = clip_policy_loss(
            log_prob,
            batch.old_log_prob,
            entropy,
            advantage,
            batch.mask,
            hp.clip_epsilon,
            hp.entropy_coef,
            diagnostics,
        )
        if kl is not None:
            pol_metrics["kl"] = _masked_mean(kl, batch.mask)
    v_loss = value_loss(value, batch.old_value, batch.target, batch.mask, hp.value_clip)
    loss = pol_loss + hp.value_coef * v_loss
    metrics = {"policy_loss": pol_loss, "value_loss": v_loss, **pol_metrics}
    return loss, metrics

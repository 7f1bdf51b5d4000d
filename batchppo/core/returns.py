"""Discounted returns and GAE(lambda) with termination and truncation kept separate.

All functions take time-major arrays ``(T, *batch)`` and run a reverse ``lax.scan``.

Conventions (see ``batchppo.core.env``): at step ``t`` the agent saw ``obs_t``, got
``reward_t`` and the episode either went on, ``terminated_t`` (terminal state: the future is worth
0) or ``truncated_t`` (cut by a time limit: the future is worth ``V(final_obs_t)``).
``next_values_t`` is the value of the next observation *of the same episode*: ``V(final_obs_t)``
from [`Transition`][batchppo.core.Transition], which equals ``V(obs_{t+1})`` where the episode goes
on. The recursion never crosses an episode end, and the last step of a rollout bootstraps from its
``next_values``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def _check(name: str, x: jax.Array, like: jax.Array) -> None:
    if x.shape != like.shape:
        raise ValueError(f"{name} has shape {x.shape}, expected {like.shape} (time-major (T, ...))")


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    discount: float,
    lambda_: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation with separate termination and truncation.

    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and ``A_t = delta_t +
    gamma * lambda * (1 - done_t) * A_{t+1}`` with ``done = terminated | truncated`` and ``A_T =
    0``. With ``lambda = 1`` the returns ``A + values`` equal ``discounted_returns`` bootstrapped
    the same way.

    Args:
        rewards: ``(T, *batch)`` rewards.
        values: ``(T, *batch)`` values ``V(obs_t)``.
        next_values: ``(T, *batch)`` values ``V(final_obs_t)``.
        terminated: ``(T, *batch)`` bool, terminal state reached at ``t``.
        truncated: ``(T, *batch)`` bool, episode cut at ``t``.
        discount: gamma.
        lambda_: GAE lambda in [0, 1].

    Returns:
        ``(advantages, returns)``, both ``(T, *batch)`` float32, ``returns = advantages + values``.
    """
    for name, x in (("values", values), ("next_values", next_values)):
        _check(name, x, rewards)
    for name, x in (("terminated", terminated), ("truncated", truncated)):
        _check(name, x, rewards)
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - jnp.logical_or(terminated, truncated).astype(jnp.float32)
    deltas = rewards + discount * not_term * next_values - values
    decay = discount * lambda_ * not_done

    def step(carry: jax.Array, inp: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, d = inp
        adv = delta + d * carry
        return adv, adv

    # Unrolled 16 steps a loop iteration (as PureJaxRL's): the same arithmetic in a loop of
    # T / 16 iterations, each of which costs a device a round trip for its predicate.
    _, advantages = lax.scan(
        step, jnp.zeros_like(rewards[0]), (deltas, decay), reverse=True, unroll=16
    )
    return advantages, advantages + values


def discounted_returns(
    rewards: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    next_values: jax.Array,
    discount: float,
) -> jax.Array:
    """Plain discounted returns ``R_t = r_t + gamma * R_{t+1}`` within each episode.

    The original Batch PPO's return (it trained on whole episodes, with time-limit ends
    treated as terminal). Here a terminated step ends the sum, a truncated step bootstraps
    from ``next_values_t`` (``V(final_obs_t)``) and so does the last step of the rollout; pass
    zeros as ``next_values`` to get the unbootstrapped sums of the original.

    Args:
        rewards: ``(T, *batch)`` rewards.
        terminated: ``(T, *batch)`` bool.
        truncated: ``(T, *batch)`` bool.
        next_values: ``(T, *batch)`` bootstrap values ``V(final_obs_t)``; only read at truncated
            steps and at the last step.
        discount: gamma.

    Returns:
        ``(T, *batch)`` float32 returns.
    """
    for name, x in (("terminated", terminated), ("truncated", truncated)):
        _check(name, x, rewards)
    _check("next_values", next_values, rewards)
    terminated = terminated.astype(bool)
    truncated = truncated.astype(bool)

    def step(
        carry: jax.Array, inp: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        r, term, trunc, nv = inp
        future = jnp.where(term, 0.0, jnp.where(trunc, nv, carry))
        ret = r + discount * future
        return ret, ret

    _, returns = lax.scan(
        step, next_values[-1], (rewards, terminated, truncated, next_values), reverse=True
    )
    return returns


def running_returns(
    rewards: jax.Array, done: jax.Array, start: jax.Array, discount: float
) -> tuple[jax.Array, jax.Array]:
    """Discounted returns accumulated forward in time, as reward-scaling statistics use them.

    ``R_t = gamma * R_{t-1} + r_t`` where ``R_{t-1}`` is ``start`` at ``t = 0`` and the sum
    restarts after an episode end (``done_t``): ``R_t`` is the discounted return of the episode
    so far, seen from step ``t``. Its spread is the scale of the values the critic learns, which
    the spread of single rewards is not (SB3's ``VecNormalize`` scales rewards by it).

    Args:
        rewards: ``(T, *batch)`` rewards.
        done: ``(T, *batch)`` bool, the episode ended at ``t`` (terminated or truncated).
        start: ``(*batch)`` the running return before the first step.
        discount: gamma.

    Returns:
        ``(returns, carry)``: ``(T, *batch)`` float32 running returns, and the ``(*batch)`` value
        to pass as ``start`` to the next call (zero where the last step ended an episode).
    """
    _check("done", done, rewards)
    if start.shape != rewards.shape[1:]:
        raise ValueError(f"start has shape {start.shape}, expected {rewards.shape[1:]}")

    def step(acc: jax.Array, inp: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        reward, ended = inp
        ret = discount * acc + reward
        return jnp.where(ended, 0.0, ret), ret

    carry, returns = lax.scan(step, start.astype(jnp.float32), (rewards.astype(jnp.float32), done))
    return returns, carry

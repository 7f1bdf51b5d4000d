"""The fused simulation step of env and agent, and ``rollout`` = ``lax.scan`` of it.

This is the ``simulate`` of the original Batch PPO rebuilt as pure functions: one call steps the
agent's policy and the batched env together, keeps per-env episode score and length, and emits a
[`Transition`][batchppo.core.Transition] plus [`EpisodeStats`][batchppo.core.EpisodeStats]. It works
with any [`Env`][batchppo.core.Env] (pure-JAX envs fuse with the learner under one ``jit``; host
envs enter through ``io_callback``) and knows nothing about the algorithm.

Examples:
    >>> env = MockEnv(durations=(1, 2, 3))
    >>> policy = random_policy(env.spec)
    >>> state = init_sim_state(env, (), jax.random.key(0))
    >>> state, traj, stats = jax.jit(rollout, static_argnums=(0, 1, 4))(
    ...     env, policy, None, state, 16)
    >>> traj.obs.shape  # (T, num_envs, *obs_shape)
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import jax.numpy as jnp

from batchppo.core.env import Env, StepResult
from batchppo.core.types import EpisodeStats, PolicyFn, PyTree, SimState, Transition


def init_sim_state(env: Env, policy_carry: PyTree, key: jax.Array) -> SimState:
    """Resets ``env`` and returns the carry that ``simulate``/``rollout`` continue from.

    Args:
        env: The batched env.
        policy_carry: The policy's initial recurrent state (``()`` for feed-forward policies).
        key: PRNG key; split into the reset key and the key carried in the state.

    Returns:
        A [`SimState`][batchppo.core.SimState] with ``first`` True everywhere and zero score and
        length.
    """
    key_reset, key_next = jax.random.split(key)
    env_state, obs = env.reset(key_reset)
    num_envs = env.num_envs
    return SimState(
        env_state=env_state,
        obs=obs,
        first=jnp.ones((num_envs,), dtype=jnp.bool_),
        policy_carry=policy_carry,
        score=jnp.zeros((num_envs,), dtype=jnp.float32),
        length=jnp.zeros((num_envs,), dtype=jnp.int32),
        key=key_next,
    )


def act(
    policy_fn: PolicyFn, params: PyTree, state: SimState
) -> tuple[jax.Array, dict[str, Any], PyTree, jax.Array, jax.Array]:
    """The agent's half of a step: the policy acts on ``state.obs``.

    Returns:
        ``(action, extras, policy_carry, next_key, env_key)``: ``next_key`` is carried to the
        next state, ``env_key`` is for the env's step.
    """
    key, key_policy, key_env = jax.random.split(state.key, 3)
    action, extras, carry = policy_fn(
        params, state.policy_carry, state.obs, state.first, key_policy
    )
    return action, extras, carry, key, key_env


def advance(
    state: SimState,
    action: jax.Array,
    extras: dict[str, Any],
    policy_carry: PyTree,
    key: jax.Array,
    res: StepResult,
) -> tuple[SimState, Transition, EpisodeStats]:
    """The bookkeeping half of a step, after the env stepped (``res``) on ``action``.

    Returns:
        ``(next_state, transition, stats)`` as [`simulate`][batchppo.core.simulate].
    """
    reward = res.reward.astype(jnp.float32)
    score = state.score + reward
    length = state.length + 1
    done = jnp.logical_or(res.terminated, res.truncated)
    stats = EpisodeStats(
        done=done,
        score=jnp.where(done, score, jnp.zeros_like(score)),
        length=jnp.where(done, length, jnp.zeros_like(length)),
        terminated=res.terminated,
        truncated=res.truncated,
    )
    transition = Transition(
        obs=state.obs,
        action=action,
        reward=reward,
        terminated=res.terminated,
        truncated=res.truncated,
        first=state.first,
        final_obs=res.final_obs,
        extras=extras,
    )
    next_state = SimState(
        env_state=res.state,
        obs=res.obs,
        first=done,
        policy_carry=policy_carry,
        score=jnp.where(done, jnp.zeros_like(score), score),
        length=jnp.where(done, jnp.zeros_like(length), length),
        key=key,
    )
    return next_state, transition, stats


def simulate(
    env: Env, policy_fn: PolicyFn, params: PyTree, state: SimState
) -> tuple[SimState, Transition, EpisodeStats]:
    """One fused step: the policy acts on ``state.obs``, the env steps and auto-resets.

    Args:
        env: The batched env.
        policy_fn: ``(params, carry, obs, first, key) -> (action, extras, carry)``.
        params: Passed unchanged to ``policy_fn``.
        state: The current [`SimState`][batchppo.core.SimState].

    Returns:
        ``(next_state, transition, stats)``: ``transition`` holds the step's obs, action,
        reward, terminated, truncated, first, final_obs and the policy's extras; ``stats``
        holds, per env, whether an episode ended, how (terminated, truncated), and its score
        and length (0 elsewhere).
    """
    action, extras, carry, key, key_env = act(policy_fn, params, state)
    res = env.step(state.env_state, action, key_env)
    return advance(state, action, extras, carry, key, res)


def rollout(
    env: Env, policy_fn: PolicyFn, params: PyTree, state: SimState, num_steps: int
) -> tuple[SimState, Transition, EpisodeStats]:
    """Runs ``simulate`` for ``num_steps`` steps under ``jax.lax.scan``.

    Jittable with ``env``, ``policy_fn`` and ``num_steps`` static (for example ``jax.jit(rollout,
    static_argnums=(0, 1, 4))``), and usable inside a larger jitted training step. Host envs
    ([`HostEnv`][batchppo.backends.HostEnv]) work too: each ``io_callback`` takes the env state the
    one before returned, so the env sees the steps in order.

    Args:
        env: The batched env.
        policy_fn: The agent (see [`PolicyFn`][batchppo.core.PolicyFn]).
        params: Passed unchanged to ``policy_fn`` at every step.
        state: The [`SimState`][batchppo.core.SimState] to continue from.
        num_steps: Number of steps per env (a Python int).

    Returns:
        ``(final_state, transitions, stats)`` with transitions and stats stacked to
        ``(num_steps, num_envs, ...)``.
    """
    try:
        num_steps = operator.index(num_steps)
    except TypeError:
        raise ValueError(
            f"num_steps must be a positive Python int (static under jit), got {num_steps!r}; "
            "pass it as a static argument."
        ) from None
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}.")

    def body(carry: SimState, _: None) -> tuple[SimState, tuple[Transition, EpisodeStats]]:
        carry, transition, stats = simulate(env, policy_fn, params, carry)
        return carry, (transition, stats)

    state, (transitions, stats) = jax.lax.scan(body, state, None, length=num_steps)
    return state, transitions, stats

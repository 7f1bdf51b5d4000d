"""The other host rollout: ``rollout`` as a Python loop around the compiled halves of a step.

[`rollout`][batchppo.core.rollout] over a [`HostEnv`][batchppo.backends.HostEnv] is one compiled
program that calls back into the host envs at every step (``io_callback``).
[`HostLoop`][batchppo.backends.HostLoop] runs the same steps the other way round: a Python loop that
steps the vector env directly and, between two env steps, makes one compiled call: the bookkeeping
of the step before (``batchppo.core.simulation.advance``), its transition written in place into the
rollout's arrays, and the policy on the new observation (``batchppo.core.simulation.act``). Both
give the same transitions, episode statistics and final state; which is faster depends on the env
and the machine (``bench/train.py`` measures both), so the trainer offers both (``host_loop``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchppo.backends.host_env import HostEnv
from batchppo.core.simulation import act, advance
from batchppo.core.types import EpisodeStats, PolicyFn, PyTree, SimState, Transition


def _advance_host(
    state: SimState,
    action: jax.Array,
    extras: dict[str, Any],
    policy_carry: PyTree,
    key: jax.Array,
    host_result: tuple[np.ndarray, ...],
) -> tuple[SimState, Transition, EpisodeStats]:
    res = HostEnv.step_result(state.env_state, host_result)
    return advance(state, action, extras, policy_carry, key, res)


Acted = tuple[SimState, jax.Array, dict[str, Any], PyTree, jax.Array]
"""A state and what the policy did in it: ``(state, action, extras, policy_carry, next_key)``."""


def _act(policy_fn: PolicyFn, params: PyTree, state: SimState) -> Acted:
    action, extras, carry, key, _ = act(policy_fn, params, state)
    return state, action, extras, carry, key


def _empty(num_steps: int, acted: Acted, host_result: tuple[np.ndarray, ...]) -> PyTree:
    """Zeros of ``(num_steps, ...)`` for each leaf of a step's ``(transition, stats)``."""
    _, transition, stats = jax.eval_shape(_advance_host, *acted, host_result)
    return jax.tree.map(
        lambda leaf: jnp.zeros((num_steps, *leaf.shape), leaf.dtype), (transition, stats)
    )


def _advance_into(
    acted: Acted, host_result: tuple[np.ndarray, ...], steps: PyTree, t: jax.Array
) -> tuple[SimState, PyTree]:
    """The step's bookkeeping, its transition and stats written at index ``t`` of ``steps``."""
    state, transition, stats = _advance_host(*acted, host_result)
    steps = jax.tree.map(
        lambda buf, x: jax.lax.dynamic_update_index_in_dim(buf, x, t, 0), steps, (transition, stats)
    )
    return state, steps


def _advance_act(
    policy_fn: PolicyFn,
    params: PyTree,
    acted: Acted,
    host_result: tuple[np.ndarray, ...],
    steps: PyTree,
    t: jax.Array,
) -> tuple[Acted, PyTree, jax.Array]:
    """``_advance_into``, then the policy's next step: one compiled call between env steps."""
    state, steps = _advance_into(acted, host_result, steps, t)
    return _act(policy_fn, params, state), steps, t + 1


class HostLoop:
    """``rollout`` over a [`HostEnv`][batchppo.backends.HostEnv], driven step by step from Python.

    Examples:
        Given a host env, a policy and its parameters (the docs test skips this fragment); the
        in-graph reset works for both loops:

        >>> loop = HostLoop(host_env, policy_fn)  # doctest: +SKIP
        >>> state = init_sim_state(host_env, (), key)  # doctest: +SKIP
        >>> state, transitions, stats = loop.rollout(params, state, 128)  # doctest: +SKIP

    Args:
        env: The host env; its ``host_step`` is called directly.
        policy_fn: The agent (see [`PolicyFn`][batchppo.core.PolicyFn]).
        compiler_options: XLA options of the compiled policy step (the trainer's options of
            its hot programs); None: XLA's defaults.
    """

    def __init__(
        self,
        env: HostEnv,
        policy_fn: PolicyFn,
        compiler_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(env, HostEnv):
            raise TypeError(
                f"HostLoop drives a HostEnv (Gymnasium envs on the host), got {env!r}; "
                "pure-JAX envs run fused: use rollout()"
            )
        self.env = env
        options = dict(compiler_options) if compiler_options else None
        # Between two env steps one compiled call: the bookkeeping of the step before, written
        # in place into the rollout's arrays (donated), and the policy on the new observation.
        self._act = jax.jit(functools.partial(_act, policy_fn), compiler_options=options)
        self._advance_act = jax.jit(
            functools.partial(_advance_act, policy_fn),
            donate_argnums=(3,),
            compiler_options=options,
        )
        self._advance_into = jax.jit(_advance_into, donate_argnums=(2,))
        self._empty = jax.jit(_empty, static_argnums=(0,))

    def rollout(
        self, params: PyTree, state: SimState, num_steps: int
    ) -> tuple[SimState, Transition, EpisodeStats]:
        """Runs ``num_steps`` steps; returns what ``rollout(env, policy_fn, ...)`` returns.

        Args:
            params: Passed unchanged to the policy at every step.
            state: The [`SimState`][batchppo.core.SimState] to continue from.
            num_steps: Steps per env (>= 1).

        Returns:
            ``(final_state, transitions, stats)`` stacked to ``(num_steps, num_envs, ...)``.
        """
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}.")
        acted = self._act(params, state)
        host_result = self._host_step(acted)
        steps = self._empty(num_steps, acted, host_result)
        t = jnp.zeros((), jnp.int32)
        for _ in range(num_steps - 1):
            acted, steps, t = self._advance_act(params, acted, host_result, steps, t)
            host_result = self._host_step(acted)
        state, (transitions, stats) = self._advance_into(acted, host_result, steps, t)
        return state, transitions, stats

    def _host_step(self, acted: Acted) -> tuple[np.ndarray, ...]:
        """The env's step on the policy's action (waits for the action, brings it to the host)."""
        return self.env.host_step(jax.tree.map(np.asarray, acted[1]))

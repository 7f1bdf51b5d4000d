"""The other host rollout: ``rollout`` as a Python loop around the compiled halves of a step.

[`rollout`][batchppo.core.rollout] over a [`HostEnv`][batchppo.backends.HostEnv] is one compiled
program that calls back into the host envs at every step (``io_callback``).
[`HostLoop`][batchppo.backends.HostLoop] runs the same steps the other way round: a Python loop that
calls the compiled policy step (``batchppo.core.simulation.act``), steps the vector env directly,
and calls the compiled bookkeeping (``batchppo.core.simulation.advance``). Both give the same
transitions, episode statistics and final state; which is faster depends on the env and the machine
(``bench/train.py`` measures both), so the trainer offers both (``host_loop``).
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


def _stack(steps: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *steps)


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
        self._act = jax.jit(functools.partial(act, policy_fn), compiler_options=options)
        self._advance = jax.jit(_advance_host)
        self._stack = jax.jit(_stack)

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
        steps = []
        for _ in range(num_steps):
            action, extras, carry, key, _ = self._act(params, state)
            host_result = self.env.host_step(jax.tree.map(np.asarray, action))
            state, transition, stats = self._advance(state, action, extras, carry, key, host_result)
            steps.append((transition, stats))
        transitions, stats = self._stack(steps)
        return state, transitions, stats

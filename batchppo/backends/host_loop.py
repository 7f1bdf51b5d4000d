"""The other host rollout: ``rollout`` as a Python loop around the compiled halves of a step.

[`rollout`][batchppo.core.rollout] over a [`HostEnv`][batchppo.backends.HostEnv] is one compiled
program that calls back into the host envs at every step (``io_callback``).
[`HostLoop`][batchppo.backends.HostLoop] runs the same steps the other way round: a Python loop that
steps the vector env directly and, between two env steps, makes one compiled call: the bookkeeping
of the step before (``batchppo.core.simulation.advance``), its transition written in place into the
rollout's arrays, and the policy on the new observation (``batchppo.core.simulation.act``). Both
give the same transitions, episode statistics and final state; which is faster depends on the env
and the machine (``bench/train.py`` measures both), so the trainer offers both (``host_loop``).

What goes to the device each step is the env's answer. Where no episode ended, its final
observations are its observations (the dense rule of ``batchppo.envs.final_obs``), so they are
not sent again: the compiled call takes ``None`` in their place (a second program) and reads the
observations. On an accelerator every array sent is a transfer of its own, with a fixed cost
larger than a frame stack's bytes; ``transfer="packed"`` sends the answer's arrays as one byte
buffer that the compiled call takes apart (``_Packing``).
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

TRANSFERS = ("arrays", "packed")
"""How ``HostLoop`` sends a step's answer to the device: each array apart, or one byte buffer."""

HostResult = tuple[Any, ...]
"""``host_step``'s ``(obs, reward, terminated, truncated, final_obs)``; ``final_obs`` None where
no episode ended (then the observations are the final ones)."""


class _Packing:
    """A step's arrays as one byte buffer on the host, and taken apart again where traced.

    Every leaf is laid out whole, C order, one after another, in the dtype JAX gives it on the
    device (``jax.dtypes.canonicalize_dtype``: float64 as float32 unless x64 is on, as a
    transfer of the array would); ``layout`` (each leaf's shape, dtype and offset, and the
    tree) is static, a key of the compiled call. Bools travel as bytes (NumPy's 0 and 1) and
    come back as ``!= 0``; wider types through a bitcast of their bytes, so every value is the
    one the array's own transfer would give.
    """

    @staticmethod
    def _leaves(tree: Any) -> tuple[list[np.ndarray], Any]:
        leaves, treedef = jax.tree.flatten(tree)
        canonical = jax.dtypes.canonicalize_dtype
        return [np.asarray(leaf, canonical(np.asarray(leaf).dtype)) for leaf in leaves], treedef

    @staticmethod
    def layout(tree: Any) -> tuple[Any, tuple[tuple[tuple[int, ...], str, int], ...]]:
        leaves, treedef = _Packing._leaves(tree)
        specs, offset = [], 0
        for leaf in leaves:
            specs.append((leaf.shape, leaf.dtype.str, offset))
            offset += leaf.nbytes
        return treedef, tuple(specs)

    @staticmethod
    def pack(tree: Any) -> np.ndarray:
        leaves, _ = _Packing._leaves(tree)
        return np.concatenate(
            [np.ascontiguousarray(leaf).reshape(-1).view(np.uint8) for leaf in leaves]
        )

    @staticmethod
    def unpack(buffer: jax.Array, layout: Any) -> Any:
        treedef, specs = layout
        leaves = []
        for shape, dtype_str, offset in specs:
            dtype = np.dtype(dtype_str)
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            raw = jax.lax.slice_in_dim(buffer, offset, offset + size)
            if dtype == np.bool_:
                leaf = raw != 0
            elif dtype.itemsize == 1:
                leaf = jax.lax.bitcast_convert_type(raw, dtype)
            else:
                leaf = jax.lax.bitcast_convert_type(raw.reshape(-1, dtype.itemsize), dtype)
            leaves.append(leaf.reshape(shape))
        return jax.tree.unflatten(treedef, leaves)


def _advance_host(
    state: SimState,
    action: jax.Array,
    extras: dict[str, Any],
    policy_carry: PyTree,
    key: jax.Array,
    host_result: HostResult,
) -> tuple[SimState, Transition, EpisodeStats]:
    obs, reward, terminated, truncated, final_obs = host_result
    if final_obs is None:  # no episode ended: the final observations are the observations
        final_obs = obs
    res = HostEnv.step_result(state.env_state, (obs, reward, terminated, truncated, final_obs))
    return advance(state, action, extras, policy_carry, key, res)


Acted = tuple[SimState, jax.Array, dict[str, Any], PyTree, jax.Array]
"""A state and what the policy did in it: ``(state, action, extras, policy_carry, next_key)``."""


def _act(policy_fn: PolicyFn, params: PyTree, state: SimState) -> Acted:
    action, extras, carry, key, _ = act(policy_fn, params, state)
    return state, action, extras, carry, key


def _received(sent: Any, layout: Any) -> HostResult:
    """The step's answer as ``_advance_host`` takes it, from what was sent (see ``_Packing``)."""
    return sent if layout is None else _Packing.unpack(sent, layout)


def _empty(num_steps: int, acted: Acted, sent: Any, layout: Any) -> PyTree:
    """Zeros of ``(num_steps, ...)`` for each leaf of a step's ``(transition, stats)``."""
    _, transition, stats = jax.eval_shape(_advance_host, *acted, _received(sent, layout))
    return jax.tree.map(
        lambda leaf: jnp.zeros((num_steps, *leaf.shape), leaf.dtype), (transition, stats)
    )


def _advance_into(
    acted: Acted, sent: Any, steps: PyTree, t: jax.Array, layout: Any
) -> tuple[SimState, PyTree]:
    """The step's bookkeeping, its transition and stats written at index ``t`` of ``steps``."""
    state, transition, stats = _advance_host(*acted, _received(sent, layout))
    steps = jax.tree.map(
        lambda buf, x: jax.lax.dynamic_update_index_in_dim(buf, x, t, 0), steps, (transition, stats)
    )
    return state, steps


def _advance_act(
    policy_fn: PolicyFn,
    params: PyTree,
    acted: Acted,
    sent: Any,
    steps: PyTree,
    t: jax.Array,
    layout: Any,
) -> tuple[Acted, PyTree, jax.Array]:
    """``_advance_into``, then the policy's next step: one compiled call between env steps."""
    state, steps = _advance_into(acted, sent, steps, t, layout)
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
        transfer: How a step's answer goes to the device (``TRANSFERS``): ``arrays``, each
            array as it is; ``packed``, all in one byte buffer (one transfer a step instead of
            one per array). The transitions are the same.

    Raises:
        TypeError: ``env`` is not a ``HostEnv``.
        ValueError: An unknown ``transfer``.
    """

    def __init__(
        self,
        env: HostEnv,
        policy_fn: PolicyFn,
        compiler_options: Mapping[str, Any] | None = None,
        transfer: str = "arrays",
    ) -> None:
        if not isinstance(env, HostEnv):
            raise TypeError(
                f"HostLoop drives a HostEnv (Gymnasium envs on the host), got {env!r}; "
                "pure-JAX envs run fused: use rollout()"
            )
        if transfer not in TRANSFERS:
            raise ValueError(f"transfer={transfer!r}: choose one of {TRANSFERS}")
        self.env = env
        self.policy_fn = policy_fn
        self.compiler_options = dict(compiler_options) if compiler_options else None
        self.transfer = transfer
        options = self.compiler_options
        # Between two env steps one compiled call: the bookkeeping of the step before, written
        # in place into the rollout's arrays (donated), and the policy on the new observation.
        self._act = jax.jit(functools.partial(_act, policy_fn), compiler_options=options)
        self._advance_act = jax.jit(
            functools.partial(_advance_act, policy_fn),
            donate_argnums=(3,),
            static_argnames="layout",
            compiler_options=options,
        )
        self._advance_into = jax.jit(_advance_into, donate_argnums=(2,), static_argnames="layout")
        self._empty = jax.jit(_empty, static_argnums=(0,), static_argnames="layout")

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
        sent, layout = self._host_step(acted)
        steps = self._empty(num_steps, acted, sent, layout=layout)
        t = jnp.zeros((), jnp.int32)
        for _ in range(num_steps - 1):
            acted, steps, t = self._advance_act(params, acted, sent, steps, t, layout=layout)
            sent, layout = self._host_step(acted)
        state, (transitions, stats) = self._advance_into(acted, sent, steps, t, layout=layout)
        return state, transitions, stats

    def _host_step(self, acted: Acted) -> tuple[Any, Any]:
        """The env's step on the policy's action (waits for the action, brings it to the host),
        as it goes to the device: ``(sent, layout)``, ``layout`` None unless packed."""
        return self.send(self.env.host_step(jax.tree.map(np.asarray, acted[1])))

    def send(self, host_result: tuple[Any, ...]) -> tuple[Any, Any]:
        """What goes to the device of ``host_step``'s answer, and its layout (None: as is).

        The final observations stay behind where no episode ended (``None`` in their place);
        with ``transfer="packed"`` the arrays go as one byte buffer.
        """
        terminated, truncated = host_result[2:4]
        if not (terminated.any() or truncated.any()):
            host_result = (*host_result[:4], None)
        if self.transfer == "arrays":
            return host_result, None
        return _Packing.pack(host_result), _Packing.layout(host_result)

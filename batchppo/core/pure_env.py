"""What the pure-JAX adapters of [`Env`][batchppo.core.Env] share.

A pure-JAX env (gymnax, Brax) is ``vmap``-ed over the batch and keeps its own step count per env
(``TimedState``), so that ``truncated`` (the time limit) and ``terminated`` stay separate; finished
envs restart inside the compiled step (``autoreset``, its modes those of
``batchppo.core.autoreset``). ``PureJaxEnv`` holds the batch size, the spec
and that time-limit rule; the backends' adapters ([`batchppo.backends`][batchppo.backends]) subclass
it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from batchppo.core.autoreset import (
    AUTORESET_MODES,
    DEFAULT_RESET_RATIO,
    check_autoreset,
    check_reset_ratio,
)
from batchppo.core.env import EnvSpec
from batchppo.core.values import optional_positive_int, positive_int

__all__ = [
    "AUTORESET_MODES",
    "DEFAULT_RESET_RATIO",
    "PureJaxEnv",
    "TimedState",
    "autoreset",
    "check_autoreset",
    "check_max_length",
    "check_num_envs",
    "check_reset_ratio",
    "optimistic_reset",
]


def _batched_where(done: jax.Array, new: Any, old: Any) -> Any:
    """Per-env select over a pytree whose leaves have a leading batch axis."""

    def select(a: jax.Array, b: jax.Array) -> jax.Array:
        mask = done.reshape(done.shape + (1,) * (jnp.ndim(a) - 1))
        return jnp.where(mask, a, b)

    return jax.tree.map(select, new, old)


def check_num_envs(num_envs: Any) -> int:
    """``num_envs`` as an int >= 1, or a one-line ValueError."""
    return positive_int("num_envs", num_envs)


def check_max_length(max_length: Any) -> int | None:
    """``max_length`` as an int >= 1 or None (the env's own), or a one-line ValueError."""
    return optional_positive_int("max_length", max_length, "the env's own")


@struct.dataclass
class TimedState:
    """State of the pure-JAX adapters: the batched inner env state, our step count per env and,
    with ``autoreset="first"``, what each env restarts from (None otherwise)."""

    env_state: Any
    time: jax.Array
    first: Any = None


def optimistic_reset(done: jax.Array, fresh: Any, current: Any) -> Any:
    """``current`` with the envs where ``done`` replaced from the batch of resets ``fresh``.

    The j-th env (in env order) where ``done`` is set takes ``fresh``'s entry j modulo the
    number of entries, so that the fresh resets are used before any is used twice.
    """
    count = jax.tree.leaves(fresh)[0].shape[0]
    slot = (jnp.cumsum(done.astype(jnp.int32)) - 1) % count
    picked = jax.tree.map(lambda x: x[slot], fresh)
    return _batched_where(done, picked, current)


def autoreset(
    done: jax.Array, reset_fn: Callable[[], Any], current: Any, mode: str = "cond"
) -> Any:
    """Replaces ``current`` by ``reset_fn()`` where ``done``, per env.

    With ``mode="cond"`` the reset runs under ``lax.cond`` so that steps where no episode ended
    skip its cost: worth it where a reset is expensive (Brax's physics). The predicate decides
    on the host which branch runs, which on a GPU waits for the device at every step; where a
    reset is cheap (gymnax) ``mode="select"`` computes it at every step and selects it per env
    without that wait. Both give the same values.
    """
    if mode == "select":
        return _batched_where(done, reset_fn(), current)
    return jax.lax.cond(
        jnp.any(done),
        lambda _: _batched_where(done, reset_fn(), current),
        lambda _: current,
        None,
    )


class PureJaxEnv:
    """What the pure-JAX adapters share: batch size, spec, and our own time-limit and restart
    bookkeeping.

    Subclasses set ``_spec``, ``_num_envs``, ``_max_length`` and ``_autoreset`` in ``__init__``.
    """

    _spec: EnvSpec
    _num_envs: int
    _max_length: int

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one env (after normalisation, if on)."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return self._num_envs

    @property
    def max_length(self) -> int:
        """The time limit in steps."""
        return self._max_length

    def close(self) -> None:
        """Nothing to release (pure JAX)."""

    _autoreset: str
    _reset_ratio: int = DEFAULT_RESET_RATIO

    def _fresh_state(self, env_state: Any, restart_from: Any) -> TimedState:
        """The state of freshly reset envs: our step counts at 0 and, with
        ``autoreset="first"``, ``restart_from`` kept as what each env restarts from."""
        time = jnp.zeros((self._num_envs,), jnp.int32)
        first = restart_from if self._autoreset == "first" else None
        return TimedState(env_state=env_state, time=time, first=first)

    def _restart(
        self, done: jax.Array, state: TimedState, fresh: Callable[[int], Any], current: Any
    ) -> Any:
        """``current`` with the envs where ``done`` restarted (``AUTORESET_MODES``).

        Args:
            done: ``(num_envs,)`` where an episode ended this step.
            state: The state the step started from (its ``first`` for ``autoreset="first"``).
            fresh: ``fresh(n)`` draws ``n`` fresh resets, in the layout of ``current``.
            current: The envs after the step, in the layout the adapter keeps in ``first``.
        """
        if self._autoreset == "first":
            return _batched_where(done, state.first, current)
        if self._autoreset == "optimistic":
            count = -(-self._num_envs // self._reset_ratio)
            return optimistic_reset(done, fresh(count), current)
        return autoreset(done, lambda: fresh(self._num_envs), current, self._autoreset)

    def _time_limit(
        self, time: jax.Array, terminated: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Advances the step count; returns ``(time, truncated, done)``.

        Truncation needs the limit reached without the env terminating at that step: when both
        happen, terminated wins (no bootstrap).
        """
        time = time + 1
        truncated = (time >= self._max_length) & ~terminated
        return time, truncated, terminated | truncated

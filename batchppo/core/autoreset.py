"""How the pure-JAX adapters restart finished envs, and the backend options that choose it.

Light (no JAX), so that the backend records declare these options and a config's values are
checked without importing an env; ``batchppo.core.pure_env`` (the adapters' shared code)
re-exports its names.

Examples:
    >>> RestartOptions(autoreset="optimistic", reset_ratio=8)
    RestartOptions(autoreset='optimistic', reset_ratio=8)
    >>> check_reset_ratio(0)
    Traceback (most recent call last):
    ...
    ValueError: reset_ratio must be >= 1 (envs per fresh reset), got 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from batchppo.core.backends import LEARNED
from batchppo.core.values import positive_int

__all__ = [
    "AUTORESET_MODES",
    "DEFAULT_RESET_RATIO",
    "RestartOptions",
    "check_autoreset",
    "check_reset_ratio",
]

AUTORESET_MODES = ("select", "cond", "first", "optimistic")
"""How the pure-JAX adapters restart finished envs: ``select`` computes a fresh random reset at
every step and selects it per env (as gymnax's own ``step`` does); ``cond`` computes it under
``lax.cond`` only at steps where some env finished (on a GPU the host reads the predicate, so
every step waits for the device); ``first`` restarts each env from the state its first reset
drew, kept in the env state (as Brax's ``AutoResetWrapper``): no reset is computed after the
start, but every episode of an env starts from the same state, so starts are less diverse;
``optimistic`` computes ``ceil(num_envs / reset_ratio)`` fresh resets at every step and hands
them to the envs that finished, in env order (the j-th finished env takes reset j modulo their
number, so when more envs finish in one step than there are resets, some start from the same
state): for envs whose reset costs more than a step (Craftax draws a world), as the Craftax
baselines' optimistic resets. The first two give the same values; ``first`` and
``optimistic`` are opt-ins for speed, or to match Brax and Craftax's baselines."""

DEFAULT_RESET_RATIO = 16
"""Envs per fresh reset of ``autoreset="optimistic"`` (the Craftax baselines' default)."""


def check_autoreset(mode: Any) -> str:
    """``mode`` if it is one of ``AUTORESET_MODES``, or a one-line ValueError."""
    if mode not in AUTORESET_MODES:
        raise ValueError(f"autoreset must be one of {AUTORESET_MODES}, got {mode!r}.")
    return mode


def check_reset_ratio(ratio: Any) -> int:
    """``ratio`` (envs per fresh reset of ``autoreset="optimistic"``) as an int >= 1, or a
    one-line ValueError."""
    return positive_int("reset_ratio", ratio, " (envs per fresh reset)")


@dataclasses.dataclass(frozen=True)
class RestartOptions:
    """The ``backend_options`` of the pure-JAX backends (``gymnax``, ``jumanji``; ``brax``'s add
    its physics): how finished envs restart (``--set backend_options.autoreset=first``). Both
    change what a run learns: a resumed run keeps them."""

    autoreset: str = dataclasses.field(default="select", metadata=LEARNED)
    """How finished envs restart, one of ``AUTORESET_MODES``."""
    reset_ratio: int = dataclasses.field(default=DEFAULT_RESET_RATIO, metadata=LEARNED)
    """Envs per fresh reset with ``autoreset="optimistic"``."""

    def __post_init__(self) -> None:
        try:
            check_autoreset(self.autoreset)
            check_reset_ratio(self.reset_ratio)
        except ValueError as error:
            raise ValueError(f"backend_options.{error}") from None

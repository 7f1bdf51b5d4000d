"""Nested Gymnasium spaces as flat lists of array leaves, the form they take in shared memory.

A [`BatchEnv`][batchppo.envs.BatchEnv] keeps one shared array per *leaf* of a space: a ``Box``,
``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` found by walking ``Dict`` (in its key order) and
``Tuple`` (in order) spaces depth first. A batch of ``n`` values of a leaf is an array of shape
``(n, *leaf.shape)`` and the leaf's dtype, and the batch of a nested space is the same ``dict`` /
``tuple`` structure over those arrays: what Gymnasium's ``AsyncVectorEnv`` returns
(``gymnasium.vector.utils.read_from_shared_memory`` / ``concatenate``).

``is_gym_leaf``, ``gym_leaves`` and ``gym_leaf_paths`` walk Gymnasium spaces; their namesakes
without ``gym`` in ``batchppo.core.spaces`` walk the core's own space trees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gymnasium import Space
from gymnasium import spaces as gym_spaces

__all__ = [
    "LEAF_SPACES",
    "check_structure",
    "check_supported",
    "flattener",
    "gym_leaf_paths",
    "gym_leaves",
    "is_gym_leaf",
    "unflatten",
]

LEAF_SPACES = (
    gym_spaces.Box,
    gym_spaces.Discrete,
    gym_spaces.MultiDiscrete,
    gym_spaces.MultiBinary,
)


def is_gym_leaf(space: Space) -> bool:
    """Whether ``space`` is one array (Box, Discrete, MultiDiscrete or MultiBinary)."""
    return isinstance(space, LEAF_SPACES)


def gym_leaves(space: Space) -> list[Space]:
    """The leaf spaces of ``space``, depth first (Dict in key order, Tuple in order).

    Args:
        space: A leaf space or a Dict/Tuple nesting of leaf spaces.

    Returns:
        The leaves; ``[space]`` for a leaf space.

    Raises:
        ValueError: A part of ``space`` is neither a leaf nor a Dict/Tuple (names its path).
    """
    return [leaf for _, leaf in _walk(space, "")]


def gym_leaf_paths(space: Space) -> list[str]:
    """Where each leaf sits, for messages: ``"['pos']"``, ``"[1]['x']"``; ``""`` for a leaf."""
    return [path for path, _ in _walk(space, "")]


def _walk(space: Space, path: str) -> list[tuple[str, Space]]:
    if is_gym_leaf(space):
        return [(path, space)]
    if isinstance(space, gym_spaces.Dict):
        out = []
        for key, sub in space.spaces.items():
            out += _walk(sub, f"{path}[{key!r}]")
        return out
    if isinstance(space, gym_spaces.Tuple):
        out = []
        for i, sub in enumerate(space.spaces):
            out += _walk(sub, f"{path}[{i}]")
        return out
    where = f" at {path}" if path else ""
    raise ValueError(
        f"BatchEnv supports Box, Discrete, MultiDiscrete and MultiBinary spaces, nested in Dict "
        f"and Tuple spaces; found {space}{where}. Flatten it first "
        "(gymnasium.wrappers.FlattenObservation)."
    )


def flattener(space: Space) -> Callable[[Any], list[Any]]:
    """A function mapping a value of ``space`` (one env's, or a batch) to its list of leaves.

    The leaves come in the order of ``gym_leaves``. Raises ``KeyError``/``IndexError``/
    ``TypeError`` on a value that does not have the structure of ``space``.
    """
    if is_gym_leaf(space):
        return lambda value: [value]
    if isinstance(space, gym_spaces.Dict):
        parts = [(key, flattener(sub)) for key, sub in space.spaces.items()]
        return lambda value: [leaf for key, f in parts for leaf in f(value[key])]
    parts_t = [flattener(sub) for sub in space.spaces]

    def flatten_tuple(value: Any) -> list[Any]:
        if len(value) != len(parts_t):
            raise IndexError(f"expected a tuple of {len(parts_t)}, got {len(value)} items")
        return [leaf for f, item in zip(parts_t, value, strict=True) for leaf in f(item)]

    return flatten_tuple


def unflatten(space: Space, values: Sequence[Any]) -> Any:
    """Builds the ``dict`` / ``tuple`` structure of ``space`` over its leaves' ``values``.

    Args:
        space: The space (a leaf space gives back ``values[0]``).
        values: One value per leaf, in the order of ``gym_leaves``.

    Returns:
        Plain ``dict`` (Dict spaces, in key order) and ``tuple`` (Tuple spaces) nesting, as
        Gymnasium's ``read_from_shared_memory`` builds it.
    """
    it = iter(values)
    return _unflatten(space, it)


def _unflatten(space: Space, it: Any) -> Any:
    if is_gym_leaf(space):
        return next(it)
    if isinstance(space, gym_spaces.Dict):
        return {key: _unflatten(sub, it) for key, sub in space.spaces.items()}
    return tuple(_unflatten(sub, it) for sub in space.spaces)


def check_structure(space: Space, value: Any, what: str) -> list[Any]:
    """The leaves of a batched ``value`` of ``space``, or ValueError naming what was expected.

    Args:
        space: The (single-env) space whose batch ``value`` should be.
        value: A dict/tuple nesting of arrays with the structure of ``space``.
        what: How to call ``value`` in the message (``"actions"``).

    Raises:
        ValueError: ``value`` lacks a key, has a tuple of the wrong length, or is not a
            mapping/sequence where ``space`` has a Dict/Tuple.
    """
    try:
        return flattener(space)(value)
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(
            f"{what} must have the structure of the batched space {space} (a dict of arrays "
            f"for a Dict, a tuple of arrays for a Tuple); {exc}."
        ) from None


def check_supported(observation_space: Space, action_space: Space) -> None:
    """Raises ValueError, naming the space and why, unless both spaces are leaf spaces or
    Dict/Tuple nestings of them (what shared memory holds)."""
    for label, space in (("observation", observation_space), ("action", action_space)):
        try:
            gym_leaves(space)
        except ValueError as exc:
            raise ValueError(f"The {label} space is not supported. {exc}") from None

"""Observation and action spaces of the env API: trees of array leaves.

A space is a *leaf* (``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``) or a ``dict`` /
``tuple`` nesting of leaves: a JAX pytree whose leaves are the leaf specs (they are not registered
as pytree nodes, so ``jax.tree.leaves`` stops at them). Observations and actions are pytrees of the
same structure whose leaves are arrays of shape ``(*batch, *leaf.shape)`` and dtype ``leaf.dtype``.
Every leaf keeps its dtype from the env to the network: a uint8 frame stays uint8 through
``io_callback``, the rollout buffer and the minibatches, and becomes float only inside the network.

The core knows no backend's spaces: converters live with their backends
(``batchppo.backends.host_env.from_gymnasium`` for Gymnasium spaces), and a space a converter cannot
carry raises the error of ``unsupported``, an ``UnsupportedSpaceError`` naming the space, where it
sits and what is supported.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

PyTree = Any

SUPPORTED = (
    "Box (any dtype and rank), Discrete (start 0), MultiDiscrete and MultiBinary, nested in "
    "Dict and Tuple"
)
"""What the env API carries, for error messages."""


class UnsupportedSpaceError(ValueError):
    """A space the env API or the networks cannot carry (one line: the space, where, what works)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Box:
    """An array of any rank and dtype, with bounds (float32 copies; ±inf where unbounded).

    Attributes:
        shape: Shape of one value.
        dtype: NumPy dtype of the values (32-bit or narrower; 64-bit spaces are narrowed).
        low: Lower bounds, float32 of ``shape``.
        high: Upper bounds, float32 of ``shape``.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    low: np.ndarray
    high: np.ndarray

    @property
    def is_float(self) -> bool:
        """Whether the values are floating point."""
        return bool(np.issubdtype(self.dtype, np.floating))


@dataclasses.dataclass(frozen=True, eq=False)
class Discrete:
    """One integer in ``[0, n)`` (shape ``()``, int32)."""

    n: int

    @property
    def shape(self) -> tuple[int, ...]:
        """``()``: one integer per env."""
        return ()

    @property
    def dtype(self) -> np.dtype:
        """int32."""
        return np.dtype(np.int32)


@dataclasses.dataclass(frozen=True, eq=False)
class MultiDiscrete:
    """Independent integers, entry ``i`` in ``[0, nvec[i])`` (1-D, int32)."""

    nvec: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """``(len(nvec),)``."""
        return (len(self.nvec),)

    @property
    def dtype(self) -> np.dtype:
        """int32."""
        return np.dtype(np.int32)


@dataclasses.dataclass(frozen=True, eq=False)
class MultiBinary:
    """``n`` independent bits, 0 or 1 (1-D, int8 as Gymnasium's)."""

    n: int

    @property
    def shape(self) -> tuple[int, ...]:
        """``(n,)``."""
        return (self.n,)

    @property
    def dtype(self) -> np.dtype:
        """int8."""
        return np.dtype(np.int8)


LEAVES = (Box, Discrete, MultiDiscrete, MultiBinary)
Leaf = Box | Discrete | MultiDiscrete | MultiBinary


def is_leaf(x: Any) -> bool:
    """Whether ``x`` is a leaf spec."""
    return isinstance(x, LEAVES)


def leaves(space: PyTree) -> list[Leaf]:
    """The leaf specs of ``space`` in JAX's tree order (dict keys sorted)."""
    return jax.tree.leaves(space)


def leaf_paths(space: PyTree) -> list[str]:
    """Where each leaf sits (``"['pos']"``, ``"[1]"``; ``""`` for a single leaf), tree order."""
    paths, _ = jax.tree_util.tree_flatten_with_path(space)
    return ["".join(str(k) for k in path) for path, _ in paths]


def single(space: PyTree) -> Leaf | None:
    """The leaf when ``space`` is one leaf (not nested), else None."""
    return space if is_leaf(space) else None


def box(shape: tuple[int, ...], dtype: Any, low: Any = -np.inf, high: Any = np.inf) -> Box:
    """A ``Box`` with bounds broadcast to ``shape`` (float32)."""
    shape = tuple(int(s) for s in shape)
    low_f = np.broadcast_to(np.asarray(low, np.float32), shape).copy()
    high_f = np.broadcast_to(np.asarray(high, np.float32), shape).copy()
    return Box(shape, narrow_dtype(dtype), low_f, high_f)


def narrow_dtype(dtype: Any) -> np.dtype:
    """The dtype a leaf of ``dtype`` has in JAX: 64-bit floats and integers become 32-bit."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return np.dtype(np.float32)
    if dtype == np.int64:
        return np.dtype(np.int32)
    if dtype == np.uint64:
        return np.dtype(np.uint32)
    return dtype


def unsupported(space: Any, path: str, origin: str) -> UnsupportedSpaceError:
    """The error for a space the env API cannot carry, in one line.

    Args:
        space: The space refused (its ``str`` is in the message).
        path: Where it sits in an enclosing space (``"['a']"``, ``"[1]"``; ``""`` at the top).
        origin: Who asks (``"observation space"``, ...), the message's first words.

    Returns:
        The error (for the converter to raise), listing what is supported.
    """
    where = f" at {path}" if path else ""
    return UnsupportedSpaceError(
        f"{origin}: space {space}{where} is not supported; supported: {SUPPORTED}."
    )


def structs(space: PyTree, batch: tuple[int, ...]) -> PyTree:
    """``jax.ShapeDtypeStruct`` of each leaf with leading ``batch`` axes (for ``io_callback``)."""
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct((*batch, *s.shape), s.dtype), space)


def describe(space: PyTree) -> str:
    """A short text of a space tree, for messages: ``{'pos': Box((3,), float32), ...}``."""

    def leaf(s: Leaf) -> str:
        if isinstance(s, Box):
            return f"Box({s.shape}, {s.dtype})"
        if isinstance(s, Discrete):
            return f"Discrete({s.n})"
        if isinstance(s, MultiDiscrete):
            return f"MultiDiscrete({list(s.nvec)})"
        return f"MultiBinary({s.n})"

    return str(jax.tree.map(leaf, space))


@dataclasses.dataclass(frozen=True)
class DtypeOnly:
    """A leaf known only by its dtype (a host env's own action dtypes, for ``cast``)."""

    dtype: np.dtype


def _children(space: dict | tuple) -> list[Any]:
    # JAX's tree order: dict keys sorted, tuples in order.
    return sorted(space) if isinstance(space, dict) else list(range(len(space)))


def cast(space: PyTree, value: Any) -> PyTree:
    """``value`` (host arrays of the structure of ``space``) with each leaf as a NumPy array of
    its leaf's dtype; no copy where the dtype already matches. Dicts come back as plain dicts."""
    if isinstance(space, dict | tuple):
        out = {k: cast(space[k], value[k]) for k in _children(space)}
        return out if isinstance(space, dict) else tuple(out[i] for i in range(len(space)))
    return np.asarray(value, space.dtype)


def flatten(space: PyTree, value: Any) -> list[Any]:
    """The leaves of ``value`` (any mapping/sequence of the structure of ``space``), tree order."""
    if isinstance(space, dict | tuple):
        return [leaf for k in _children(space) for leaf in flatten(space[k], value[k])]
    return [value]


def cast_actions(space: PyTree, action: Any, num_envs: int, who: str) -> PyTree:
    """Traced actions as the env takes them: each leaf of dtype ``leaf.dtype``, checked to be
    ``(num_envs, *leaf.shape)``.

    Raises:
        ValueError: The action's structure or a leaf's shape does not match (one line).
    """
    import jax.numpy as jnp

    if jax.tree.structure(space) != jax.tree.structure(action):
        raise ValueError(
            f"{who}.step: action of structure {jax.tree.structure(action)} does not match the "
            f"action space {describe(space)}."
        )

    def leaf(spec: Leaf, a: Any) -> jax.Array:
        a = jnp.asarray(a, spec.dtype)
        expected = (num_envs, *spec.shape)
        if a.shape != expected:
            raise ValueError(f"{who}.step: action shape {a.shape}, expected {expected}.")
        return a

    return jax.tree.map(leaf, space, action)


def is_image(leaf: Leaf) -> bool:
    """Whether the networks take ``leaf`` as an image: a rank-3 Box (HWC or CHW)."""
    return isinstance(leaf, Box) and len(leaf.shape) == 3


def has_image(space: PyTree) -> bool:
    """Whether any leaf of ``space`` is an image (the network then has a CNN torso)."""
    return any(is_image(leaf) for leaf in leaves(space))


CODES_MAX_SIDE = 8
"""An integer image whose shorter side is under this reads as a grid of codes (``auto``):
MiniGrid's 7x7 view; an 8x8 frame of 0-255 values is taken for pixels."""


def is_code_grid(leaf: Leaf, encoding: str = "auto") -> bool:
    """Whether an image leaf is a grid of codes (object, colour or state ids, as MiniGrid's
    7x7x3) rather than pixels: the networks embed each cell's codes instead of scaling them.

    ``encoding`` (a config's ``image_encoding``) decides when ``"codes"`` or ``"pixels"``;
    ``"auto"`` reads an integer image whose values exceed 0/1 as codes when its declared
    ``high`` is below 255 (a small integer range) or its shorter side (HWC or CHW, as the
    networks read it) is under ``CODES_MAX_SIDE``; float and bool images, and 0/1
    integers, are values the CNN takes as they are.
    """
    if not is_image(leaf):
        return False
    if encoding != "auto":
        return encoding == "codes"
    if not np.issubdtype(leaf.dtype, np.integer):
        return False
    high = float(np.max(leaf.high))
    shape = leaf.shape
    sides = shape[1:] if shape[0] < shape[-1] else shape[:2]
    return high > 1 and (high < 255 or min(sides) < CODES_MAX_SIDE)


def has_cnn_image(space: PyTree, encoding: str = "auto") -> bool:
    """Whether any leaf of ``space`` is an image the networks take through a CNN (an image
    that is not a grid of codes: ``is_code_grid``)."""
    return any(is_image(leaf) and not is_code_grid(leaf, encoding) for leaf in leaves(space))


def is_float_vector(leaf: Leaf) -> bool:
    """Whether ``leaf`` is a float Box that is not an image: what running observation
    normalisation applies to (images are scaled in the network, integer leaves encoded)."""
    return isinstance(leaf, Box) and leaf.is_float and not is_image(leaf)

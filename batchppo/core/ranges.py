"""Range normalisation: the one rule every backend uses, as precomputed per-dim arrays.

Both the host wrapper
([`batchppo.envs.stack.wrappers.RangeNormalize`][batchppo.envs.RangeNormalize]) and the pure-JAX
adapters ([`batchppo.backends.gymnax_env.GymnaxEnv`][batchppo.backends.GymnaxEnv]) build a
``RangeMap`` here and apply its arrays, the wrapper with NumPy (``RangeMap.normalize``,
``RangeMap.denormalize``) and the adapters with ``jnp`` (``range_normalize_obs``,
``denormalize_action``), so a policy trained on one backend sees the same observations and sends the
same actions on another. The module imports only NumPy (host workers import it); the two ``jnp``
maps import JAX when called.

The rule:

* Only Boxes of a float dtype are mapped (``maps_dtype``). Integer and bool Boxes pass unchanged on
  every backend: in their own dtype their values cannot hold ``[-1, 1]``, and a JAX adapter, which
  could map them in float32, must give the policy what the host wrapper gives it.
* A dim is *normalised* when, in float32, both bounds are finite, ``high > low`` and the span ``high
  - low`` is at most ``2**127`` (``bounded_dims``). The test is made in float32, the precision the
  learner works in, so every backend agrees whatever the space's dtype. Wider spans mark
  "unbounded": CartPole's ``±float32.max``, whose span overflows, or ``[0, float32.max]``. Rescaling
  by them would erase the observation, and beyond ``2**127`` the reciprocal ``2 / span``, which XLA
  multiplies by in place of dividing, is a subnormal that CPUs flush to zero.
* Observations: ``2 * (x - low) / (high - low) - 1`` on normalised dims, unchanged elsewhere.
* Actions: clipped to the normalised action space (``[-1, 1]`` on normalised dims, the env's
  own bounds elsewhere), then ``low + (a + 1) / 2 * (high - low)`` on normalised dims.

The arrays make both maps one expression over all dims, with no per-dim select:
``(x - low) / half_span - one`` and ``low + (a + one) * half_span``, where ``half_span`` is
``(high - low) / 2`` and ``one`` is 1 on normalised dims, and ``low``, ``half_span``, ``one``
are 0, 1, 0 elsewhere, so other dims go through ``(x - 0) / 1 - 0``, which is ``x``. In NumPy
this is bitwise the formulas above: halving is exact, so ``(x - low) / (span / 2)`` is
``2 * (x - low) / span`` and ``(a + 1) * (span / 2)`` is ``(a + 1) / 2 * span``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import jax

__all__ = [
    "RangeMap",
    "bounded_dims",
    "denormalize_action",
    "maps_dtype",
    "normalized_bounds",
    "range_map",
    "range_normalize_obs",
]

# The widest span that is normalised: 2 / span is then still a normal float32.
_MAX_SPAN = np.float32(2.0**127)


def maps_dtype(dtype: npt.DTypeLike) -> bool:
    """Whether range normalisation maps a Box of ``dtype``: float dtypes only (NumPy's or
    JAX's); integer and bool Boxes pass unchanged (see the module docstring)."""
    return np.dtype(dtype).kind == "f"


def bounded_dims(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Mask of the dims that range normalisation rescales.

    A dim is bounded when, in float32, both bounds are finite, ``high > low`` and the span
    ``high - low`` is at most ``2**127`` (see the module docstring).

    Args:
        low: Lower bounds (any float or int dtype).
        high: Upper bounds (same shape).

    Returns:
        A bool array of the bounds' shape.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        low32 = np.asarray(low).astype(np.float32)
        high32 = np.asarray(high).astype(np.float32)
        span32 = high32 - low32
    return np.isfinite(low32) & np.isfinite(high32) & (high32 > low32) & (span32 <= _MAX_SPAN)


@dataclasses.dataclass(frozen=True, eq=False)
class RangeMap:
    """The per-dim affine maps of range normalisation for one Box (see the module docstring).

    Every array has the Box's shape and the dtype the map was built for.

    Attributes:
        mask: bool, the dims that are normalised.
        low: The lower bound on normalised dims, 0 elsewhere.
        half_span: ``(high - low) / 2`` on normalised dims, 1 elsewhere.
        one: 1 on normalised dims, 0 elsewhere.
        unit_low: Lower bounds after normalisation: -1 on normalised dims, ``low`` elsewhere.
        unit_high: Upper bounds after normalisation: 1 on normalised dims, ``high`` elsewhere.
    """

    mask: np.ndarray
    low: np.ndarray
    half_span: np.ndarray
    one: np.ndarray
    unit_low: np.ndarray
    unit_high: np.ndarray

    @property
    def any(self) -> bool:
        """Whether any dim is normalised (otherwise both maps are the identity)."""
        return bool(self.mask.any())

    def normalize(self, x: np.ndarray) -> np.ndarray:
        """``2 * (x - low) / (high - low) - 1`` on normalised dims; ``x`` elsewhere.

        Args:
            x: Values of shape ``(..., *mask.shape)``.

        Returns:
            The normalised values (NumPy's result dtype of ``x`` and the map's arrays).
        """
        return (x - self.low) / self.half_span - self.one

    def denormalize(self, a: np.ndarray, clip: bool = True) -> np.ndarray:
        """Clips ``a`` to ``[unit_low, unit_high]``, then ``low + (a + 1) / 2 * (high - low)``.

        Args:
            a: Agent actions of shape ``(..., *mask.shape)``.
            clip: Whether to clip to the normalised bounds first.

        Returns:
            Actions in the env's range on normalised dims; ``a`` (clipped) elsewhere.
        """
        if clip:
            a = np.minimum(np.maximum(a, self.unit_low), self.unit_high)
        return self.low + (a + self.one) * self.half_span


def range_map(low: np.ndarray, high: np.ndarray, dtype: npt.DTypeLike = None) -> RangeMap:
    """Builds the ``RangeMap`` of a Box with bounds ``low`` and ``high``.

    Args:
        low: Lower bounds.
        high: Upper bounds (same shape).
        dtype: dtype of the map's arrays (and of the span, computed as ``high - low`` in it);
            None: the dtype of ``low``. A host wrapper passes the space's dtype, the JAX
            adapters float32.

    Returns:
        The map; ``RangeMap.any`` is False when no dim is normalised.
    """
    low, high = np.asarray(low), np.asarray(high)
    dtype = low.dtype if dtype is None else np.dtype(dtype)
    mask = bounded_dims(low, high)
    # Unmapped dims get the range [0, 2] (low 0, half span 1): the maps are then exact
    # identities there and never compute with an infinite or overflowing bound.
    lo = np.where(mask, low, 0).astype(dtype)
    hi = np.where(mask, high, 2).astype(dtype)
    return RangeMap(
        mask=mask,
        low=lo,
        half_span=((hi - lo) / 2).astype(dtype),
        one=mask.astype(dtype),
        unit_low=np.where(mask, -1, low).astype(dtype),
        unit_high=np.where(mask, 1, high).astype(dtype),
    )


def normalized_bounds(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float32 bounds of a Box after range normalisation: ``[-1, 1]`` on normalised dims,
    the Box's own elsewhere (what the pure-JAX adapters' ``EnvSpec`` reports, and the host
    wrapper's spaces).

    Args:
        low: Lower bounds.
        high: Upper bounds (same shape).

    Returns:
        ``(unit_low, unit_high)`` of ``range_map`` in float32.
    """
    ranges = range_map(low, high, np.float32)
    return ranges.unit_low, ranges.unit_high


def range_normalize_obs(obs: jax.Array, low: np.ndarray, high: np.ndarray) -> jax.Array:
    """Maps the bounded dims of ``obs`` from ``[low, high]`` to ``[-1, 1]`` in JAX.

    Applies the float32 arrays of ``range_map``, the rule and maps the host wrapper
    ``RangeNormalize`` uses: ``2 * (obs - low) / (high - low) - 1`` on dims with a finite range;
    other dims pass unchanged. Not to be confused with ``PPO.normalize_obs`` (running statistics).

    Args:
        obs: Observations of shape ``(..., *low.shape)``.
        low: Lower bounds of one observation.
        high: Upper bounds of one observation.

    Returns:
        float32 observations of the same shape.
    """
    import jax.numpy as jnp

    ranges = range_map(low, high, np.float32)
    obs = jnp.asarray(obs, jnp.float32)
    if not ranges.any:
        return obs
    return (obs - ranges.low) / ranges.half_span - ranges.one


def denormalize_action(action: jax.Array, low: np.ndarray, high: np.ndarray) -> jax.Array:
    """Clips an agent's Box action to the normalised bounds and maps it to ``[low, high]`` in JAX.

    Applies the float32 arrays of ``range_map``, as the host wrapper ``RangeNormalize``
    does: actions are clipped to ``[-1, 1]`` on dims with a finite range and to the env's own
    bounds elsewhere, then mapped by ``low + (a + 1) / 2 * (high - low)`` on dims with a
    finite range.

    Args:
        action: Actions of shape ``(..., *low.shape)``.
        low: Lower action bounds.
        high: Upper action bounds.

    Returns:
        float32 actions in the env's range.
    """
    import jax.numpy as jnp

    ranges = range_map(low, high, np.float32)
    action = jnp.asarray(action, jnp.float32)
    if not ranges.any:
        return action
    action = jnp.clip(action, ranges.unit_low, ranges.unit_high)
    return ranges.low + (action + ranges.one) * ranges.half_span

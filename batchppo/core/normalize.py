"""Streaming mean/variance normalisation as a pytree (lives in the training state).

The numerics follow the original Batch PPO's ``StreamingNormalize``:

* statistics are merged batch by batch (exact parallel Welford: the sum of squared deviations
  ``var_sum`` gains the batch's own sum plus ``n_a * n_b / n * (mean_b - mean_a) ** 2``, which is
  algebraically what the original's ``sum((x - old_mean) * (x - new_mean))`` computes);
* ``std = sqrt(var_sum / (n - 1) + 1e-4)`` (the epsilon absorbs tiny negative variances);
* ``transform(x) = clip((x - mean) / (std + 1e-8), -clip, clip)``, centring and scaling each
  optional; no scaling before two samples were seen (``count <= 1``).

Everything is a pure function over ``NormState``, so it works inside ``jit``/``vmap`` and is
checkpointed with the rest of the training state. Statistics are only ever updated by training code;
evaluation and deployed policies only call ``normalize``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

_VAR_EPS = 1e-4
_STD_EPS = 1e-8


@struct.dataclass
class NormState:
    """Running statistics of a stream of arrays of shape ``mean.shape``.

    Attributes:
        mean: Running mean, float32.
        var_sum: Running sum of squared deviations from the mean, float32.
        count: Number of samples seen, float32 (exact up to 2**24, then relative error 6e-8,
            which is irrelevant for the merge weights).
    """

    mean: jax.Array
    var_sum: jax.Array
    count: jax.Array


def init(shape: tuple[int, ...] | int = ()) -> NormState:
    """Returns empty statistics for samples of ``shape``.

    Args:
        shape: Shape of one sample (the batch axes are excluded).

    Returns:
        A ``NormState`` with zero mean, zero ``var_sum`` and count 0.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return NormState(
        mean=jnp.zeros(shape, jnp.float32),
        var_sum=jnp.zeros(shape, jnp.float32),
        count=jnp.zeros((), jnp.float32),
    )


def update(state: NormState, batch: jax.Array, mask: jax.Array | None = None) -> NormState:
    """Merges a batch of samples into the statistics.

    Args:
        state: Current statistics.
        batch: Samples of shape ``(*batch_axes, *state.mean.shape)``; any number of leading axes.
        mask: Optional bool/float array of shape ``batch_axes``; samples where it is 0 are ignored.

    Returns:
        The updated statistics (exactly the statistics of all samples seen so far).
    """
    sample_ndim = state.mean.ndim
    if batch.ndim < sample_ndim or batch.shape[batch.ndim - sample_ndim :] != state.mean.shape:
        raise ValueError(
            f"normalize.update: batch of shape {batch.shape} does not end in the sample shape "
            f"{state.mean.shape}; pass (*batch_axes, *sample_shape)"
        )
    batch = batch.astype(jnp.float32).reshape((-1, *state.mean.shape))
    if mask is None:
        weights = jnp.ones((batch.shape[0],), jnp.float32)
    else:
        weights = jnp.reshape(mask, (-1,)).astype(jnp.float32)
    w = weights.reshape((-1,) + (1,) * sample_ndim)
    n_b = weights.sum()
    safe_n_b = jnp.maximum(n_b, 1.0)
    mean_b = (w * batch).sum(0) / safe_n_b
    var_sum_b = (w * (batch - mean_b) ** 2).sum(0)
    n = state.count + n_b
    safe_n = jnp.maximum(n, 1.0)
    delta = mean_b - state.mean
    mean = state.mean + delta * (n_b / safe_n)
    var_sum = state.var_sum + var_sum_b + delta**2 * (state.count * n_b / safe_n)
    return NormState(mean=mean, var_sum=var_sum, count=n)


def std(state: NormState) -> jax.Array:
    """The running standard deviation ``sqrt(var_sum / (n - 1) + 1e-4)`` (1 before two samples)."""
    variance = state.var_sum / jnp.maximum(state.count - 1.0, 1.0)
    return jnp.where(state.count > 1, jnp.sqrt(variance + _VAR_EPS), 1.0)


def normalize(
    state: NormState,
    x: jax.Array,
    *,
    center: bool = True,
    scale: bool = True,
    clip: float | None = None,
) -> jax.Array:
    """Normalises ``x`` (any leading axes) with the statistics, as the original's ``transform``.

    Args:
        state: Statistics to normalise with.
        x: Array of shape ``(*batch_axes, *state.mean.shape)``.
        center: Subtract the running mean.
        scale: Divide by ``std + 1e-8`` (only once more than one sample was seen).
        clip: Clip the result to ``[-clip, clip]``; None or 0 disables clipping.

    Returns:
        The normalised float32 array, same shape as ``x``.
    """
    x = x.astype(jnp.float32)
    if center:
        x = x - state.mean
    if scale:
        x = x / jnp.where(state.count > 1, std(state) + _STD_EPS, 1.0)
    if clip:
        x = jnp.clip(x, -clip, clip)
    return x

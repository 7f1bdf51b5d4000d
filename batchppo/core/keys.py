"""PRNG keys without eager JAX operations, and one key format for compiled programs."""

from __future__ import annotations

import functools
import math

import jax
import numpy as np


@functools.cache
def key_data_aval() -> jax.ShapeDtypeStruct:
    """Shape and dtype of the raw key data of JAX's default PRNG implementation."""
    return jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))


def host_key(*words: int) -> np.ndarray:
    """A PRNG key (raw key data of JAX's default implementation) derived from ``words``.

    Computed with NumPy's ``SeedSequence``, so it runs no JAX operation: each eager JAX op
    (``jax.random.split``, ``fold_in``...) costs an XLA compilation on its first call in a
    process, on the critical path of a run's start. Distinct ``words`` (say ``(seed,
    purpose, step)``) give independent keys.

    Args:
        *words: Non-negative integers.

    Returns:
        A ``uint32`` array, usable wherever the Trainer takes a key.

    Raises:
        ValueError: for a negative word.
    """
    if any(int(w) < 0 for w in words):
        raise ValueError(f"host_key: words must be non-negative integers, got {words}")
    aval = key_data_aval()
    # The length goes first: SeedSequence alone gives (1,) and (1, 0) the same state.
    entropy = [len(words), *(int(w) for w in words)]
    state = np.random.SeedSequence(entropy).generate_state(math.prod(aval.shape))
    return state.astype(aval.dtype).reshape(aval.shape)


def raw_key(key: jax.Array) -> jax.Array:
    """Keys cross the compiled programs as raw ``uint32`` data (one signature for both kinds)."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key

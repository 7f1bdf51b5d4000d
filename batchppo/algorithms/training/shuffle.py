"""Random permutations of minibatch indices (``index_permutation``, ``permutation``).

PPO shuffles its batch every epoch. ``jax.random.permutation`` draws the permutation by
sorting random keys, and sorting is slow where XLA has no fast sort kernel (its CPU backend
sorts with a comparator, two rounds of it per permutation). ``index_permutation`` instead
maps every index through a keyed bijection of the indices: a Feistel network over
``ceil(log2(n))`` bits whose round function is an integer hash of the round key and one half
of the bits, and, where ``n`` is not a power of two, cycle walking (an index mapped at or past
``n`` is mapped again until it lands below ``n``, which keeps the map a bijection of
``[0, n)``), between two random rotations of ``[0, n)`` that make each index's place exactly
uniform however coarse the network is on a few bits. The work is elementwise, a few dozen
integer operations an index. This is the construction of random-access shuffles such as
TensorFlow's ``tf.random.experimental.index_shuffle``: a pseudorandom permutation rather than
an exactly uniform draw from all ``n!`` (nor is the sort of 32-bit keys, whose ties keep their
order); ``tests/algorithms/training/test_shuffle.py`` holds the statistical tests it passes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from batchppo.algorithms.run_config import SHUFFLES

ROUNDS = 8
"""Feistel rounds of ``index_permutation`` (four make a strong pseudorandom permutation from
pseudorandom round functions, Luby and Rackoff 1988; the rest is margin for a plain hash)."""


def _hash(x: jax.Array) -> jax.Array:
    """A 32-bit integer hash with full avalanche (Wellons' ``lowbias32``)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _feistel(x: jax.Array, round_keys: jax.Array, bits: int) -> jax.Array:
    """A keyed bijection of ``[0, 2**bits)`` applied to the uint32 array ``x``.

    The bits are split into a high and a low part; each round replaces them by (low, high XOR
    hash(low, key)), the parts' widths trading places when ``bits`` is odd. Each round is
    invertible (the new high part is the old low part), so the whole map is a bijection.
    """
    hi_bits, lo_bits = bits - bits // 2, bits // 2
    hi, lo = x >> lo_bits, x & jnp.uint32((1 << lo_bits) - 1)
    for r in range(round_keys.shape[0]):
        mixed = _hash(lo ^ round_keys[r]) & jnp.uint32((1 << hi_bits) - 1)
        hi, lo = lo, hi ^ mixed
        hi_bits, lo_bits = lo_bits, hi_bits
    return (hi << lo_bits) | lo


def index_permutation(key: jax.Array, n: int) -> jax.Array:
    """A pseudorandom permutation of ``[0, n)`` drawn from ``key``, without sorting.

    Args:
        key: PRNG key; the same key gives the same permutation.
        n: Number of indices (a Python int >= 1).

    Returns:
        int32 ``(n,)``, every index of ``[0, n)`` once.

    Raises:
        ValueError: if ``n`` is not a positive int or needs more than 31 bits.
    """
    if not isinstance(n, int) or n < 1 or n > 2**31:
        raise ValueError(f"n must be an int in [1, 2**31], got {n!r}")
    bits = max((n - 1).bit_length(), 1)
    round_keys = jax.random.bits(key, (ROUNDS + 2,), jnp.uint32)
    # Random rotations before and after the bijection (the module docstring).
    shift_in, shift_out = (round_keys[ROUNDS:] % jnp.uint32(n)).astype(jnp.uint32)
    round_keys = round_keys[:ROUNDS]

    def walk(x: jax.Array) -> jax.Array:
        return _feistel(x, round_keys, bits)

    # Cycle walking: the map restricted to [0, n) by mapping escapees again. The loop also
    # runs (no trip) where n is a power of two: its output is a buffer of its own, which
    # XLA cannot fuse into every gather that reads the permutation.
    y = lax.while_loop(
        lambda y: jnp.any(y >= n),
        lambda y: jnp.where(y >= n, walk(y), y),
        walk((jnp.arange(n, dtype=jnp.uint32) + shift_in) % jnp.uint32(n)),
    )
    return ((y + shift_out) % jnp.uint32(n)).astype(jnp.int32)


def permutation(key: jax.Array, n: int, method: str = "index") -> jax.Array:
    """A permutation of ``[0, n)`` drawn from ``key`` by ``method``, ``(n,)`` int32.

    Args:
        key: PRNG key.
        n: Number of indices.
        method: ``index`` (``index_permutation``) or ``sort`` (``jax.random.permutation``,
            the permutations of batchppo before ``minibatch_shuffle`` existed).

    Raises:
        ValueError: for an unknown ``method``.
    """
    if method == "index":
        return index_permutation(key, n)
    if method == "sort":
        return jax.random.permutation(key, n)
    raise ValueError(f"method must be one of {SHUFFLES}, got {method!r}")

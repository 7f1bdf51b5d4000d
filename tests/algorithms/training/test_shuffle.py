"""The minibatch permutations: ``index_permutation`` is a permutation, fixed by its key,
and its positions pass uniformity tests; ``sort`` is ``jax.random.permutation`` itself."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from batchppo.algorithms.training import shuffle


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 100, 512, 1000, 4097])
def test_index_permutation_is_a_permutation_of_every_size(n):
    # Compiled whole, as the training programs trace it (one program a size, where eager
    # operations would compile each of its operations a size); eager equals jit (below).
    permutation = jax.jit(shuffle.index_permutation, static_argnums=1)
    for seed in range(3):
        perm = np.asarray(permutation(jax.random.key(seed), n))
        assert perm.dtype == np.int32 and perm.shape == (n,)
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))


def test_index_permutation_is_fixed_by_its_key_and_differs_between_keys():
    a, b, c = (np.asarray(shuffle.index_permutation(jax.random.key(s), 4096)) for s in (7, 7, 8))
    np.testing.assert_array_equal(a, b)
    # Two keys' permutations agree about as often as chance (1/n of the places), not more.
    assert (a == c).sum() < 8
    # Not the identity, nor a shift of it.
    assert (a == np.arange(4096)).sum() < 8
    assert len(set(np.diff(a).tolist())) > 1000


def test_index_permutation_under_jit_and_vmap_is_the_same():
    keys = jax.random.split(jax.random.key(0), 4)
    eager = np.stack([np.asarray(shuffle.index_permutation(k, 300)) for k in keys])
    batched = jax.jit(jax.vmap(lambda k: shuffle.index_permutation(k, 300)))(keys)
    np.testing.assert_array_equal(eager, np.asarray(batched))


@pytest.mark.parametrize("n", [4, 5])
def test_every_permutation_of_a_small_set_is_about_equally_likely(n):
    """A chi-square test over all n! permutations (n = 5 goes through cycle walking), with
    fixed keys, so its outcome is the same every run."""
    draws = 200 * math.factorial(n)
    keys = jax.random.split(jax.random.key(11), draws)
    perms = np.asarray(jax.jit(jax.vmap(lambda k: shuffle.index_permutation(k, n)))(keys))
    index = {p: i for i, p in enumerate(itertools.permutations(range(n)))}
    counts = np.bincount([index[tuple(p)] for p in perms.tolist()], minlength=len(index))
    assert counts.min() > 0
    assert stats.chisquare(counts).pvalue > 1e-3


def test_positions_of_a_batch_are_uniform_and_neighbours_part():
    """At a minibatch's size: where index 0 lands is uniform over the batch, and indices
    next to each other land in different minibatches as often as chance says."""
    n, draws = 64, 6400
    keys = jax.random.split(jax.random.key(5), draws)
    perms = np.asarray(jax.jit(jax.vmap(lambda k: shuffle.index_permutation(k, n)))(keys))
    where = np.argsort(perms, axis=1)  # where[d, i]: the place of index i
    assert stats.chisquare(np.bincount(where[:, 0], minlength=n)).pvalue > 1e-3
    # Four minibatches of 16: indices i and i + 1 share one with probability 15/63.
    same = (where[:, :-1] // 16 == where[:, 1:] // 16).mean()
    assert abs(same - 15 / 63) < 0.01


def test_sort_is_jax_random_permutation_and_unknown_methods_are_refused():
    key = jax.random.key(3)
    np.testing.assert_array_equal(
        shuffle.permutation(key, 777, "sort"), jax.random.permutation(key, 777)
    )
    np.testing.assert_array_equal(
        shuffle.permutation(key, 777, "index"), shuffle.index_permutation(key, 777)
    )
    with pytest.raises(ValueError, match="method must be one of"):
        shuffle.permutation(key, 10, "riffle")
    with pytest.raises(ValueError, match="n must be an int"):
        shuffle.index_permutation(key, 0)
    _ = jnp.zeros(())

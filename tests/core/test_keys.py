"""Host-made PRNG keys and the raw key format of the compiled programs."""

import jax
import numpy as np
import pytest

from batchppo.core.keys import host_key, key_data_aval, raw_key


def test_host_key_is_raw_key_data_of_the_default_implementation():
    key = host_key(3, 1, 4096)
    aval = key_data_aval()
    assert key.shape == aval.shape == (2,) and key.dtype == aval.dtype == np.uint32
    np.testing.assert_array_equal(key, host_key(3, 1, 4096))  # deterministic
    # It is a valid key: JAX draws from it, identically to the same key data wrapped.
    draws = jax.random.normal(key, (3,))
    np.testing.assert_array_equal(draws, jax.random.normal(jax.random.wrap_key_data(key), (3,)))


def test_distinct_words_give_distinct_keys():
    keys = {tuple(host_key(seed, purpose, step)) for seed in range(3) for purpose in range(3)
            for step in (0, 4096)}  # fmt: skip
    assert len(keys) == 18
    # Word order matters (a sequence, not a set), and (1,) differs from (1, 0).
    assert tuple(host_key(1, 2)) != tuple(host_key(2, 1))
    assert tuple(host_key(1)) != tuple(host_key(1, 0))


def test_host_key_rejects_negative_words():
    with pytest.raises(ValueError, match="non-negative"):
        host_key(0, -1)


def test_raw_key_unwraps_typed_keys_and_passes_raw_ones():
    typed = jax.random.key(7)
    np.testing.assert_array_equal(raw_key(typed), jax.random.key_data(typed))
    raw = host_key(7)
    assert raw_key(raw) is raw

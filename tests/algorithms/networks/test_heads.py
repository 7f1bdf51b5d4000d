"""Action heads: exact output shapes and dtypes, and log-probs, entropies and modes of every
head's distribution against a direct computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cold_programs import cold_jit, init_and_apply

from batchppo.algorithms.networks.heads import (
    PAD_LOGIT,
    BernoulliHead,
    CategoricalHead,
    GaussianHead,
    MultiCategoricalHead,
    action_head,
    bernoulli_distribution,
    multi_categorical_distribution,
)
from batchppo.core import spaces


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    return x - np.log(np.exp(x - x.max()).sum()) - x.max()


@pytest.mark.parametrize(
    ("module", "shapes"),
    [
        (GaussianHead(3, 0.5, 0.1), {"mean": (4, 3), "std": (4, 3)}),
        (CategoricalHead(5, 0.1), {"logits": (4, 5)}),
        (MultiCategoricalHead((2, 4, 3), 0.1), {"logits": (4, 3, 4)}),
        (BernoulliHead(6, 0.1), {"logits": (4, 6)}),
    ],
)
def test_head_output_shapes_and_dtypes(module, shapes):
    x = jax.ShapeDtypeStruct((4, 7), jnp.float32)
    out = jax.eval_shape(lambda x: module.apply(module.init(jax.random.key(0), x), x), x)
    assert {k: v.shape for k, v in out.items()} == shapes
    assert all(v.dtype == jnp.float32 for v in out.values())


def test_multi_categorical_pads_smaller_entries_with_zero_probability():
    head = MultiCategoricalHead((2, 3), 1.0)
    x = jnp.ones((1, 4))
    logits = init_and_apply(head, jax.random.key(1), x)[1]["logits"]
    assert logits.shape == (1, 2, 3) and float(logits[0, 0, 2]) == PAD_LOGIT
    assert float(logits[0, 1, 2]) != PAD_LOGIT


def test_multi_categorical_log_prob_entropy_and_mode():
    rows = [[0.3, -1.0, PAD_LOGIT], [1.0, 0.0, 2.0]]
    dist = multi_categorical_distribution({"logits": jnp.asarray([rows], jnp.float32)})
    action = jnp.array([[1, 2]], jnp.int32)
    p0, p1 = np.exp(_log_softmax(rows[0][:2])), np.exp(_log_softmax(rows[1]))
    want_logp = np.log(p0[1]) + np.log(p1[2])
    want_ent = -(p0 * np.log(p0)).sum() - (p1 * np.log(p1)).sum()
    assert float(dist.log_prob(action)[0]) == pytest.approx(want_logp, rel=1e-6)
    assert float(dist.entropy()[0]) == pytest.approx(want_ent, rel=1e-6)
    head = action_head(spaces.MultiDiscrete((2, 3)), 1.0, 0.1)
    mode = head.mode({"logits": jnp.asarray([rows], jnp.float32)})
    assert mode.dtype == jnp.int32 and mode.tolist() == [[0, 2]]
    sample = dist.sample(seed=jax.random.key(0), sample_shape=(2000,))
    assert int(sample[..., 0].max()) == 1  # the padded third choice is never drawn


def test_bernoulli_log_prob_entropy_and_mode():
    logits = np.array([0.5, -2.0, 0.0])
    dist = bernoulli_distribution({"logits": jnp.asarray(logits, jnp.float32)})
    bits = np.array([1, 0, 1])
    p = 1.0 / (1.0 + np.exp(-logits))
    want_logp = np.sum(bits * np.log(p) + (1 - bits) * np.log(1 - p))
    want_ent = -np.sum(p * np.log(p) + (1 - p) * np.log(1 - p))
    assert float(dist.log_prob(jnp.asarray(bits, jnp.int32))) == pytest.approx(want_logp, rel=1e-6)
    assert float(dist.entropy()) == pytest.approx(want_ent, rel=1e-6)
    mode = action_head(spaces.MultiBinary(3), 1.0, 0.1).mode({"logits": jnp.asarray(logits)})
    assert mode.dtype == jnp.int32 and mode.tolist() == [1, 0, 0]


def test_dict_action_is_the_product_of_its_leaves():
    space = {
        "move": spaces.box((2,), np.float32, -1.0, 1.0),
        "fire": spaces.Discrete(3),
        "keys": spaces.MultiBinary(2),
    }
    head = action_head(space, 0.5, 0.1)
    x = jnp.ones((4, 6), jnp.float32)
    dist_params = head.to_tree(init_and_apply(head.module, jax.random.key(0), x)[1])
    assert sorted(dist_params) == ["fire", "keys", "move"]
    assert dist_params["move"]["mean"].shape == (4, 2)
    assert dist_params["fire"]["logits"].shape == (4, 3)
    assert dist_params["keys"]["logits"].shape == (4, 2)

    @cold_jit
    def draw(dist_params, key):
        dist = head.distribution(dist_params)
        action, log_prob = dist.sample_and_log_prob(seed=key)
        return action, log_prob, dist.entropy(), dist.kl_divergence(dist), head.mode(dist_params)

    action, log_prob, entropy, kl, mode = draw(dist_params, jax.random.key(1))
    assert action["move"].shape == (4, 2) and action["move"].dtype == jnp.float32
    assert action["fire"].shape == (4,) and action["fire"].dtype == jnp.int32
    assert action["keys"].shape == (4, 2) and action["keys"].dtype == jnp.int32
    mean, std = np.asarray(dist_params["move"]["mean"]), np.asarray(dist_params["move"]["std"])
    a = np.asarray(action["move"], np.float64)
    logp_move = np.sum(-0.5 * ((a - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi), -1)
    fire = np.asarray(dist_params["fire"]["logits"])
    logp_fire = [_log_softmax(fire[i])[int(action["fire"][i])] for i in range(4)]
    keys = 1.0 / (1.0 + np.exp(-np.asarray(dist_params["keys"]["logits"], np.float64)))
    k = np.asarray(action["keys"])
    logp_keys = np.sum(k * np.log(keys) + (1 - k) * np.log(1 - keys), -1)
    np.testing.assert_allclose(log_prob, logp_move + logp_fire + logp_keys, rtol=1e-5)
    ent_move = np.sum(0.5 * np.log(2 * np.pi * np.e * std**2), -1)
    p_fire = np.exp(np.stack([_log_softmax(row) for row in fire]))
    ent_fire = -(p_fire * np.log(p_fire)).sum(-1)
    ent_keys = -np.sum(keys * np.log(keys) + (1 - keys) * np.log(1 - keys), -1)
    np.testing.assert_allclose(entropy, ent_move + ent_fire + ent_keys, rtol=1e-5)
    np.testing.assert_allclose(kl, np.zeros(4), atol=1e-6)
    np.testing.assert_array_equal(mode["move"], mean)
    np.testing.assert_array_equal(mode["fire"], fire.argmax(-1))


def test_box_action_of_rank_two_is_refused_in_one_line():
    with pytest.raises(spaces.UnsupportedSpaceError) as info:
        action_head({"arm": spaces.box((2, 3), np.float32)}, 0.5, 0.1)
    assert str(info.value) == (
        "Box action of shape (2, 3) at ['arm'] is not supported: the Gaussian head takes 1-D "
        "Box actions; reshape the action space to 1-D in a wrapper."
    )

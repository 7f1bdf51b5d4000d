"""The levers against stalled or collapsing PPO runs (issue 70): Adam's betas and an L2
penalty, the representation diagnostics, and more envs per update at a fixed minibatch."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from cold_programs import cold_jit, normal
from program_values import assert_same_values

from batchppo.algorithms.networks.networks import (
    effective_rank,
    make_network,
    simplicial_embedding,
)
from batchppo.algorithms.ppo import PPOConfig, make_train
from batchppo.algorithms.ppo.ppo import PPO, check_layout
from batchppo.algorithms.training.trainer import make_run_env
from batchppo.experiment.config.configs import apply_overrides, get_preset

TINY = PPOConfig(
    env="Pendulum-v1",
    backend="gymnax",
    objective="clip",
    num_agents=4,
    rollout_length=8,
    update_epochs=2,
    num_minibatches=2,
    policy_layers=(8,),
    value_layers=(8,),
    steps=96,
    max_length=200,
)

# A tiny problem for the optimisers: params and three steps' gradients.
PARAMS = {"w": jnp.array([[0.5, -1.0], [2.0, 0.25]]), "b": jnp.array([0.1, -0.3])}
GRADS = [jax.tree.map(lambda x, i=i: jnp.sin(x * (i + 1)) + 0.1 * i, PARAMS) for i in range(3)]


def _ppo(**changes):
    config = dataclasses.replace(TINY, **changes)
    return PPO(config, make_run_env(config, config.num_agents))


def _steps(optimizer, grads_of=lambda params, grads: grads):
    """The updates of three steps of ``optimizer`` from ``PARAMS``, and its final state."""
    params, state, updates = PARAMS, optimizer.init(PARAMS), []
    for grads in GRADS:
        update, state = optimizer.update(grads_of(params, grads), state, params)
        params = optax.apply_updates(params, update)
        updates.append(update)
    return updates, state


def _lr(learning_rate):
    return lambda count: optax.constant_schedule(learning_rate)(count) * 1.0


def test_default_optimizer_is_adam_of_before_bit_for_bit():
    ppo = _ppo()
    before = optax.adam(_lr(TINY.learning_rate), b1=0.9, b2=0.999, eps=1e-5)
    ours, ours_state = _steps(ppo.make_optimizer(1.0))
    theirs, their_state = _steps(optax.chain(before))
    jax.tree.map(np.testing.assert_array_equal, ours, theirs)
    # The same state, structure included, so that stored runs resume.
    assert jax.tree.structure(ours_state) == jax.tree.structure(their_state)
    jax.tree.map(np.testing.assert_array_equal, ours_state, their_state)


def test_betas_weight_decay_and_clipping_are_the_hand_built_chain():
    ppo = _ppo(adam_b1=0.99, adam_b2=0.99, weight_decay=1e-2, max_grad_norm=0.5)
    chain = optax.chain(
        optax.add_decayed_weights(1e-2),
        optax.clip_by_global_norm(0.5),
        optax.adam(_lr(TINY.learning_rate), b1=0.99, b2=0.99, eps=1e-5),
    )
    ours, _ = _steps(ppo.make_optimizer(1.0))
    theirs, _ = _steps(chain)
    jax.tree.map(np.testing.assert_array_equal, ours, theirs)


def test_weight_decay_is_an_l2_penalty_in_the_loss_not_adamw():
    """``weight_decay=c`` is Adam on the gradient of ``loss + c / 2 * ||params||^2``."""
    c = 0.3
    ppo = _ppo(weight_decay=c)
    adam = optax.adam(_lr(TINY.learning_rate), b1=0.9, b2=0.999, eps=1e-5)
    penalty = jax.grad(lambda p: c / 2 * optax.tree_utils.tree_sum(jax.tree.map(jnp.square, p)))

    def with_penalty(params, grads):
        return jax.tree.map(jnp.add, grads, penalty(params))

    ours, _ = _steps(ppo.make_optimizer(1.0))
    theirs, _ = _steps(adam, with_penalty)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9), ours, theirs)
    adamw, _ = _steps(optax.adamw(_lr(TINY.learning_rate), 0.9, 0.999, 1e-5, weight_decay=c))
    assert not np.allclose(ours[-1]["w"], adamw[-1]["w"], rtol=1e-3)


def test_the_optimiser_fields_reach_training_and_bad_values_are_refused():
    def trained_params(changes):
        return cold_jit(make_train(dataclasses.replace(TINY, **dict(changes))))(jax.random.key(0))[
            0
        ].params

    train = {
        changes: trained_params(changes)
        for changes in ((), (("adam_b1", 0.99), ("adam_b2", 0.99)), (("weight_decay", 0.1),))
    }
    default = jax.tree.leaves(train[()])
    for changes, params in train.items():
        if changes:
            assert not all(
                np.array_equal(a, b) for a, b in zip(default, jax.tree.leaves(params), strict=True)
            ), changes
    with pytest.raises(ValueError, match=r"adam_b1=1.0, adam_b2=0.999: both must be in \[0, 1\)"):
        dataclasses.replace(TINY, adam_b1=1.0)
    with pytest.raises(ValueError, match=r"weight_decay=-0\.1: must be >= 0"):
        dataclasses.replace(TINY, weight_decay=-0.1)


def _with_singular_values(values, rows=12, cols=6):
    """A ``rows x cols`` matrix whose singular values are ``values`` (then zeros)."""
    k1, k2 = jax.random.split(jax.random.key(0))
    u, _ = jnp.linalg.qr(normal(k1, (rows, rows)))
    v, _ = jnp.linalg.qr(normal(k2, (cols, cols)))
    s = (
        jnp.zeros((rows, cols))
        .at[jnp.arange(len(values)), jnp.arange(len(values))]
        .set(jnp.asarray(values, jnp.float32))
    )
    return u @ s @ v.T


@pytest.mark.parametrize(
    ("values", "rank"),
    [
        ((1.0,), 1),
        ((3.0, 2.0, 1.0), 3),  # all three needed: 5 / 6 < 0.99
        ((1.0, 1.0, 1.0, 1.0, 1.0, 1.0), 6),
        ((100.0, 1.0), 1),  # 100 / 101 > 0.99: the small one is left out
        ((98.5, 1.0, 0.5), 2),  # 98.5 / 100 falls short of 0.99, 99.5 / 100 reaches it
        ((), 0),
    ],
)
def test_effective_rank_of_matrices_of_known_singular_values(values, rank):
    features = _with_singular_values(values)
    result = effective_rank(features)
    assert result.dtype == jnp.int32 and int(result) == rank


def _network(**changes):
    config = dataclasses.replace(TINY, **changes)
    return make_network(config, make_run_env(config, 1).spec)


def test_representation_sows_each_layers_preactivations_in_order_and_the_features():
    layers = tuple(range(3, 15))  # 12 layers of distinct widths: the order is the layers'
    network = _network(policy_layers=layers, value_layers=(5, 4), activation="tanh")
    params = cold_jit(network.init)(jax.random.key(0))
    obs = normal(jax.random.key(1), (2, 5, 3))  # (N, L) batches of Pendulum obs
    found = network.representation(params, obs)
    policy = [f"policy_preact_{i}" for i in range(12)]
    assert list(found) == ["policy_features", *policy, "value_features", "value_preact_0",
                           "value_preact_1"]  # fmt: skip
    assert [found[k].shape for k in policy] == [(10, width) for width in layers]
    assert found["policy_features"].shape == (10, 14)
    # The first pre-activations are the first dense layer's output on the observations, the
    # features the activation of the last.
    dense = params["value"]["MLP_0"]["Dense_0"]
    x = obs.reshape((10, 3))
    np.testing.assert_allclose(
        found["value_preact_0"], x @ dense["kernel"] + dense["bias"], rtol=1e-6
    )
    np.testing.assert_array_equal(found["value_features"], jnp.tanh(found["value_preact_1"]))


@pytest.mark.parametrize(
    ("mlp", "preact_width"), [("layernorm", 8), ("simba", 32), ("plain", 8), ("sem", 8)]
)
def test_representation_of_each_vector_torso(mlp, preact_width):
    network = _network(mlp=mlp, policy_layers=(8, 8), value_layers=(8, 8, 8))
    params = cold_jit(network.init)(jax.random.key(0))
    found = cold_jit(network.representation)(params, jnp.ones((7, 3)))  # keys sorted by jit
    assert sorted(found) == [
        "policy_features", "policy_preact_0", "policy_preact_1", "value_features",
        "value_preact_0", "value_preact_1", "value_preact_2",
    ]  # fmt: skip
    assert found["value_preact_2"].shape == (7, preact_width)  # simba: the 4x inner layer
    assert found["policy_features"].shape == (7, 8)
    if mlp == "sem":  # the last is the projection; LayerNorm (at init: scale 1, bias 0) and
        # the softmax per simplex turn it into the features
        z = found["value_preact_2"]
        normed = (z - z.mean(-1, keepdims=True)) / jnp.sqrt(z.var(-1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(
            found["value_features"], simplicial_embedding(normed), rtol=1e-5, atol=1e-6
        )


def test_representation_diagnostics_log_only_when_on_and_train_the_same():
    """With the diagnostics the update is the same (steps and counts to the bit, floats to
    float32 rounding: ``assert_same_values``, as the two programs differ in structure); the
    feature ranks and pre-activation norms join the metrics."""
    # Without the diagnostics it is test_the_optimiser_fields_reach_training's default program.
    runs = {
        on: cold_jit(make_train(dataclasses.replace(TINY, representation_diagnostics=on)))(
            jax.random.key(3)
        )
        for on in (False, True)
    }
    (ts_off, m_off), (ts_on, m_on) = runs[False], runs[True]
    assert_same_values(ts_on.params, ts_off.params)
    added = {"policy_feature_rank", "value_feature_rank", "policy_preact_norm_0",
             "value_preact_norm_0"}  # fmt: skip
    assert set(m_on) - set(m_off) == added and set(m_off) <= set(m_on)
    for key in m_off:
        assert_same_values(m_on[key], m_off[key], err_msg=key)
    ranks = np.asarray(m_on["policy_feature_rank"])
    assert ranks.shape == (3,) and np.all(ranks == np.round(ranks))
    assert np.all((ranks >= 1) & (ranks <= 8))
    assert np.all(np.asarray(m_on["value_preact_norm_0"]) > 0)


def test_representation_diagnostics_off_compile_no_svd_and_on_do():
    def jaxpr(on):
        ppo = _ppo(representation_diagnostics=on)
        ts = jax.eval_shape(ppo.init, jax.random.key(0))  # the shapes are all it traces on
        ss = jax.eval_shape(ppo.init_sim, jax.random.key(1))
        return str(jax.make_jaxpr(ppo.iteration)(ts, ss))

    assert "svd" not in jaxpr(False)
    assert "svd" in jaxpr(True)


def test_representation_diagnostics_need_a_feed_forward_network_with_a_representation():
    with pytest.raises(ValueError, match="representation_diagnostics=True with network="):
        dataclasses.replace(TINY, network="recurrent", representation_diagnostics=True)
    config = dataclasses.replace(TINY, representation_diagnostics=True)

    def without(config, spec):
        return make_network(config, spec)._replace(representation=None)

    with pytest.raises(ValueError, match=r"without Network\.representation"):
        PPO(config, make_run_env(config, 4), network_factory=without)


def test_more_envs_per_update_at_the_same_minibatch_size():
    """docs/algorithms.md's two ``--set`` lines keep humanoid_fast's 64-sample minibatches."""
    preset = get_preset("humanoid_fast")
    wider = apply_overrides(preset, ["num_agents=64", "num_minibatches=128"])
    sizes = []
    for config in (preset, wider):
        _, _, sequences = check_layout(config, recurrent=False)
        sizes.append(sequences // config.num_minibatches)
    assert sizes == [64, 64]
    assert (wider.learning_rate, wider.rollout_length) == (preset.learning_rate, 128)
    assert (wider.num_agents, wider.num_minibatches) == (64, 128)

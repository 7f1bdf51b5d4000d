"""Networks and distributions: closed-form log-prob/KL/entropy, init, recurrent resets, and
any config with the network fields."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.common.networks import (
    NetworkConfig,
    categorical_distribution,
    gaussian_distribution,
    make_network,
)
from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.core import spaces
from batchppo.core.env import EnvSpec


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """The network fields alone (PPOConfig's defaults): no algorithm's config."""

    network: str = "feed_forward_gaussian"
    policy_layers: tuple[int, ...] = (200, 100)
    value_layers: tuple[int, ...] = (200, 100)
    activation: str = "relu"
    init_std: float = 0.35
    init_mean_factor: float = 0.1


CONT = EnvSpec((3,), jnp.float32, (2,), jnp.float32, False)
DISC = EnvSpec((4,), jnp.float32, (), jnp.int32, True, num_actions=3)


def test_gaussian_closed_forms():
    m1, s1 = np.array([0.1, -0.5]), np.array([0.3, 2.0])
    m2, s2 = np.array([0.4, 0.0]), np.array([0.5, 1.0])
    a = np.array([0.2, 1.0])
    d1 = gaussian_distribution({"mean": jnp.asarray(m1), "std": jnp.asarray(s1)})
    d2 = gaussian_distribution({"mean": jnp.asarray(m2), "std": jnp.asarray(s2)})
    logp = np.sum(-0.5 * ((a - m1) / s1) ** 2 - np.log(s1) - 0.5 * np.log(2 * np.pi))
    ent = np.sum(0.5 * np.log(2 * np.pi * np.e * s1**2))
    kl = np.sum(np.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5)
    assert float(d1.log_prob(jnp.asarray(a))) == pytest.approx(logp, rel=1e-5)
    assert float(d1.entropy()) == pytest.approx(ent, rel=1e-5)
    assert float(d1.kl_divergence(d2)) == pytest.approx(kl, rel=1e-5)


def test_categorical_closed_forms():
    l1, l2 = np.array([0.0, 1.0, -1.0]), np.array([2.0, 0.0, 0.0])
    p1, p2 = np.exp(l1) / np.exp(l1).sum(), np.exp(l2) / np.exp(l2).sum()
    d1 = categorical_distribution({"logits": jnp.asarray(l1)})
    d2 = categorical_distribution({"logits": jnp.asarray(l2)})
    assert float(d1.log_prob(1)) == pytest.approx(np.log(p1[1]), rel=1e-5)
    assert float(d1.entropy()) == pytest.approx(-(p1 * np.log(p1)).sum(), rel=1e-5)
    assert float(d1.kl_divergence(d2)) == pytest.approx((p1 * np.log(p1 / p2)).sum(), rel=1e-5)


def test_gaussian_network_init_and_shapes():
    config = NetConfig(init_std=0.35, policy_layers=(8, 8), value_layers=(8,))
    net = make_network(config, CONT)
    params = net.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (5, 3))
    dist, carry = net.policy_step(params, (), obs, jnp.zeros(5, bool))
    assert dist["mean"].shape == (5, 2) and carry == ()
    np.testing.assert_allclose(dist["std"], 0.35, rtol=1e-5)
    assert np.all(np.abs(dist["mean"]) < 1.0)
    assert net.value(params, jnp.zeros((4, 6, 3))).shape == (4, 6)
    seq = net.policy_sequence(params, (), obs.reshape(1, 5, 3), jnp.zeros((1, 5), bool))
    np.testing.assert_allclose(seq["mean"][0], dist["mean"], rtol=1e-6)


def test_categorical_network_and_mismatch_errors():
    net = make_network(NetConfig(network="feed_forward_categorical"), DISC)
    params = net.init(jax.random.key(0))
    dist, _ = net.policy_step(params, (), jnp.ones((2, 4)), jnp.zeros(2, bool))
    assert dist["logits"].shape == (2, 3)
    assert net.mode(dist).dtype == jnp.int32
    with pytest.raises(ValueError, match="discrete"):
        make_network(NetConfig(network="feed_forward_categorical"), CONT)
    with pytest.raises(ValueError, match="continuous"):
        make_network(NetConfig(), DISC)


def test_recurrent_state_resets_at_episode_starts():
    config = NetConfig(network="recurrent_gaussian", policy_layers=(8, 6))
    net = make_network(config, CONT)
    params = net.init(jax.random.key(0))
    assert net.recurrent
    obs = jax.random.normal(jax.random.key(1), (1, 6, 3))
    # An episode starts at t = 3 in the middle of the sequence.
    first = jnp.array([[True, False, False, True, False, False]])
    carry0 = jnp.full((1, 6), 0.7)  # junk state: must be dropped at t = 0 (first)
    full = net.policy_sequence(params, carry0, obs, first)
    fresh = net.initial_carry(1)
    head = net.policy_sequence(params, fresh, obs[:, :3], first[:, :3])
    tail = net.policy_sequence(params, fresh, obs[:, 3:], first[:, 3:])
    np.testing.assert_allclose(full["mean"][:, :3], head["mean"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(full["mean"][:, 3:], tail["mean"], rtol=1e-5, atol=1e-6)
    # Without the reset at t = 3 the state flows through and the outputs differ.
    cont = net.policy_sequence(params, fresh, obs, first.at[0, 3].set(False))
    assert not np.allclose(cont["mean"][:, 3:], tail["mean"], atol=1e-4)
    # Step by step agrees with the sequence (the carry is threaded by policy_step).
    carry = carry0
    for t in range(6):
        d, carry = net.policy_step(params, carry, obs[:, t], first[:, t])
        np.testing.assert_allclose(d["mean"], full["mean"][:, t], rtol=1e-5, atol=1e-6)
    assert math.prod(carry.shape) == 6


@pytest.mark.parametrize("network", ["feed_forward_gaussian", "feed_forward_categorical"])
def test_any_config_with_the_network_fields_builds_the_same_network(network):
    fields = {f.name for f in dataclasses.fields(NetConfig)}
    # Read only for images, structured observations, a mask leaf.
    images = {"cnn", "cnn_dense", "image_layout", "image_encoding", "shared_torso", "action_mask"}
    assert fields | images == {f.name for f in dataclasses.fields(NetworkConfig)}
    spec = DISC if network == "feed_forward_categorical" else CONT
    a2c = A2CConfig(network=network, policy_layers=(8, 4), value_layers=(5,))
    ppo = PPOConfig(**{name: getattr(a2c, name) for name in fields})
    plain = NetConfig(**{name: getattr(a2c, name) for name in fields})
    alone = NetworkConfig(**{name: getattr(a2c, name) for name in fields})
    obs = jax.random.normal(jax.random.key(1), (3, *spec.obs_shape))
    outputs = []
    for config in (plain, alone, ppo, a2c):
        net = make_network(config, spec)
        params = net.init(jax.random.key(0))
        dist, _ = net.policy_step(params, (), obs, jnp.zeros(3, bool))
        outputs.append(jax.tree.leaves((params, dist, net.value(params, obs))))
    for leaves in outputs[1:]:
        for a, b in zip(outputs[0], leaves, strict=True):
            np.testing.assert_array_equal(a, b)


def test_the_algorithms_configs_share_one_network_config():
    network_fields = [f.name for f in dataclasses.fields(NetworkConfig)]
    run_fields = [f.name for f in dataclasses.fields(RunConfig)]
    assert "shared_torso" in network_fields and "cnn" in network_fields
    for config_class in (PPOConfig, A2CConfig):
        assert issubclass(config_class, NetworkConfig) and issubclass(config_class, RunConfig)
        # Flat fields: the run's, then the network's, then the algorithm's own.
        names = [f.name for f in dataclasses.fields(config_class)]
        assert names[: len(run_fields) + len(network_fields)] == run_fields + network_fields
    assert PPOConfig().policy_layers == NetworkConfig().policy_layers == (200, 100)
    a2c = A2CConfig()
    assert (a2c.policy_layers, a2c.activation, a2c.init_std) == ((64, 64), "tanh", 1.0)
    with pytest.raises(ValueError, match=r"network='recurrent': choose one of \('feed_forward',"):
        A2CConfig(network="recurrent")
    assert PPOConfig(network="recurrent").network == "recurrent"
    with pytest.raises(ValueError, match="cnn_dense=0: must be >= 1"):
        NetworkConfig(cnn_dense=0)


@dataclasses.dataclass(frozen=True)
class ImageNetConfig(NetConfig):
    """The network fields with those read for image and composite observations."""

    network: str = "feed_forward"
    cnn: str = "minatar"
    cnn_dense: int = 16
    image_layout: str = "auto"
    image_encoding: str = "auto"
    shared_torso: bool = False


DICT_OBS = {
    "grid": spaces.box((10, 10, 3), np.bool_, 0, 1),
    "frame": spaces.box((2, 8, 8), np.uint8, 0, 255),
    "mode": spaces.Discrete(3),
    "pos": spaces.box((2,), np.float32),
}


def _dict_obs(batch):
    return {
        "grid": jnp.zeros((*batch, 10, 10, 3), jnp.bool_),
        "frame": jnp.full((*batch, 2, 8, 8), 255, jnp.uint8),
        "mode": jnp.ones(batch, jnp.int32),
        "pos": jnp.ones((*batch, 2), jnp.float32),
    }


@pytest.mark.parametrize("shared", [False, True])
def test_dict_observation_network_shapes_and_torso_sharing(shared):
    action = (spaces.MultiDiscrete((2, 3)), spaces.box((1,), np.float32, -1.0, 1.0))
    spec = EnvSpec.from_spaces(DICT_OBS, action)
    config = ImageNetConfig(shared_torso=shared, policy_layers=(8,), value_layers=(4,))
    net = make_network(config, spec)
    params = net.init(jax.random.key(0))
    assert sorted(params) == (["policy", "torso", "value"] if shared else ["policy", "value"])
    cnns = ["cnn_0", "cnn_1"]  # tree order: frame, grid
    if shared:
        assert sorted(params["torso"]) == cnns and "encoder" not in params["policy"]
    else:
        assert sorted(params["policy"]["encoder"]) == cnns
        assert sorted(params["value"]["encoder"]) == cnns
    dist, carry = net.policy_step(params, (), _dict_obs((5,)), jnp.zeros(5, bool))
    assert isinstance(dist, tuple) and carry == ()
    assert dist[0]["logits"].shape == (5, 2, 3) and dist[1]["mean"].shape == (5, 1)
    assert net.value(params, _dict_obs((4, 6))).shape == (4, 6)
    seq = net.policy_sequence(params, (), _dict_obs((2, 3)), jnp.zeros((2, 3), bool))
    assert seq[0]["logits"].shape == (2, 3, 2, 3) and seq[1]["std"].shape == (2, 3, 1)
    mode = net.mode(dist)
    assert mode[0].shape == (5, 2) and mode[0].dtype == jnp.int32 and mode[1].shape == (5, 1)


def test_recurrent_policy_on_an_image_encoder():
    spec = EnvSpec.from_spaces(spaces.box((10, 10, 4), np.float32, 0, 1), spaces.Discrete(3))
    config = ImageNetConfig(network="recurrent", policy_layers=(8, 6), shared_torso=True)
    net = make_network(config, spec)
    params = net.init(jax.random.key(0))
    obs = jax.random.uniform(jax.random.key(1), (2, 4, 10, 10, 4))
    first = jnp.array([[True, False, True, False]] * 2)
    seq = net.policy_sequence(params, net.initial_carry(2), obs, first)
    assert seq["logits"].shape == (2, 4, 3) and net.recurrent
    carry = net.initial_carry(2)
    for t in range(4):
        dist, carry = net.policy_step(params, carry, obs[:, t], first[:, t])
        np.testing.assert_allclose(dist["logits"], seq["logits"][:, t], rtol=1e-5, atol=1e-6)
    assert carry.shape == (2, 6)


def test_original_network_names_refuse_other_action_spaces():
    multi = EnvSpec.from_spaces(spaces.box((3,), np.float32), spaces.MultiDiscrete((2, 2)))
    with pytest.raises(ValueError) as info:
        make_network(NetConfig(network="feed_forward_categorical"), multi)
    assert str(info.value) == (
        "network='feed_forward_categorical' needs a discrete action space; use "
        "feed_forward_gaussian or recurrent_gaussian for continuous actions, or feed_forward "
        "for MultiDiscrete([2, 2])"
    )
    with pytest.raises(ValueError) as info:
        make_network(NetConfig(), multi)
    assert str(info.value) == (
        "network='feed_forward_gaussian' needs a continuous action space; use feed_forward or "
        "recurrent for MultiDiscrete([2, 2])"
    )
    image = EnvSpec.from_spaces(spaces.box((10, 10, 4), np.float32), spaces.Discrete(3))
    with pytest.raises(spaces.UnsupportedSpaceError, match=r"^cnn='nature' does not fit"):
        make_network(ImageNetConfig(cnn="nature"), image)


@pytest.mark.parametrize("network", ["feed_forward", "recurrent"])
@pytest.mark.parametrize("shared", [False, True])
def test_policy_and_value_together_equal_them_apart(network, shared):
    spec = EnvSpec.from_spaces(DICT_OBS, spaces.Discrete(3))
    config = ImageNetConfig(network=network, shared_torso=shared, policy_layers=(8, 6))
    net = make_network(config, spec)
    params = net.init(jax.random.key(0))
    first = jnp.array([[True, False, False], [True, True, False]])
    carry0 = net.initial_carry(2)
    obs = _dict_obs((2, 3))
    obs["pos"] = jax.random.normal(jax.random.key(1), (2, 3, 2))
    dist, values = net.policy_sequence_and_value(params, carry0, obs, first)
    np.testing.assert_allclose(
        dist["logits"], net.policy_sequence(params, carry0, obs, first)["logits"], rtol=1e-5
    )
    np.testing.assert_allclose(values, net.value(params, obs), rtol=1e-5)
    step_obs = jax.tree.map(lambda x: x[:, 0], obs)
    d, c, v = net.policy_step_and_value(params, carry0, step_obs, first[:, 0])
    d2, c2 = net.policy_step(params, carry0, step_obs, first[:, 0])
    np.testing.assert_allclose(d["logits"], d2["logits"], rtol=1e-5)
    np.testing.assert_allclose(v, net.value(params, step_obs), rtol=1e-5)
    assert jax.tree.structure(c) == jax.tree.structure(c2)


@pytest.mark.parametrize(
    ("leaf", "encoding", "codes"),
    [
        (spaces.box((7, 7, 3), np.uint8, 0, 255), "auto", True),  # MiniGrid's view
        (spaces.box((10, 10, 2), np.int32, 0, 10), "auto", True),  # high well below 255
        (spaces.box((3, 12, 12), np.uint8, 0, 20), "auto", True),  # CHW, small range
        (spaces.box((4, 84, 84), np.uint8, 0, 255), "auto", False),  # Atari frames
        (spaces.box((8, 8, 3), np.uint8, 0, 255), "auto", False),  # small pixels
        (spaces.box((10, 10, 4), np.bool_, 0, 1), "auto", False),  # MinAtar's channels
        (spaces.box((5, 5, 2), np.int32, 0, 1), "auto", False),  # 0/1 integers
        (spaces.box((7, 7, 3), np.float32, 0, 10), "auto", False),  # floats are values
        (spaces.box((7, 7, 3), np.uint8, 0, 255), "pixels", False),  # the setting decides
        (spaces.box((4, 84, 84), np.uint8, 0, 255), "codes", True),
        (spaces.box((7, 3), np.uint8, 0, 10), "codes", False),  # not an image
    ],
)
def test_grids_of_codes_are_told_from_pixels(leaf, encoding, codes):
    assert spaces.is_code_grid(leaf, encoding) is codes


def test_a_grid_of_codes_is_embedded_per_cell_not_scaled():
    """MiniGrid's 7x7x3 uint8 ids: an embedding per channel, flattened into the MLPs (no CNN);
    image_encoding=pixels takes it through the CNN as before."""
    spec = EnvSpec.from_spaces(spaces.box((7, 7, 3), np.uint8, 0, 255), spaces.Discrete(7))
    config = ImageNetConfig(policy_layers=(8,), value_layers=(4,))
    net = make_network(dataclasses.replace(config, image_encoding="auto"), spec)
    params = net.init(jax.random.key(0))
    encoder = params["policy"]["encoder"]
    assert list(encoder) == ["codes_0"]
    assert encoder["codes_0"]["Embed_0"]["embedding"].shape == (3 * 256, 8)
    assert params["policy"]["MLP_0"]["Dense_0"]["kernel"].shape == (7 * 7 * 3 * 8, 8)
    obs = jnp.zeros((2, 7, 7, 3), jnp.uint8).at[0, 3, 3, 0].set(10)  # one cell holds a goal
    dist, _ = net.policy_step(params, (), obs, jnp.zeros(2, bool))
    assert not np.allclose(dist["logits"][0], dist["logits"][1])
    pixels = make_network(dataclasses.replace(config, image_encoding="pixels"), spec)
    assert list(pixels.init(jax.random.key(0))["policy"]["encoder"]) == ["cnn_0"]

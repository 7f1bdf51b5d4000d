"""Networks and distributions: closed-form log-prob/KL/entropy, init, recurrent resets, any
config with the network fields, and the vector torsos (``mlp``) and ``penultimate_norm``:
their exact math, the default's unchanged parameters, and a short training with each."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cold_programs import cold_jit, compiled, normal, uniform

import batchppo
from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.networks.networks import (
    FEATURE_NORM_EPS,
    MLP,
    NetworkConfig,
    SemMLP,
    SimbaBlock,
    SimbaMLP,
    categorical_distribution,
    gaussian_distribution,
    make_network,
    normalize_features,
    simplicial_embedding,
)
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.run_config import RunConfig
from batchppo.core import spaces
from batchppo.core.env import EnvSpec
from batchppo.experiment.config.configs import get_preset


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """The network fields alone (PPOConfig's defaults): no algorithm's config."""

    network: str = "feed_forward_gaussian"
    policy_layers: tuple[int, ...] = (200, 100)
    value_layers: tuple[int, ...] = (200, 100)
    activation: str = "relu"
    mlp: str = "plain"
    penultimate_norm: bool = False
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
    net = compiled(make_network(config, CONT))
    params = net.init(jax.random.key(0))
    obs = normal(jax.random.key(1), (5, 3))
    dist, carry = net.policy_step(params, (), obs, jnp.zeros(5, bool))
    assert dist["mean"].shape == (5, 2) and carry == ()
    np.testing.assert_allclose(dist["std"], 0.35, rtol=1e-5)
    assert np.all(np.abs(dist["mean"]) < 1.0)
    assert net.value(params, jnp.zeros((4, 6, 3))).shape == (4, 6)
    seq = net.policy_sequence(params, (), obs.reshape(1, 5, 3), jnp.zeros((1, 5), bool))
    np.testing.assert_allclose(seq["mean"][0], dist["mean"], rtol=1e-6)


def test_categorical_network_and_mismatch_errors():
    net = compiled(make_network(NetConfig(network="feed_forward_categorical"), DISC))
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
    net = compiled(make_network(config, CONT))
    params = net.init(jax.random.key(0))
    assert net.recurrent
    obs = normal(jax.random.key(1), (1, 6, 3))
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
    obs = normal(jax.random.key(1), (3, *spec.obs_shape))
    outputs = []
    for config in (plain, alone, ppo, a2c):
        net = compiled(make_network(config, spec))
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
        "grid": np.zeros((*batch, 10, 10, 3), np.bool_),
        "frame": np.full((*batch, 2, 8, 8), 255, np.uint8),
        "mode": np.ones(batch, np.int32),
        "pos": np.ones((*batch, 2), np.float32),
    }


@pytest.mark.parametrize("shared", [False, True])
def test_dict_observation_network_shapes_and_torso_sharing(shared):
    action = (spaces.MultiDiscrete((2, 3)), spaces.box((1,), np.float32, -1.0, 1.0))
    spec = EnvSpec.from_spaces(DICT_OBS, action)
    config = ImageNetConfig(shared_torso=shared, policy_layers=(8,), value_layers=(4,))
    net = compiled(make_network(config, spec))
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


def test_a_shared_torso_without_parameters_computes_what_separate_encoders_do():
    # Dict leaves that are only flattened and one-hot encoded: the shared torso has no
    # parameters, and sharing it changes nothing in the policy or the value.
    obs_space = {"pos": spaces.box((3,), np.float32), "mode": spaces.Discrete(4)}
    spec = EnvSpec.from_spaces(obs_space, spaces.Discrete(2))
    obs = {"pos": jnp.arange(15.0).reshape(5, 3) / 7, "mode": jnp.array([0, 1, 2, 3, 1])}
    first = jnp.zeros(5, bool)
    outputs = []
    for shared in (False, True):
        net = compiled(make_network(ImageNetConfig(shared_torso=shared, policy_layers=(8,)), spec))
        params = net.init(jax.random.key(0))
        assert sorted(params) == (["policy", "torso", "value"] if shared else ["policy", "value"])
        dist, _ = net.policy_step(params, (), obs, first)
        outputs.append((dist["logits"], net.value(params, obs)))
    assert outputs[1][0].shape == (5, 2) and outputs[1][1].shape == (5,)
    for separate, shared in zip(*outputs, strict=True):
        np.testing.assert_array_equal(separate, shared)


def test_recurrent_policy_on_an_image_encoder():
    spec = EnvSpec.from_spaces(spaces.box((10, 10, 4), np.float32, 0, 1), spaces.Discrete(3))
    config = ImageNetConfig(network="recurrent", policy_layers=(8, 6), shared_torso=True)
    net = compiled(make_network(config, spec))
    params = net.init(jax.random.key(0))
    obs = uniform(jax.random.key(1), (2, 4, 10, 10, 4))
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


def _together_equal_apart(net, params):
    """The joint policy-and-value calls of ``net`` on Dict observations equal the separate
    ones, and the sequence call equals the steps one after another."""
    first = jnp.array([[True, False, False], [True, True, False]])
    carry0 = net.initial_carry(2)
    obs = _dict_obs((2, 3))
    obs["pos"] = normal(jax.random.key(1), (2, 3, 2))
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
    carry = carry0
    for t in range(3):
        obs_t = jax.tree.map(lambda x, t=t: x[:, t], obs)
        d, carry = net.policy_step(params, carry, obs_t, first[:, t])
        np.testing.assert_allclose(d["logits"], dist["logits"][:, t], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("network", ["feed_forward", "recurrent"])
@pytest.mark.parametrize("shared", [False, True])
def test_policy_and_value_together_equal_them_apart(network, shared):
    spec = EnvSpec.from_spaces(DICT_OBS, spaces.Discrete(3))
    config = ImageNetConfig(network=network, shared_torso=shared, policy_layers=(8, 6))
    net = compiled(make_network(config, spec))
    _together_equal_apart(net, net.init(jax.random.key(0)))


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
    net = compiled(make_network(dataclasses.replace(config, image_encoding="auto"), spec))
    params = net.init(jax.random.key(0))
    encoder = params["policy"]["encoder"]
    assert list(encoder) == ["codes_0"]
    assert encoder["codes_0"]["Embed_0"]["embedding"].shape == (3 * 256, 8)
    assert params["policy"]["MLP_0"]["Dense_0"]["kernel"].shape == (7 * 7 * 3 * 8, 8)
    obs = jnp.zeros((2, 7, 7, 3), jnp.uint8).at[0, 3, 3, 0].set(10)  # one cell holds a goal
    dist, _ = net.policy_step(params, (), obs, jnp.zeros(2, bool))
    assert not np.allclose(dist["logits"][0], dist["logits"][1])
    pixels = compiled(make_network(dataclasses.replace(config, image_encoding="pixels"), spec))
    assert list(pixels.init(jax.random.key(0))["policy"]["encoder"]) == ["cnn_0"]


# --- The vector torsos (``mlp``) and ``penultimate_norm`` -------------------------------------

# The parameter tree of hopper_fast's network on an 11-dim observation and a 3-dim action,
# produced by the code before ``mlp`` existed: path -> (shape, sum of the initial values at
# key 0, to FLOAT32_SPREAD: another CPU rounds them differently). A checkpoint of a run made
# then must load into the network the default builds.
HOPPER_FAST_TREE = {
    "policy/MLP_0/Dense_0/bias": ((64,), 0.0),
    "policy/MLP_0/Dense_0/kernel": ((11, 64), -6.851637737127021),
    "policy/MLP_0/Dense_1/bias": ((64,), 0.0),
    "policy/MLP_0/Dense_1/kernel": ((64, 64), -6.515186599292065),
    "policy/head/Dense_0/bias": ((3,), 0.0),
    "policy/head/Dense_0/kernel": ((64, 3), -0.1023438777483534),
    "policy/head/std_param": ((3,), -0.5876111090183258),
    "value/Dense_0/bias": ((1,), 0.0),
    "value/Dense_0/kernel": ((64, 1), 0.40924244542839006),
    "value/MLP_0/Dense_0/bias": ((64,), 0.0),
    "value/MLP_0/Dense_0/kernel": ((11, 64), -1.075381212751381),
    "value/MLP_0/Dense_1/bias": ((64,), 0.0),
    "value/MLP_0/Dense_1/kernel": ((64, 64), -6.953967050826122),
}
HOPPER = EnvSpec.from_spaces(spaces.box((11,), np.float32), spaces.box((3,), np.float32, -1, 1))


def _tree(params):
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {"/".join(k.key for k in path): leaf for path, leaf in flat}


def test_the_default_torso_keeps_the_parameter_tree_and_its_initial_values():
    # walker_fast's network settings are hopper_fast's before Hopper took LayerNorm.
    config = get_preset("walker_fast")
    assert (config.mlp, config.penultimate_norm) == ("plain", False)
    hopper = get_preset("hopper_fast")
    assert dataclasses.replace(config, env=hopper.env, mlp="layernorm") == hopper
    tree = _tree(compiled(make_network(config, HOPPER)).init(jax.random.key(0)))
    assert {path: leaf.shape for path, leaf in tree.items()} == {
        path: shape for path, (shape, _) in HOPPER_FAST_TREE.items()
    }
    for path, (_, total) in HOPPER_FAST_TREE.items():
        _assert_sum(tree[path], total, what=path)


# The kernels of hopper_fast's network with ``mlp=layernorm``, as ``LayerNormMLP`` built them
# before the ``layernorm`` torso became ``MLP`` with ``layer_norm``: path -> sum of the initial
# values at key 0 (to FLOAT32_SPREAD). The tree also holds those kernels' zero biases and one
# LayerNorm (scale 1, bias 0) per layer; a checkpoint of a run made then must load into the
# network built now.
LAYERNORM_KERNELS = {
    "policy/LayerNormMLP_0/Dense_0/kernel": 1.1104244795897102,
    "policy/LayerNormMLP_0/Dense_1/kernel": 4.429700671536921,
    "value/LayerNormMLP_0/Dense_0/kernel": 6.9945846513146535,
    "value/LayerNormMLP_0/Dense_1/kernel": -3.5185989714536845,
}


def test_the_layernorm_torso_keeps_the_parameter_tree_and_initial_values_of_its_runs():
    config = dataclasses.replace(get_preset("hopper_fast"), mlp="layernorm")
    tree = _tree(compiled(make_network(config, HOPPER)).init(jax.random.key(0)))
    torsos = {path: leaf for path, leaf in tree.items() if "/LayerNormMLP_0/" in path}
    layers = [(net, i) for net in ("policy", "value") for i in (0, 1)]
    assert sorted(torsos) == sorted(
        f"{net}/LayerNormMLP_0/{layer}_{i}/{leaf}"
        for net, i in layers
        for layer, leaf in [("Dense", "bias"), ("Dense", "kernel"), ("LayerNorm", "bias"),
                            ("LayerNorm", "scale")]
    )  # fmt: skip
    assert sorted(set(tree) - set(torsos)) == sorted(
        path for path in HOPPER_FAST_TREE if "/MLP_0/" not in path
    )
    for path, total in LAYERNORM_KERNELS.items():
        _assert_sum(tree[path], total, what=path)


# --- make_network's parameters and outputs, on any CPU ----------------------------------------
#
# XLA's CPU code (and the LAPACK kernels behind the orthogonal initialiser's QR) differ between
# processors, so the last bits of a float computed here differ between machines: nothing below
# compares such a float with bits recorded on another machine. The parameter trees are pinned
# exactly, the initial values to the tolerance FLOAT32_SPREAD, and every output against the
# network's math computed here in float64 from the same parameters.

FLOAT32_SPREAD = 2.0**-16
"""How far apart, relative to a leaf's magnitude, two correct float32 computations of the same
initial values may lie: another CPU's XLA code differs in a few ulps (2^-24) per element, a QR's
orthogonal factor by about n 2^-24 (about 1e-6 at these shapes, measured against a float64 QR).
A sum of weights c_i >= 0 times the values then moves by at most FLOAT32_SPREAD sum(c_i |w_i|);
a changed initialiser, scale or key moves it by about sqrt(n) times the values' scale."""


def _assert_sum(values, recorded, weights=1.0, what=""):
    """``sum(weights * values)`` (float64) is ``recorded`` to ``FLOAT32_SPREAD``."""
    values = np.asarray(values, np.float64).ravel()
    bound = FLOAT32_SPREAD * float(np.sum(weights * np.abs(values)))
    got = float(np.sum(weights * values))
    assert abs(got - recorded) <= bound, (what, got, recorded, bound)


def _checksums(leaf):
    """A leaf's sum and its sum weighted by position (1 + i / n for flat index i): the second
    tells a permuted or transposed leaf from the recorded one."""
    values = np.asarray(leaf, np.float64).ravel()
    weights = 1.0 + np.arange(values.size) / values.size
    return float(values.sum()), float((weights * values).sum())


def _assert_checksums(leaf, recorded, what):
    size = int(np.size(leaf))
    _assert_sum(leaf, recorded[0], what=what)
    _assert_sum(leaf, recorded[1], 1.0 + np.arange(size) / size, what)


TRUNCATED_NORMAL_STD = 0.87962566103423978
"""The standard deviation of a unit normal truncated to [-2, 2]: ``variance_scaling`` divides by
it, so that its truncated-normal values have the variance ``scale / fan_in``."""


def _initialiser(path, config):
    """What initialises the parameter at ``path`` of ``make_network``'s network: ``("zeros",)``,
    ``("constant", value)``, ``("orthogonal", gain)`` or ``("truncated_normal", scale)`` (fan-in
    variance scaling, truncated at two standard deviations)."""
    name = path.rsplit("/", 1)[-1]
    if name == "bias":
        return ("zeros",)
    if name == "std_param":  # softplus(std_param) = init_std
        return ("constant", math.log(math.expm1(config.init_std)))
    if "/gru/h" in path:  # Flax's GRU: orthogonal recurrent kernels
        return ("orthogonal", 1.0)
    if "/cnn_" in path:  # the CNN torsos: orthogonal, gain sqrt 2
        return ("orthogonal", math.sqrt(2.0))
    if "/head/" in path:
        return ("truncated_normal", config.init_mean_factor)
    return ("truncated_normal", 1.0)


ORTHOGONALITY_TOL = 2.0**-13
"""float32 Householder QR gives columns orthonormal to about n 2^-24 (n <= 1024 rows here)."""


def _assert_initialised_by(leaf, kind, path):
    """The values of ``leaf`` are of the initialiser ``kind`` (``_initialiser``): exact for the
    constant ones, to float32 rounding for the orthogonal ones, within the truncation bound for
    the truncated normal ones."""
    w = np.asarray(leaf, np.float64)
    if kind[0] == "zeros":
        assert np.all(w == 0.0), path
    elif kind[0] == "constant":
        assert np.all(leaf == np.float32(kind[1])), path  # rounded once, to float32
    elif kind[0] == "orthogonal":
        columns = w.reshape(-1, w.shape[-1])
        assert columns.shape[0] >= columns.shape[1], path  # orthonormal columns
        gram = columns.T @ columns / kind[1] ** 2
        np.testing.assert_allclose(gram, np.eye(len(gram)), atol=ORTHOGONALITY_TOL, err_msg=path)
    else:
        fan_in = math.prod(w.shape[:-1])
        bound = 2.0 * math.sqrt(kind[1] / fan_in) / TRUNCATED_NORMAL_STD
        assert np.abs(w).max() <= bound * (1 + FLOAT32_SPREAD), path
        assert np.any(w != 0.0), path


def _every_output(net, params, spec):
    """What each of ``net``'s functions returns on one batch of 2 sequences of 3 steps; a
    carry that is not zero where the first step starts no episode."""
    obs, first = _every_input(spec)
    carry = jax.tree.map(lambda c: c + 0.5, net.initial_carry(2))
    step = jax.tree.map(lambda x: x[:, 0], obs)
    return {
        "initial_carry": net.initial_carry(2),
        "policy_step": net.policy_step(params, carry, step, first[:, 0]),
        "policy_sequence": net.policy_sequence(params, carry, obs, first),
        "value": net.value(params, obs),
        "policy_step_and_value": net.policy_step_and_value(params, carry, step, first[:, 0]),
        "policy_sequence_and_value": net.policy_sequence_and_value(params, carry, obs, first),
    }


def _every_input(spec):
    """``_every_output``'s observations ``[2, 3]`` and ``first`` flags."""
    if spec.obs_space is DICT_OBS:
        obs = _dict_obs((2, 3))
        obs["pos"] = normal(jax.random.key(1), (2, 3, 2))
    else:
        obs = normal(jax.random.key(1), (2, 3, *spec.obs_shape))
    return obs, jnp.array([[False, False, True], [True, False, False]])


# The network's math by hand, in float64 with NumPy, from the parameter arrays.

_ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh}


def _affine(p, x):
    return x @ p["kernel"] + p["bias"] if "bias" in p else x @ p["kernel"]


def _mlp(p, x, layers, activation):
    for i in range(len(layers)):
        x = _ACTIVATIONS[activation](_affine(p[f"Dense_{i}"], x))
    return x


def _minatar_cnn(p, image):
    """MinAtar's CNN on ``(B, H, W, C)``: a 3x3 VALID convolution of stride 1, ReLU, flatten,
    a dense layer, ReLU."""
    kernel = p["Conv_0"]["kernel"]
    windows = np.lib.stride_tricks.sliding_window_view(image, kernel.shape[:2], axis=(1, 2))
    x = np.einsum("bijcxy,xyco->bijo", windows, kernel) + p["Conv_0"]["bias"]
    x = np.maximum(x, 0.0).reshape(len(image), -1)
    return np.maximum(_affine(p["Dense_0"], x), 0.0)


def _dict_features(torso, obs):
    """``DICT_OBS``'s leaves in tree order: the CHW uint8 frame scaled to [0, 1] and read as
    HWC, the bool grid as 0/1, both through their CNN; ``mode`` one-hot; ``pos`` as it is."""
    frame = np.moveaxis(np.asarray(obs["frame"], np.float64) / 255.0, 1, -1)
    grid = np.asarray(obs["grid"], np.float64)
    mode = np.eye(3)[np.asarray(obs["mode"])]
    pos = np.asarray(obs["pos"], np.float64)
    parts = [_minatar_cnn(torso["cnn_0"], frame), _minatar_cnn(torso["cnn_1"], grid), mode, pos]
    return np.concatenate(parts, axis=-1)


def _gru_cell(p, h, x):
    """Flax's GRU cell: reset and update gates, the candidate with the reset gate on the
    recurrent part (and its bias), then a convex mix of the candidate and the old state."""
    sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    r = sigmoid(_affine(p["ir"], x) + _affine(p["hr"], h))
    z = sigmoid(_affine(p["iz"], x) + _affine(p["hz"], h))
    n = np.tanh(_affine(p["in"], x) + r * _affine(p["hn"], h))
    return (1.0 - z) * n + z * h


def _reference_outputs(config, spec, params):
    """``_every_output`` of ``make_network(config, spec)`` by hand: NumPy in float64, from the
    parameters and the inputs; a recurrent policy's GRU state (the last policy layer) starts
    at 0.5."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    obs, first = jax.tree.map(np.asarray, _every_input(spec))
    recurrent = config.network in ("recurrent", "recurrent_gaussian")
    layers = config.policy_layers[:-1] if recurrent else config.policy_layers
    carry = np.full((2, config.policy_layers[-1]), 0.5) if recurrent else ()

    def features(o):
        return _dict_features(p["torso"], o) if spec.obs_space is DICT_OBS else o

    def value(o):
        x = _mlp(p["value"]["MLP_0"], features(o), config.value_layers, config.activation)
        return _affine(p["value"]["Dense_0"], x)[..., 0]

    def policy(h, o, starts):
        x = _mlp(p["policy"].get("MLP_0", {}), features(o), layers, config.activation)
        if recurrent:
            h = x = _gru_cell(p["policy"]["gru"], np.where(starts[:, None], 0.0, h), x)
        out = _affine(p["policy"]["head"]["Dense_0"], x)
        if "std_param" not in p["policy"]["head"]:
            return {"logits": out}, h
        std = np.log1p(np.exp(p["policy"]["head"]["std_param"]))  # softplus
        return {"mean": np.tanh(out), "std": np.broadcast_to(std, out.shape)}, h

    at = lambda t: jax.tree.map(lambda x: x[:, t], obs)  # noqa: E731
    dists, h = [], carry
    for t in range(first.shape[1]):
        dist, h = policy(h, at(t), first[:, t])
        dists.append(dist)
    sequence = jax.tree.map(lambda *d: np.stack(d, axis=1), *dists)
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), obs)
    values = value(flat).reshape(first.shape)
    step = policy(carry, at(0), first[:, 0])
    return {
        "initial_carry": np.zeros_like(carry) if recurrent else (),
        "policy_step": step,
        "policy_sequence": sequence,
        "value": values,
        "policy_step_and_value": (*step, values[:, 0]),
        "policy_sequence_and_value": (sequence, values),
    }


OUTPUT_TOL = 1e-5
"""Relative and absolute tolerance of the float32 network against its float64 math, outputs of
order 1: float32 rounds a dot product of n terms, weights of scale 1/sqrt(fan_in), to about
sqrt(n) 2^-24 of its terms' size, 2e-6 at most here (n <= 1024; about 1e-7 is seen), while a
changed layer, activation, gate or head moves an output by 1e-2 or more."""


def _assert_outputs_are_the_math(net, config, spec, params):
    got = _every_output(net, params, spec)
    want = _reference_outputs(config, spec, params)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for (path, a), b in zip(
        jax.tree_util.tree_flatten_with_path(got)[0], jax.tree.leaves(want), strict=True
    ):
        where = jax.tree_util.keystr(path)
        assert a.dtype == jnp.float32 and a.shape == b.shape, (where, a.dtype, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=OUTPUT_TOL, atol=OUTPUT_TOL, err_msg=where)


def _random_parameters(params, seed):
    """Parameters of ``params``'s tree drawn at random (NumPy): kernels of scale 1/sqrt(fan_in),
    every bias and ``std_param`` of scale 0.5, so that no bias is zero and the heads' tanh and
    softplus are in their curved range."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        scale = 1.0 / math.sqrt(math.prod(leaf.shape[:-1])) if path[-1].key == "kernel" else 0.5
        return jnp.asarray(rng.normal(size=leaf.shape) * scale, leaf.dtype)

    return jax.tree_util.tree_map_with_path(draw, params)


_DICT_TORSO = {
    "torso/cnn_0/Conv_0/bias": (16,),
    "torso/cnn_0/Conv_0/kernel": (3, 3, 2, 16),
    "torso/cnn_0/Dense_0/bias": (16,),
    "torso/cnn_0/Dense_0/kernel": (576, 16),
    "torso/cnn_1/Conv_0/bias": (16,),
    "torso/cnn_1/Conv_0/kernel": (3, 3, 3, 16),
    "torso/cnn_1/Dense_0/bias": (16,),
    "torso/cnn_1/Dense_0/kernel": (1024, 16),
    "value/Dense_0/bias": (1,),
    "value/Dense_0/kernel": (2, 1),
    "value/MLP_0/Dense_0/bias": (2,),
    "value/MLP_0/Dense_0/kernel": (37, 2),
}


def _gru_shapes(inputs, size):
    """The parameter shapes of a GRU cell ``gru`` of ``size`` units on ``inputs`` features."""
    return {
        **{f"policy/gru/{g}/kernel": (inputs, size) for g in ("ir", "iz", "in")},
        **{f"policy/gru/{g}/kernel": (size, size) for g in ("hr", "hz", "hn")},
        **{f"policy/gru/{g}/bias": (size,) for g in ("ir", "iz", "in", "hn")},
    }


# make_network's networks: the path and shape of each parameter (all float32), the tree that
# a checkpoint of the published runs must load into.
RECORDED_NETWORKS = {
    "mlp": (
        NetConfig(policy_layers=(4, 3), value_layers=(5,)),
        CONT,
        {
            "policy/MLP_0/Dense_0/bias": (4,),
            "policy/MLP_0/Dense_0/kernel": (3, 4),
            "policy/MLP_0/Dense_1/bias": (3,),
            "policy/MLP_0/Dense_1/kernel": (4, 3),
            "policy/head/Dense_0/bias": (2,),
            "policy/head/Dense_0/kernel": (3, 2),
            "policy/head/std_param": (2,),
            "value/Dense_0/bias": (1,),
            "value/Dense_0/kernel": (5, 1),
            "value/MLP_0/Dense_0/bias": (5,),
            "value/MLP_0/Dense_0/kernel": (3, 5),
        },
    ),
    "recurrent": (
        NetConfig(network="recurrent_gaussian", policy_layers=(4, 3), value_layers=(2,)),
        CONT,
        {
            "policy/MLP_0/Dense_0/bias": (4,),
            "policy/MLP_0/Dense_0/kernel": (3, 4),
            **_gru_shapes(4, 3),
            "policy/head/Dense_0/bias": (2,),
            "policy/head/Dense_0/kernel": (3, 2),
            "policy/head/std_param": (2,),
            "value/Dense_0/bias": (1,),
            "value/Dense_0/kernel": (2, 1),
            "value/MLP_0/Dense_0/bias": (2,),
            "value/MLP_0/Dense_0/kernel": (3, 2),
        },
    ),
    "dict": (
        ImageNetConfig(shared_torso=True, policy_layers=(4,), value_layers=(2,)),
        EnvSpec.from_spaces(DICT_OBS, spaces.Discrete(3)),
        {
            "policy/MLP_0/Dense_0/bias": (4,),
            "policy/MLP_0/Dense_0/kernel": (37, 4),
            "policy/head/Dense_0/bias": (3,),
            "policy/head/Dense_0/kernel": (4, 3),
            **_DICT_TORSO,
        },
    ),
    "dict_recurrent": (
        ImageNetConfig(
            network="recurrent", shared_torso=True, policy_layers=(4,), value_layers=(2,)
        ),
        EnvSpec.from_spaces(DICT_OBS, spaces.Discrete(3)),
        {
            **_gru_shapes(37, 4),
            "policy/head/Dense_0/bias": (3,),
            "policy/head/Dense_0/kernel": (4, 3),
            **_DICT_TORSO,
        },
    ),
}

# The checksums (_checksums: sum, position-weighted sum) of each kernel of those networks at
# key 0, from the code that trained the published runs; their biases are zero and their
# std_param the constant of init_std (_initialiser), exactly. Checked to FLOAT32_SPREAD: a
# checksum that moves past it means that those runs no longer start from the same network.
INITIAL_CHECKSUMS = {
    "mlp": {
        "policy/MLP_0/Dense_0/kernel": (-1.360475653, -2.373286737),
        "policy/MLP_0/Dense_1/kernel": (1.291064244, 1.294982098),
        "policy/head/Dense_0/kernel": (0.2143834606, 0.1708963849),
        "value/Dense_0/kernel": (-1.813041687, -2.40667547),
        "value/MLP_0/Dense_0/kernel": (-1.143167104, -2.111479308),
    },
    "recurrent": {
        "policy/MLP_0/Dense_0/kernel": (-1.360475653, -2.373286737),
        "policy/gru/hn/kernel": (0.9843376428, 1.245211351),
        "policy/gru/hr/kernel": (0.7921014726, 1.735039449),
        "policy/gru/hz/kernel": (-0.6484892815, -0.3258717391),
        "policy/gru/in/kernel": (-2.541139111, -3.579128395),
        "policy/gru/ir/kernel": (-0.5413480327, -0.252182945),
        "policy/gru/iz/kernel": (2.598692544, 4.977328337),
        "policy/head/Dense_0/kernel": (0.2143834606, 0.1708963849),
        "value/Dense_0/kernel": (-0.9662033916, -0.8673520982),
        "value/MLP_0/Dense_0/kernel": (0.5576920509, 1.523965547),
    },
    "dict": {
        "policy/MLP_0/Dense_0/kernel": (-1.323507066, -2.089453853),
        "policy/head/Dense_0/kernel": (-0.3414100595, -0.7383285413),
        "torso/cnn_0/Conv_0/kernel": (1.044507281, 1.639278947),
        "torso/cnn_0/Dense_0/kernel": (-10.77712386, -14.45798829),
        "torso/cnn_1/Conv_0/kernel": (-0.6808821083, -0.1717084191),
        "torso/cnn_1/Dense_0/kernel": (-1.442748258, -1.510956678),
        "value/Dense_0/kernel": (-0.9662033916, -0.8673520982),
        "value/MLP_0/Dense_0/kernel": (-0.2882467551, -0.5674445373),
    },
    "dict_recurrent": {
        "policy/gru/hn/kernel": (2.875693291, 4.081276678),
        "policy/gru/hr/kernel": (-3.368466854, -5.368640604),
        "policy/gru/hz/kernel": (0.6237301342, 1.084056484),
        "policy/gru/in/kernel": (0.7407552857, 1.630047708),
        "policy/gru/ir/kernel": (-1.357947203, -1.148734256),
        "policy/gru/iz/kernel": (2.487173023, 2.863479567),
        "policy/head/Dense_0/kernel": (-0.3414100595, -0.7383285413),
        "torso/cnn_0/Conv_0/kernel": (1.044507281, 1.639278947),
        "torso/cnn_0/Dense_0/kernel": (-10.77712386, -14.45798829),
        "torso/cnn_1/Conv_0/kernel": (-0.6808821083, -0.1717084191),
        "torso/cnn_1/Dense_0/kernel": (-1.442748258, -1.510956678),
        "value/Dense_0/kernel": (-0.9662033916, -0.8673520982),
        "value/MLP_0/Dense_0/kernel": (-0.2882467551, -0.5674445373),
    },
}


@pytest.mark.parametrize("name", list(RECORDED_NETWORKS))
def test_make_network_builds_the_recorded_parameter_tree_and_initial_values(name):
    config, spec, shapes = RECORDED_NETWORKS[name]
    net = compiled(make_network(config, spec))
    tree = _tree(net.init(jax.random.key(0)))
    assert {path: (leaf.shape, leaf.dtype) for path, leaf in tree.items()} == {
        path: (shape, jnp.float32) for path, shape in shapes.items()
    }
    again, other = _tree(net.init(jax.random.key(0))), _tree(net.init(jax.random.key(1)))
    checksums = INITIAL_CHECKSUMS[name]
    drawn = []
    for path, leaf in tree.items():
        np.testing.assert_array_equal(again[path], leaf, err_msg=path)  # a rerun: same bits
        kind = _initialiser(path, config)
        _assert_initialised_by(leaf, kind, path)
        if kind[0] in ("zeros", "constant"):
            np.testing.assert_array_equal(other[path], leaf, err_msg=path)
        else:
            drawn.append(path)
            assert not np.array_equal(other[path], leaf), path  # drawn from the key
            _assert_checksums(leaf, checksums[path], path)
    assert sorted(drawn) == sorted(checksums)


@pytest.mark.parametrize("name", list(RECORDED_NETWORKS))
def test_every_function_of_make_network_computes_the_networks_math(name):
    config, spec, _ = RECORDED_NETWORKS[name]
    net = compiled(make_network(config, spec))
    params = net.init(jax.random.key(0))
    _assert_outputs_are_the_math(net, config, spec, params)
    # Away from the initial values: no bias zero, the heads' tanh and softplus curved.
    _assert_outputs_are_the_math(net, config, spec, _random_parameters(params, seed=3))


def test_the_initialisers_give_their_distributions_on_a_wide_network():
    # Kernels of 8,192 to 131,072 values: the sample standard deviation of n truncated-normal
    # values has a relative standard error of sqrt((kurtosis - 1) / 4n), at most 0.65 % here
    # (kurtosis 2.37 at a truncation of 2 standard deviations), so 5 % is 7.7 standard errors;
    # 0.47 % of the values lie between 1.96 and 2 standard deviations of the untruncated
    # normal, about 40 at n = 8192, so the largest reaches 98 % of the bound.
    spec = EnvSpec((512,), jnp.float32, (64,), jnp.float32, False)
    config = NetConfig(network="recurrent_gaussian", policy_layers=(256, 128), value_layers=(384,))
    tree = _tree(compiled(make_network(config, spec)).init(jax.random.key(0)))
    kinds = {path: _initialiser(path, config) for path in tree}
    for path, leaf in tree.items():
        _assert_initialised_by(leaf, kinds[path], path)
    large = [p for p in tree if kinds[p][0] == "truncated_normal" and tree[p].size >= 8192]
    assert len(large) == 6  # policy MLP, the GRU's three input kernels, head, value MLP
    for path in large:
        w = np.asarray(tree[path], np.float64)
        std = math.sqrt(kinds[path][1] / w.shape[0])  # fan-in
        assert w.std() == pytest.approx(std, rel=0.05), path
        assert abs(w.mean()) < 6 * std / math.sqrt(w.size), path
        assert np.abs(w).max() >= 0.98 * 2 * std / TRUNCATED_NORMAL_STD, path
    assert [kinds[f"policy/gru/{g}/kernel"] for g in ("hr", "hz", "hn")] == [
        ("orthogonal", 1.0)
    ] * 3


def _dense(rng, fan_in, fan_out):
    return {"kernel": rng.normal(size=(fan_in, fan_out)), "bias": rng.normal(size=fan_out)}


def _layer_norm(x, scale=1.0, bias=0.0, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * scale + bias


def _apply(module, params, x):
    as_f32 = jax.tree.map(lambda a: np.asarray(a, np.float32), params)
    out = cold_jit(module.apply)({"params": as_f32}, np.asarray(x, np.float32))
    return np.asarray(out, np.float64)


X = np.random.default_rng(7).normal(size=(4, 3))


def test_the_layernorm_torso_is_dense_layernorm_activation_per_layer():
    rng = np.random.default_rng(0)
    d0, d1 = _dense(rng, 3, 5), _dense(rng, 5, 6)
    scale, bias = rng.normal(size=6), rng.normal(size=6)
    ones = {"scale": np.ones(5), "bias": np.zeros(5)}
    params = {"Dense_0": d0, "LayerNorm_0": ones, "Dense_1": d1}
    params["LayerNorm_1"] = {"scale": scale, "bias": bias}
    out = _apply(MLP((5, 6), "tanh", layer_norm=True), params, X)
    h = np.tanh(_layer_norm(X @ d0["kernel"] + d0["bias"]))
    want = np.tanh(_layer_norm(h @ d1["kernel"] + d1["bias"], scale, bias))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    # At its initial scale 1 and bias 0, each sample's pre-activations have mean 0, variance 1.
    layer = MLP((5,), "tanh", layer_norm=True)
    first = np.arctanh(_apply(layer, {"Dense_0": d0, "LayerNorm_0": ones}, X))
    np.testing.assert_allclose(first.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(first.var(-1), 1.0, atol=1e-4)
    assert _apply(MLP((), layer_norm=True), {}, X) == pytest.approx(X, abs=1e-6)  # identity


def _simba_params(rng, width, blocks, inner_zero=False):
    params = {
        "embed": _dense(rng, 3, width),
        "norm": {"scale": np.ones(width), "bias": np.zeros(width)},
    }
    for i in range(blocks):
        out = _dense(rng, 4 * width, width)
        if inner_zero:
            out = jax.tree.map(np.zeros_like, out)
        ln = {"scale": rng.normal(size=width), "bias": rng.normal(size=width)}
        params[f"block_{i}"] = {
            "LayerNorm_0": ln,
            "Dense_0": _dense(rng, width, 4 * width),
            "Dense_1": out,
        }
    return params


def test_the_simba_torso_is_a_projection_residual_blocks_and_a_final_layernorm():
    rng = np.random.default_rng(1)
    params = _simba_params(rng, width=4, blocks=2)
    out = _apply(SimbaMLP((4, 4), "relu"), params, X)
    h = X @ params["embed"]["kernel"] + params["embed"]["bias"]
    for i in range(2):
        block = params[f"block_{i}"]
        y = _layer_norm(h, block["LayerNorm_0"]["scale"], block["LayerNorm_0"]["bias"])
        y = np.maximum(y @ block["Dense_0"]["kernel"] + block["Dense_0"]["bias"], 0.0)
        h = h + y @ block["Dense_1"]["kernel"] + block["Dense_1"]["bias"]
    np.testing.assert_allclose(out, _layer_norm(h), rtol=1e-5, atol=1e-5)
    assert out.shape == (4, 4)


def test_a_simba_block_whose_last_layer_is_zero_passes_its_input_on_exactly():
    params = _simba_params(np.random.default_rng(2), width=3, blocks=3, inner_zero=True)
    block = {
        k: jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), v)
        for k, v in params["block_0"].items()
    }
    x = jnp.asarray(np.random.default_rng(3).normal(size=(4, 3)), jnp.float32)
    np.testing.assert_array_equal(SimbaBlock("tanh").apply({"params": block}, x), x)
    embedded = X @ params["embed"]["kernel"] + params["embed"]["bias"]
    out = _apply(SimbaMLP((3, 3, 3)), params, X)
    np.testing.assert_allclose(out, _layer_norm(embedded), rtol=1e-5, atol=1e-5)


def test_a_simplicial_embedding_is_a_softmax_per_group_at_its_temperature():
    # Groups of 2: softmax([0, ln 3]) = [1/4, 3/4]; at temperature 1/2, [0, 2 ln 3]: [1/10, 9/10].
    z = jnp.array([[0.0, math.log(3.0), 5.0, 5.0], [-1.0, -1.0, 0.0, math.log(9.0) / 2]])
    np.testing.assert_allclose(
        simplicial_embedding(z, 2), [[0.25, 0.75, 0.5, 0.5], [0.5, 0.5, 0.25, 0.75]], rtol=1e-6
    )
    np.testing.assert_allclose(
        simplicial_embedding(z[:1], 2, temperature=0.5), [[0.1, 0.9, 0.5, 0.5]], rtol=1e-6
    )
    # The default: groups of 8 at temperature 1, each on its own simplex.
    x = np.random.default_rng(5).normal(size=(3, 24)) * 4
    out = np.asarray(simplicial_embedding(jnp.asarray(x, jnp.float32)), np.float64)
    groups = np.exp(x.reshape(3, 3, 8))
    np.testing.assert_allclose(out, (groups / groups.sum(-1, keepdims=True)).reshape(3, 24), 1e-5)
    np.testing.assert_allclose(out.reshape(3, 3, 8).sum(-1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError) as info:
        simplicial_embedding(jnp.zeros((2, 12)))
    assert str(info.value) == "simplicial_embedding: width 12 is not a multiple of 8"


def _sem_params(rng, widths):
    hidden, fan_in = {}, 3
    for i, width in enumerate(widths[:-1]):
        hidden[f"Dense_{i}"] = _dense(rng, fan_in, width)
        fan_in = width
    norm = {"scale": rng.normal(size=widths[-1]), "bias": rng.normal(size=widths[-1])}
    params = {"project": _dense(rng, fan_in, widths[-1]), "norm": norm}
    return {**params, "hidden": hidden} if hidden else params


def _sem(params, x, act=np.tanh):
    """The sem torso in numpy: dense + ``act`` per hidden layer, then dense, LayerNorm and a
    softmax over each group of 8 units."""
    for i in range(len(params.get("hidden", {}))):
        dense = params["hidden"][f"Dense_{i}"]
        x = act(x @ dense["kernel"] + dense["bias"])
    z = x @ params["project"]["kernel"] + params["project"]["bias"]
    z = _layer_norm(z, params["norm"]["scale"], params["norm"]["bias"], eps=1e-6)
    groups = np.exp(z.reshape(*z.shape[:-1], -1, 8))
    return (groups / groups.sum(-1, keepdims=True)).reshape(z.shape)


def test_the_sem_torso_is_hidden_layers_then_a_dense_layer_on_simplices_of_8():
    params = _sem_params(np.random.default_rng(6), (5, 6, 16))
    out = _apply(SemMLP((5, 6, 16), "tanh"), params, X)
    np.testing.assert_allclose(out, _sem(params, X), rtol=1e-5, atol=1e-6)
    assert out.shape == (4, 16)
    np.testing.assert_allclose(out.reshape(4, 2, 8).sum(-1), 1.0, rtol=1e-6)
    assert np.all(out > 0)
    # One entry: no hidden layer, the inputs projected straight onto one simplex.
    params = _sem_params(np.random.default_rng(7), (8,))
    out = _apply(SemMLP((8,), "relu"), params, X)
    np.testing.assert_allclose(out, _sem(params, X), rtol=1e-5, atol=1e-6)


def test_a_ppo_config_with_the_sem_torso_feeds_each_head_the_simplices():
    config = PPOConfig(mlp="sem", policy_layers=(16, 16), value_layers=(12, 8), activation="tanh")
    net = compiled(make_network(config, HOPPER))
    params = jax.tree.map(lambda a: np.asarray(a, np.float64), net.init(jax.random.key(0)))
    assert sorted(params["policy"]["SemMLP_0"]) == ["hidden", "norm", "project"]
    obs = normal(jax.random.key(1), (5, 11))
    value = params["value"]
    features = _sem(value["SemMLP_0"], np.asarray(obs, np.float64))
    want = features @ value["Dense_0"]["kernel"][:, 0] + value["Dense_0"]["bias"][0]
    np.testing.assert_allclose(net.value(params, obs), want, rtol=1e-5, atol=1e-6)
    features = _sem(params["policy"]["SemMLP_0"], np.asarray(obs, np.float64))
    head = params["policy"]["head"]["Dense_0"]
    dist, _ = net.policy_step(params, (), obs, jnp.zeros(5, bool))
    np.testing.assert_allclose(
        dist["mean"], np.tanh(features @ head["kernel"] + head["bias"]), rtol=1e-5, atol=1e-6
    )


def test_normalized_features_have_unit_norm_and_zeros_stay_zero_with_finite_gradients():
    x = np.random.default_rng(4).normal(size=(5, 7)) * [[0.1], [1], [10], [100], [3]]
    out = np.asarray(normalize_features(jnp.asarray(x, jnp.float32)), np.float64)
    squares = (x**2).sum(-1, keepdims=True)
    np.testing.assert_allclose(out, x / np.sqrt(squares + FEATURE_NORM_EPS), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, rtol=1e-4)
    zero = jnp.zeros((1, 7))
    assert np.all(np.asarray(normalize_features(zero)) == 0.0)
    grad = jax.grad(lambda z: normalize_features(z).sum())(zero)
    assert np.all(np.isfinite(np.asarray(grad)))


def test_penultimate_norm_feeds_each_head_unit_norm_features():
    config = NetConfig(policy_layers=(5,), value_layers=(4,), activation="tanh")
    plain = compiled(make_network(config, CONT))
    normed = compiled(make_network(dataclasses.replace(config, penultimate_norm=True), CONT))
    params = plain.init(jax.random.key(0))
    assert jax.tree.structure(params) == jax.tree.structure(normed.init(jax.random.key(0)))
    obs = normal(jax.random.key(1), (6, 3))
    value = params["value"]
    h = np.tanh(obs @ value["MLP_0"]["Dense_0"]["kernel"] + value["MLP_0"]["Dense_0"]["bias"])
    h = h / np.sqrt((h**2).sum(-1, keepdims=True) + FEATURE_NORM_EPS)
    want = h @ value["Dense_0"]["kernel"][:, 0] + value["Dense_0"]["bias"][0]
    np.testing.assert_allclose(normed.value(params, obs), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(plain.value(params, obs), want)
    policy = params["policy"]
    h = np.tanh(obs @ policy["MLP_0"]["Dense_0"]["kernel"] + policy["MLP_0"]["Dense_0"]["bias"])
    h = h / np.sqrt((h**2).sum(-1, keepdims=True) + FEATURE_NORM_EPS)
    head = policy["head"]["Dense_0"]
    dist, _ = normed.policy_step(params, (), obs, jnp.zeros(6, bool))
    np.testing.assert_allclose(
        dist["mean"], np.tanh(h @ head["kernel"] + head["bias"]), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    ("mlp", "policy_keys"),
    [
        ("plain", ["MLP_0", "head"]),
        ("layernorm", ["LayerNormMLP_0", "head"]),
        ("simba", ["SimbaMLP_0", "head"]),
        ("sem", ["SemMLP_0", "head"]),
    ],
)
def test_every_vector_torso_shapes_and_its_parameters(mlp, policy_keys):
    config = NetConfig(mlp=mlp, policy_layers=(8, 8), value_layers=(16,), penultimate_norm=True)
    net = compiled(make_network(config, HOPPER))
    params = net.init(jax.random.key(0))
    assert sorted(params["policy"]) == policy_keys
    torso = params["value"][policy_keys[0]]
    if mlp == "simba":
        assert sorted(torso) == ["block_0", "embed", "norm"]
        assert torso["block_0"]["Dense_0"]["kernel"].shape == (16, 64)  # 4x the width
    if mlp == "sem":  # one entry: no hidden layer
        assert sorted(torso) == ["norm", "project"]
        assert torso["project"]["kernel"].shape == (11, 16)
    dist, _ = net.policy_step(params, (), jnp.ones((5, 11)), jnp.zeros(5, bool))
    assert dist["mean"].shape == (5, 3) and net.value(params, jnp.ones((2, 5, 11))).shape == (2, 5)


@pytest.mark.parametrize("mlp", ["layernorm", "simba", "sem"])
def test_every_vector_torso_under_a_gru_and_a_shared_encoder(mlp):
    spec = EnvSpec.from_spaces(DICT_OBS, spaces.Discrete(3))
    config = ImageNetConfig(
        network="recurrent",
        shared_torso=True,
        mlp=mlp,
        penultimate_norm=True,
        policy_layers=(8, 8, 6),
        value_layers=(16, 16),
    )
    net = compiled(make_network(config, spec))
    params = net.init(jax.random.key(0))
    assert "torso" in params and "gru" in params["policy"]
    _together_equal_apart(net, params)


def test_a_bad_mlp_or_layers_it_cannot_build_from_is_one_line():
    for config_class in (PPOConfig, A2CConfig, NetworkConfig):
        with pytest.raises(ValueError) as info:
            config_class(mlp="resnet")
        assert str(info.value) == (
            "mlp='resnet': unknown vector torso. Choose one of: plain, layernorm, simba, sem."
        )
    with pytest.raises(ValueError) as info:
        PPOConfig(mlp="nature")  # a CNN is no vector torso
    assert str(info.value).startswith("mlp='nature': unknown vector torso. Choose one of: plain")
    with pytest.raises(ValueError) as info:
        PPOConfig(mlp="simba", policy_layers=(64, 64), value_layers=(64, 32))
    assert str(info.value) == (
        "mlp='simba' with value_layers=[64, 32]: SimBa builds one residual block per entry, all "
        "of one width: repeat one width (e.g. [64, 64] for two blocks of 64)"
    )
    with pytest.raises(ValueError, match=r"^mlp='simba' with policy_layers\[:-1\]=\[\]: SimBa"):
        PPOConfig(mlp="simba", network="recurrent", policy_layers=(64,), value_layers=(64,))
    # The GRU's size may differ from the blocks': the torso takes the layers before it.
    assert PPOConfig(mlp="simba", network="recurrent", policy_layers=(8, 8, 6), value_layers=(4,))
    with pytest.raises(ValueError, match=r"^mlp='simba' with policy_layers=\[\]"):
        make_network(NetConfig(mlp="simba", policy_layers=(), value_layers=(4,)), CONT)
    with pytest.raises(ValueError) as info:
        PPOConfig(mlp="sem", policy_layers=(64, 60), value_layers=(64, 64))
    assert str(info.value) == (
        "mlp='sem' with policy_layers=[64, 60]: SEM splits the last layer into simplices of 8 "
        "units: end the layers with a multiple of 8 (e.g. [64, 64])"
    )
    # The GRU's size may be any: the simplices are the torso's, before it.
    assert PPOConfig(mlp="sem", network="recurrent", policy_layers=(8, 16, 6), value_layers=(8,))
    with pytest.raises(ValueError, match=r"^mlp='sem' with policy_layers\[:-1\]=\[\]: SEM"):
        PPOConfig(mlp="sem", network="recurrent", policy_layers=(64,), value_layers=(64,))
    with pytest.raises(ValueError, match=r"^mlp='sem' with value_layers=\[\]: SEM"):
        make_network(NetConfig(mlp="sem", policy_layers=(8,), value_layers=()), CONT)


@pytest.mark.parametrize(
    ("overrides", "network"),
    [
        (["mlp=layernorm"], ("layernorm", "tanh", False)),
        (["mlp=simba", "activation=relu"], ("simba", "relu", False)),
        (["mlp=sem"], ("sem", "tanh", False)),
        (["penultimate_norm=true"], ("plain", "tanh", True)),
    ],
)
@pytest.mark.usefixtures("cold_training_programs")  # its runs are two iterations each
def test_pendulum_trains_with_each_lever_to_finite_losses(overrides, network):
    # 2 iterations of 8 envs x 8 steps: the preset's networks, a smaller batch and update.
    batch = ["num_agents=8", "rollout_length=8", "update_epochs=2", "num_minibatches=2"]
    settings = ["steps=128", "eval_every=0", *batch, *overrides]
    result = batchppo.train("pendulum_jax", overrides=settings, progress="none")
    config = result.config
    assert (config.mlp, config.activation, config.penultimate_norm) == network
    assert result.step == 128 and [r["step"] for r in result.records] == [64, 128]
    for record in result.records:
        for name in ("loss", "policy_loss", "value_loss"):
            assert math.isfinite(record[name]), (name, record)

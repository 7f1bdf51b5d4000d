"""The torso registry: each built-in record's ``min_side`` is its module's, a config's ``cnn`` is
checked against the registry's image torsos, a torso registered from outside the package
builds, in its own layout, with nothing else changed, and a user's package's torso trains from
the command line through an entry point. The vector torsos' math and the config's ``mlp`` are
tested in test_networks.py."""

import dataclasses
import os
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cold_programs import compiled

from batchppo import cli
from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.networks.encoders import check_cnn
from batchppo.algorithms.networks.networks import make_network
from batchppo.algorithms.networks.torsos import (
    TORSOS,
    fitting,
    get_torso,
    register_torso,
    torso_names,
)
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.core import spaces
from batchppo.core.env import EnvSpec
from batchppo.core.keys import host_key
from batchppo.experiment.artifacts.loading import load_run
from batchppo.experiment.trainers import INIT_KEY


def test_the_built_in_torsos_in_their_order():
    assert torso_names() == torso_names("image") == ("nature", "impala", "minatar")
    assert torso_names("vector") == ("plain", "layernorm", "simba", "sem")
    assert [TORSOS[name].min_side for name in torso_names()] == [36, 1, 3]
    assert {torso.layout for torso in TORSOS.values()} == {"hwc"}
    assert fitting(84, 84) == ["nature", "minatar", "impala"]
    assert fitting(10, 40) == ["minatar", "impala"] and fitting(2, 2) == ["impala"]


def _dense_inputs(torso, side):
    """The width of the input of the torso's final dense layer on a side x side image."""
    module = torso.build("torso", dense=8)
    image = jax.ShapeDtypeStruct((1, side, side, 2), jnp.float32)
    params = jax.eval_shape(module.init, jax.random.key(0), image)  # shapes only: no compile
    dense = [k for k in params["params"] if k.startswith("Dense")]
    return params["params"][dense[-1]]["kernel"].shape[0]


@pytest.mark.parametrize("name", ["nature", "impala", "minatar"])
def test_min_side_is_the_smallest_image_the_module_leaves_a_cell_of(name):
    torso = get_torso(name)
    assert _dense_inputs(torso, torso.min_side) > 0
    if torso.min_side > 1:
        assert _dense_inputs(torso, torso.min_side - 1) == 0


def test_configs_check_cnn_against_the_registry():
    for config_class in (PPOConfig, A2CConfig):
        with pytest.raises(ValueError) as info:
            config_class(cnn="natrue")
        assert str(info.value) == (
            "cnn='natrue': unknown image torso. Did you mean 'nature'? Choose one of: nature, "
            "impala, minatar."
        )
    with pytest.raises(ValueError, match=r"^cnn='lenet': unknown image torso\. Choose one of"):
        get_torso("lenet")
    with pytest.raises(ValueError, match=r"^cnn='plain': unknown image torso\. Choose one of: n"):
        PPOConfig(cnn="plain")  # a vector torso is no CNN
    with pytest.raises(ValueError, match=r"^mlp='nature': unknown vector torso\. Choose one of: p"):
        PPOConfig(mlp="nature")
    with pytest.raises(ValueError, match="takes='audio'"):
        register_torso("other", nn.Dense, takes="audio", description="bad input")
    with pytest.raises(ValueError, match="registered already"):
        register_torso("nature", nn.Dense, min_side=1, description="again")
    with pytest.raises(ValueError, match="layout='whc'"):
        register_torso("other", nn.Dense, min_side=1, layout="whc", description="bad layout")


class _ChannelsFirst(nn.Module):
    """A plug-in torso that takes its images channels first: a dense layer on their mean."""

    dense: int = 4

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        assert x.shape[1] == 2, x.shape  # (B, C, H, W): the encoder put it in CHW
        return nn.Dense(self.dense)(x.mean(axis=(2, 3)))


@pytest.fixture
def plug_in():
    torso = register_torso(
        "plug_in", _ChannelsFirst, min_side=5, layout="chw", description="a test's own"
    )
    yield torso
    del TORSOS["plug_in"]


def test_a_registered_torso_is_a_cnn_of_every_config(plug_in):
    assert torso_names()[-1] == "plug_in" and fitting(6, 6)[0] == "plug_in"
    config = dataclasses.replace(PPOConfig(network="feed_forward", cnn_dense=3), cnn="plug_in")
    spec = EnvSpec.from_spaces(spaces.box((8, 8, 2), np.uint8, 0, 255), spaces.Discrete(3))
    net = compiled(make_network(config, spec))
    params = net.init(jax.random.key(0))
    assert params["policy"]["encoder"]["cnn_0"]["Dense_0"]["kernel"].shape == (2, 3)
    dist, _ = net.policy_step(params, (), jnp.zeros((4, 8, 8, 2), jnp.uint8), jnp.zeros(4, bool))
    assert dist["logits"].shape == (4, 3)
    with pytest.raises(spaces.UnsupportedSpaceError) as info:
        check_cnn("plug_in", (4, 4, 2), "hwc", "")
    assert str(info.value).endswith("use cnn='minatar' (fits: ['minatar', 'impala']).")


USER_TORSO = '''
"""A user's torso package: importing it registers the vector torso "tower"."""

import flax.linen as nn

from batchppo.algorithms.networks.networks import ACTIVATION_FUNCTIONS
from batchppo.algorithms.networks.torsos import register_torso


class Tower(nn.Module):
    """Dense layers named by storey."""

    layers: tuple
    activation: str = "relu"

    @nn.compact
    def __call__(self, x):
        for i, size in enumerate(self.layers):
            x = ACTIVATION_FUNCTIONS[self.activation](nn.Dense(size, name=f"storey_{i}")(x))
        return x


register_torso("tower", Tower, takes="vector", description="a user's dense layers")
'''


@pytest.fixture
def fresh_torsos():
    """The torso registry loads its entry points again, and forgets the user's afterwards."""
    TORSOS.forget_entry_points()
    yield
    TORSOS.forget_entry_points()


@pytest.mark.usefixtures("cold_training_programs")  # its run is a few iterations
def test_a_users_torso_trains_from_the_cli_through_an_entry_point(
    install_package, fresh_torsos, tmp_path
):
    install_package(
        "usertorso", {"batchppo.torsos": {"tower": "usertorso"}}, {"usertorso": USER_TORSO}
    )
    assert "tower" not in TORSOS.registered()  # nothing imported the package
    logdir = tmp_path / "logs"
    code = cli.main(
        [
            "train", "--config", "cartpole_jax", "--set", "mlp=tower", "--set", "steps=2048",
            "--set", "policy_layers=[8, 8]", "--set", "value_layers=[4]",
            "--logdir", str(logdir), "--progress", "none",
        ]
    )  # fmt: skip
    assert code == 0
    (run_dir,) = logdir.iterdir()
    config, trainer, state, step = load_run(run_dir)
    try:
        initial = trainer.init(host_key(config.seed, INIT_KEY)).params
    finally:
        trainer.close()
    assert config.mlp == "tower" and step == 2048
    policy, value = state.params["policy"], state.params["value"]
    assert sorted(policy) == ["Tower_0", "head"] and sorted(value) == ["Dense_0", "Tower_0"]
    assert policy["Tower_0"]["storey_1"]["kernel"].shape == (8, 8)
    assert value["Tower_0"]["storey_0"]["kernel"].shape == (4, 4)  # CartPole's 4 observations
    trained = policy["Tower_0"]["storey_0"]["kernel"]
    assert not np.allclose(trained, initial["policy"]["Tower_0"]["storey_0"]["kernel"])


def test_the_cli_prints_a_broken_torso_entry_point_as_one_warning_line(install_package, tmp_path):
    broken = 'raise ImportError("no towers here\\n(a second line that the warning leaves out)")\n'
    site = install_package("brokentorso", {"batchppo.torsos": {"tower": "brokentorso"}}, {
        "brokentorso": broken
    })  # fmt: skip
    paths = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    argv = ["train", "--config", "cartpole_jax", "--set", "mlp=tower", "--logdir", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "batchppo", *argv],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "batchppo: warning: torso entry point 'tower' (brokentorso) of group 'batchppo.torsos' "
        "failed to load, its torsos are unavailable: ImportError: no towers here\n"
        "batchppo: error: invalid config: mlp='tower': unknown vector torso. Choose one of: "
        "plain, layernorm, simba, sem.\n"
    )

"""A config's ``env_wrappers`` (issue 42): Gymnasium wrappers by import path, checked where a
run starts and applied in every env a run builds, on MiniGrid (its Dict observation holds a
text leaf no network takes)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from batchppo import cli
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.training.trainer import make_run_eval_env
from batchppo.envs import make
from batchppo.envs.stack.env_wrappers import wrapper_specs
from batchppo.experiment.artifacts import export, visualize
from batchppo.experiment.config import configs, env_checks, recipes

pytest.importorskip("minigrid")

MINIGRID = "minigrid:MiniGrid-Empty-5x5-v0"
IMAGE = spaces.Box(0, 255, (7, 7, 3), np.uint8)
CHOICES = "['drop_keys', 'keep_keys']"


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            ["minigrid.wrappers.ImgObsWrapperX"],
            "env_wrappers: cannot import 'minigrid.wrappers.ImgObsWrapperX' (AttributeError: "
            "module 'minigrid.wrappers' has no attribute 'ImgObsWrapperX'): give a wrapper's "
            "import path such as 'minigrid.wrappers.ImgObsWrapper' (its package installed), or "
            f"one of {CHOICES}",
        ),
        (
            ["ImgObsWrapper"],
            "env_wrappers: 'ImgObsWrapper' is not an import path: give 'package.module.Name' "
            f"(or 'package.module:Name'), or one of {CHOICES}",
        ),
        (
            ["minigrid.wrappers.__name__"],
            "env_wrappers: 'minigrid.wrappers.__name__' is a str, not a wrapper class or "
            "function called with the env",
        ),
        (
            [{"minigrid.wrappers.ImgObsWrapper": {"size": 3}}],
            "env_wrappers: minigrid.wrappers.ImgObsWrapper(env) cannot be called with the env "
            "and {'size': 3} (got an unexpected keyword argument 'size'): fix its keyword "
            "arguments",
        ),
        (
            [{"a.b": 1, "c.d": 2}],
            "env_wrappers: entry {'a.b': 1, 'c.d': 2}: give an import path "
            "('minigrid.wrappers.ImgObsWrapper') or a one-key mapping of a path to its keyword "
            "arguments ({path: {name: value}}; {keep_keys: [key, ...]} and {drop_keys: [key, "
            "...]} for Dict observations)",
        ),
    ],
)
def test_bad_entries_are_one_line_naming_the_fix(entries, message):
    with pytest.raises(ValueError) as info:
        wrapper_specs(entries, check=True)
    assert str(info.value) == message


def test_wrappers_apply_in_the_workers_and_pick_dict_keys():
    with make(MINIGRID, 2, seed=0, wrappers=["minigrid.wrappers.ImgObsWrapper"]) as env:
        assert env.single_observation_space == IMAGE
        obs, _ = env.reset(seed=0)
        assert (obs.shape, obs.dtype) == ((2, 7, 7, 3), np.uint8)
    with make(MINIGRID, 2, seed=0, backend="sync", wrappers=[{"drop_keys": ["mission"]}]) as env:
        assert list(env.single_observation_space.spaces) == ["direction", "image"]
    with make(MINIGRID, 1, seed=0, backend="sync", wrappers=[{"keep_keys": ["image"]}]) as env:
        assert list(env.single_observation_space.spaces) == ["image"]


def test_a_configs_wrappers_reach_the_probe_the_eval_env_export_and_the_video_env():
    config = PPOConfig(
        env=MINIGRID,
        backend="sync",
        num_agents=2,
        env_wrappers=("minigrid.wrappers.ImgObsWrapper",),
    )
    assert configs.config_from_yaml(configs.config_to_yaml(config)) == config
    assert env_checks.check_env(config).observation_space == IMAGE
    env = make_run_eval_env(config, 2)
    try:
        assert env.spec.obs_space.shape == (7, 7, 3)
    finally:
        env.close()
    assert export.host_mapping(config).obs_space.shape == (7, 7, 3)  # the ONNX model's input
    render = visualize.make_render_env(config, MINIGRID)
    try:
        assert render.observation_space.shape == (7, 7, 3)  # under the standard stack
    finally:
        render.close()
    with pytest.raises(ValueError, match=r"^env_wrappers: Gymnasium wrappers apply to the "):
        PPOConfig(env="CartPole-v1", backend="gymnax", env_wrappers=("a.b",))


def test_train_takes_wrappers_from_set_and_refuses_a_bad_one_in_one_line(capsys, tmp_path):
    logdir = tmp_path / "logs"
    argv = ["train", "--env", MINIGRID, "--logdir", str(logdir), "--progress", "none"]
    code = cli.main([*argv, "--set", "env_wrappers=[{drop_keys: [mision]}]"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"batchppo: error: env {MINIGRID!r}: env_wrappers: drop_keys ['mision']: the "
        "observation's keys are ['direction', 'image', 'mission']; drop some of them and keep "
        "at least one (--debug shows the traceback)\n"
    )
    assert not logdir.exists()
    # The recipe reads the wrapped spaces: a Dict of a Discrete and a grid of codes.
    config, message = recipes.recipe_for_env(MINIGRID, None, [{"drop_keys": ["mission"]}])
    assert config.env_wrappers == ()  # the override, applied after the recipe, records it
    assert message.startswith(f"no --config: {MINIGRID} has a grid of codes")

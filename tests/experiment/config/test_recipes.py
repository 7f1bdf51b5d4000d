"""Starting recipes: the config of a run given an env and no config, chosen from its spaces."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from batchppo.experiment.config import configs, recipes


def test_recipes_by_spaces(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    config, message = recipes.recipe_for_env("myenvs:make_reach", {"size": 2.0})
    assert config == dataclasses.replace(
        configs.get_preset("walker_fast"), env="myenvs:make_reach", env_kwargs={"size": 2.0}
    )
    assert message.endswith("max_length=1000 bounds its episodes (--set max_length=N)")
    assert [r.preset for r in recipes.RECIPES] == [
        "walker_fast", "cartpole_jax", "cartpole_jax", "breakout_atari", "breakout_minatar",
        "walker_fast", "cartpole_jax",
    ]  # fmt: skip
    # Images of Atari's size: the Atari recipe without its whole-game evaluation env. The env
    # has no TimeLimit, and the preset keeps the env's own: max_length is the recipes' 1000.
    config, message = recipes.recipe_for_env("myenvs:make_frames")
    assert config == dataclasses.replace(
        configs.get_preset("breakout_atari"),
        env="myenvs:make_frames",
        env_kwargs={},
        eval_env_kwargs={},
        max_length=1000,
    )
    assert message == (
        "no --config: myenvs:make_frames has image observations (36 px or more a side), so "
        "the run starts from the breakout_atari recipe (10,000,000 steps); the env declares no "
        "time limit (no max_episode_steps): max_length=1000 bounds its episodes (--set "
        "max_length=N)"
    )
    # Images too small for the Nature CNN (8x8): the MinAtar recipe, in worker processes.
    config, message = recipes.recipe_for_env("myenvs:make_pixels")
    assert config == dataclasses.replace(
        configs.get_preset("breakout_minatar"),
        env="myenvs:make_pixels",
        backend="process",
        max_length=1000,
    )
    assert message.startswith("no --config: myenvs:make_pixels has small image observations")
    # A Dict observation with a Discrete action: the generic network, per-leaf encoders.
    config, message = recipes.recipe_for_env("myenvs:make_nested")
    assert config == dataclasses.replace(
        configs.get_preset("cartpole_jax"),
        env="myenvs:make_nested",
        backend="process",
        network="feed_forward",
    )
    assert message == (
        "no --config: myenvs:make_nested has Dict observations and Discrete actions, so the run "
        "starts from the cartpole_jax recipe with network=feed_forward (an encoder per "
        "observation leaf, a head per action leaf) (300,000 steps); the env declares no time "
        "limit (no max_episode_steps): max_length=500 bounds its episodes (--set max_length=N)"
    )


def test_a_2d_box_observation_takes_the_vector_recipe(monkeypatch):
    """highway-env's Box(5, 5): a vector the MLPs take flattened, not a structured space."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1]))
    config, message = recipes.recipe_for_env("ecosystem_envs:make_grid2d")
    assert config == dataclasses.replace(
        configs.get_preset("cartpole_jax"), env="ecosystem_envs:make_grid2d", backend="process"
    )
    assert message == (
        "no --config: ecosystem_envs:make_grid2d has discrete actions (vector observations, "
        "Discrete actions), so the run starts from the cartpole_jax recipe (300,000 steps); the "
        "env declares no time limit (no max_episode_steps): max_length=500 bounds its episodes "
        "(--set max_length=N)"
    )
    # A vector observation with a MultiDiscrete action: the spaces as they are.
    config, message = recipes.recipe_for_env("ecosystem_envs:make_pick_many")
    assert config.network == "feed_forward"
    assert message.startswith(
        "no --config: ecosystem_envs:make_pick_many has Box (2,) observations and "
        "MultiDiscrete actions, so the run starts from the cartpole_jax recipe with "
        "network=feed_forward"
    )

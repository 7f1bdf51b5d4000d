"""Pure-JAX envs of other libraries by ``module:factory``: the API picks the fused backend,
the recipe follows the spaces, a factory of the wrong API is one line (issue 42)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from batchppo.backends import BraxEnv, GymnaxEnv, factory_backend, make_env
from batchppo.backends.factories import resolve_factory
from batchppo.core.simulation import init_sim_state, rollout
from batchppo.experiment.config import configs, recipes
from batchppo.experiment.run import training
from batchppo.testing import random_policy

HERE = Path(__file__).parent


@pytest.fixture
def factories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def test_the_api_names_the_backend(factories):
    import jax_factories as f

    assert factory_backend(f.cartpole()) == "gymnax"
    assert factory_backend(f.cartpole_env()) == "gymnax"
    assert factory_backend(f.inverted_pendulum()) == "brax"
    env = f.gymnasium_cartpole()
    assert factory_backend(env) is None
    env.close()


def test_a_gymnax_factory_steps_as_the_gymnax_id(factories):
    """``jax_factories:cartpole`` with ``max_steps_in_episode=7`` steps exactly as gymnax's
    ``CartPole-v1`` with the same change: the same obs, rewards and ends."""
    key = jax.random.key(4)
    run = jax.jit(rollout, static_argnums=(0, 1, 4))
    trajs = []
    for env_id in ("jax_factories:cartpole", "CartPole-v1"):
        env = make_env(env_id, 3, "gymnax", env_kwargs={"max_steps_in_episode": 7})
        assert isinstance(env, GymnaxEnv) and env.max_length == 7
        _, traj, _ = run(env, random_policy(env.spec), None, init_sim_state(env, (), key), 20)
        trajs.append(traj)
    assert bool(trajs[0].truncated.any())
    jax.tree.map(np.testing.assert_array_equal, trajs[0], trajs[1])


def test_recipes_of_pure_jax_factories(factories):
    config, message = recipes.recipe_for_env("jax_factories:cartpole_env")
    assert (config.backend, config.env, config.max_length) == (
        "gymnax",
        "jax_factories:cartpole_env",
        None,
    )
    assert config.network == configs.get_preset("cartpole_jax").network
    assert message == (
        "no --config: jax_factories:cartpole_env returns an env with gymnax's API, observations "
        "(4,), Discrete actions, so the run is fused on the gymnax backend from the "
        "cartpole_jax recipe (300,000 steps); the env's own time limit ends episodes"
    )
    config, message = recipes.recipe_for_env("jax_factories:inverted_pendulum")
    assert (config.backend, config.num_agents) == ("brax", 2048)
    assert "fused on the brax backend from the ant_brax recipe" in message
    # A Gymnasium factory keeps the host recipe.
    config, _ = recipes.recipe_for_env("jax_factories:gymnasium_cartpole")
    assert config.backend == "process"
    # The factory's keywords are the config's env_kwargs.
    config, _ = recipes.recipe_for_env("jax_factories:cartpole", {"gravity": 9.0})
    assert (config.backend, config.env_kwargs) == ("gymnax", {"gravity": 9.0})


def test_a_factory_of_the_wrong_api_is_one_line(factories):
    with pytest.raises(ValueError, match=r"set backend=process \(or leave the config out"):
        make_env("jax_factories:gymnasium_cartpole", 2, "gymnax")
    with pytest.raises(ValueError, match="returned gymnax's API; set backend=gymnax"):
        BraxEnv("jax_factories:cartpole_env", 2)
    with pytest.raises(ValueError, match="jax_factories has no 'nope'"):
        make_env("jax_factories:nope", 2, "gymnax")
    with pytest.raises(configs.ConfigError, match="env_wrappers wrap Gymnasium envs"):
        recipes.recipe_for_env("jax_factories:cartpole_env", env_wrappers=("a.b:C",))


@pytest.mark.timeout(300)
def test_train_a_gymnax_factory_from_its_recipe(factories, tmp_path):
    """``batchppo train --env jax_factories:cartpole_env``: fused, and it learns CartPole."""
    result = training.train(
        None,
        tmp_path,
        env="jax_factories:cartpole_env",
        overrides=["steps=65536", "eval_every=65536", "eval_episodes=8"],
        progress="none",
    )
    stored = configs.load_config(result.run_dir / "config.yaml")
    assert (stored.backend, stored.env) == ("gymnax", "jax_factories:cartpole_env")
    assert result.score is not None and result.score > 150, result.score


def test_spaces_of_a_library_s_own_classes(factories):
    """Libraries with gymnax's API carry copies of its spaces (Craftax): read by kind."""
    env = make_env("jax_factories:own_spaces_cartpole", 2, "gymnax")
    assert env.spec.discrete and env.spec.num_actions == 2


def test_backend_options_choose_the_restart_of_either_fused_backend(factories):
    """``backend_options: {autoreset: ...}`` reaches the adapter on both fused backends; the
    env's own keywords stay the factory's."""
    env = make_env("jax_factories:cartpole", 2, "gymnax", options={"autoreset": "cond"})
    assert env._autoreset == "cond"
    env = make_env("CartPole-v1", 2, "gymnax", options={"autoreset": "first"})
    assert env._autoreset == "first"
    env = make_env("CartPole-v1", 2, "gymnax")
    assert (env._autoreset, env._reset_ratio) == ("select", 16)  # RestartOptions' defaults
    env = make_env("jax_factories:inverted_pendulum", 2, "brax", options={"autoreset": "first"})
    assert env._autoreset == "first"
    assert make_env("jax_factories:inverted_pendulum", 2, "brax")._autoreset == "cond"
    options = {"autoreset": "optimistic", "reset_ratio": 4}
    for env_id, backend in (("CartPole-v1", "gymnax"), ("jax_factories:inverted_pendulum", "brax")):
        env = make_env(env_id, 8, backend, options=options)
        assert (env._autoreset, env._reset_ratio) == ("optimistic", 4)
    with pytest.raises(ValueError) as info:
        make_env("CartPole-v1", 2, "gymnax", options={"autoreset": "sometimes"})
    assert str(info.value) == (
        "backend_options.autoreset must be one of ('select', 'cond', 'first', 'optimistic'), got "
        "'sometimes'."
    )


def test_a_factory_of_a_package_not_installed_says_install_it():
    """A dotted module whose package is missing (craftax.craftax_env without craftax)."""
    with pytest.raises(ValueError) as info:
        resolve_factory("nopackage.envs:make")
    assert str(info.value) == (
        "env 'nopackage.envs:make': cannot import 'nopackage.envs' (No module named "
        "'nopackage'): install the package that provides 'nopackage', or put it on PYTHONPATH"
    )

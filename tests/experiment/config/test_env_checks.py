"""The start-up checks of a run's env: its backend, its id, its tracker and one env probed."""

from __future__ import annotations

import dataclasses

import pytest

from batchppo.experiment.config import configs, env_checks
from batchppo.experiment.errors import ConfigError


def test_a_missing_package_of_the_env_names_the_projects_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mujoco" else real(name, *a)
    )
    with pytest.raises(ConfigError) as info:
        env_checks.check_env(configs.get_preset("cheetah_fast"))
    assert str(info.value) == (
        "env 'HalfCheetah-v5' needs the mujoco package, not installed: "
        "`pip install 'batchppo[mujoco]'`"
    )
    env_checks.check_config_env_id(configs.get_preset("pendulum_fast"))


def test_check_config_env_id():
    env_checks.check_config_env_id(configs.get_preset("cartpole"))
    env_checks.check_config_env_id(configs.get_preset("cartpole_jax"))
    with pytest.raises(ConfigError, match=r"unknown Gymnasium env id 'CartPole-v9'.*'CartPole-v1'"):
        env_checks.check_config_env_id(
            dataclasses.replace(configs.get_preset("cartpole"), env="CartPole-v9")
        )
    with pytest.raises(ConfigError, match=r"unknown gymnax env id 'Pendulum'.*Pendulum-v1"):
        env_checks.check_config_env_id(
            dataclasses.replace(configs.get_preset("pendulum_jax"), env="Pendulum")
        )

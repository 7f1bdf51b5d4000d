"""The start-up checks of a run's env: its backend, its id, its tracker and one env probed."""

from __future__ import annotations

import dataclasses

import pytest

from batchppo.experiment import configs, env_checks
from batchppo.experiment.errors import ConfigError


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

"""The backend a trained policy is loaded with
(``batchppo.experiment.artifacts.loading.LOAD_WITH``)."""

from __future__ import annotations

import dataclasses

from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.experiment.artifacts import loading


def test_backends_with_envs_away_from_the_caller_load_with_their_in_process_twin():
    ray = PPOConfig(backend="ray", backend_options={"address": "auto", "num_workers": 4})
    assert loading.loading_config(ray) == dataclasses.replace(
        ray, backend="sync", backend_options={}
    )
    process = PPOConfig(backend="process", backend_options={"num_workers": 2})
    assert loading.loading_config(process) == dataclasses.replace(
        process, backend="sync", backend_options={}
    )
    for backend in ("sync", "gymnax"):  # not in the table: each loads with itself
        config = PPOConfig(backend=backend, env="Pendulum-v1")
        assert loading.loading_config(config) is config

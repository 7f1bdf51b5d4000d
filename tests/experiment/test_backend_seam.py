"""A backend registered from outside the package works everywhere, with no other change.

The fake backend below is a host backend that steps the ``sync`` backend's envs through its
own builder and its own env-id check: registering its record is all it takes for PPOConfig,
``make_env``, the experiment's env-id check, a ``batchppo.train`` run (config.yaml written and
read back, checkpoints), loading the trained policy and the visualize check to take it up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import batchppo
from batchppo import backends, envs
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.backends import HostEnv, make_env
from batchppo.backends.host import ProcessOptions, host_backend, make_host_env
from batchppo.envs import BatchEnv, WorkerOptions
from batchppo.envs.make import process_batch_env
from batchppo.experiment.artifacts import loading, visualize
from batchppo.experiment.config import configs, env_checks
from batchppo.experiment.errors import ConfigError, UserError

pytestmark = pytest.mark.timeout(300)

FAKE_IDS = ("Pendulum-v1",)
BUILT: list[tuple[str, int]] = []


def make_fake_env(env_id: str, num_envs: int, *, options: FakeOptions, **kwargs: Any) -> HostEnv:
    """The fake backend's builder: the sync backend's envs, recorded in ``BUILT``, with the
    fake options it was given (its own class) turned into the batch env's."""
    BUILT.append((env_id, num_envs))
    assert isinstance(options, FakeOptions)
    workers = WorkerOptions(max_restarts=options.max_restarts)
    return make_host_env(env_id, num_envs, backend="sync", options=workers, **kwargs)


def check_fake_id(env_id: str) -> None:
    """The fake backend knows fewer ids than Gymnasium."""
    if env_id not in FAKE_IDS:
        raise ValueError(f"unknown fake env id {env_id!r}; the fake backend has {FAKE_IDS}")


@dataclasses.dataclass(frozen=True)
class FakeOptions:
    """The fake backend's options: it restarts crashed envs."""

    max_restarts: int = 0


FAKE = backends.Backend(
    name="fake",
    make=make_fake_env,
    check_env_id=check_fake_id,
    host=True,
    description="a test's fake envs",
    options=FakeOptions,
)


@pytest.fixture
def fake_backend() -> Iterator[backends.Backend]:
    backends.register(FAKE)
    BUILT.clear()
    try:
        yield FAKE
    finally:
        del backends.BACKENDS["fake"]


def test_config_make_env_and_env_id_check_take_the_new_backend(fake_backend):
    config = PPOConfig(backend="fake", host_loop=True, backend_options={"max_restarts": 2})
    assert FAKE.supports_restarts
    assert config.backend == "fake"
    env_checks.check_config_env_id(config)
    with pytest.raises(ConfigError, match=r"^unknown fake env id 'CartPole-v1'"):
        env_checks.check_config_env_id(dataclasses.replace(config, env="CartPole-v1"))
    env = make_env("Pendulum-v1", 3, "fake", max_length=5, options={"max_restarts": 1})
    try:
        assert isinstance(env, HostEnv) and env.num_envs == 3 and env.spec.obs_shape == (3,)
        assert BUILT == [("Pendulum-v1", 3)]
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"^backend_options\.address: backend 'fake' has no opt"):
        make_env("Pendulum-v1", 3, "fake", options={"address": "auto"})
    with pytest.raises(UserError, match=r"cannot render 'Pendulum-v1' \(backend fake\)"):
        visualize.render_env_id(config)
    assert loading.loading_config(config) == config  # not in LOAD_WITH: loads with itself


def test_a_host_backend_with_a_batch_env_of_its_own_is_one_record():
    built: list[int] = []

    def my_batch_env(env_fns: list, **kwargs: Any) -> BatchEnv:
        built.append(len(env_fns))
        return process_batch_env(env_fns, **kwargs)

    mine = host_backend(
        "mine", description="my batch env", batch_env=my_batch_env, options=ProcessOptions
    )
    backends.register(mine)
    try:
        env = make_env("Pendulum-v1", 3, "mine", options={"num_workers": 1})
        env.close()
        assert isinstance(env, HostEnv) and built == [3]
        assert env.vector_env.worker_options == ProcessOptions(num_workers=1)
        # envs.make takes the factory itself, not the backend's name: envs/ knows no backend.
        options = WorkerOptions(num_workers=1)
        with envs.make("Pendulum-v1", 2, backend=my_batch_env, options=options, seed=0) as batch:
            assert batch.num_envs == 2 and built == [3, 2]
        with pytest.raises(ValueError, match=r"^backend must be one of \('process', 'sync'\)"):
            envs.make("Pendulum-v1", 2, backend="mine")
    finally:
        del backends.BACKENDS["mine"]


def test_without_the_record_the_name_is_refused():
    with pytest.raises(ValueError, match=r"backend='fake': choose one of \('process', "):
        PPOConfig(backend="fake")
    with pytest.raises(ValueError, match="unknown backend 'fake'"):
        make_env("Pendulum-v1", 3, "fake")


def test_a_tiny_train_run_and_its_policy(fake_backend, tmp_path: Path):
    config = PPOConfig(
        backend="fake",
        env="Pendulum-v1",
        num_agents=4,
        rollout_length=16,
        max_length=40,
        steps=128,
        update_epochs=1,
        policy_layers=(8,),
        value_layers=(8,),
        eval_episodes=2,
        eval_every=128,
        checkpoint_every=128,
    )
    result = batchppo.train(config, tmp_path, name="fake", timestamp="T", progress="none")
    assert result.step == 128 and result.score is not None
    assert BUILT == [("Pendulum-v1", 4), ("Pendulum-v1", 2)]  # the training and eval envs
    assert configs.load_config(tmp_path / "T-fake" / "config.yaml") == config
    policy = batchppo.load_policy(tmp_path / "T-fake")
    actions = policy(np.zeros((5, 3), np.float32))
    assert actions.shape == (5, 1)

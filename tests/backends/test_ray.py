"""The ``ray`` backend's batch env factory (``batchppo.backends.ray.ray_batch_env``): what it
refuses before any actor starts, through ``batchppo.envs.make`` and the backend's ``make_env``."""

from __future__ import annotations

import pytest

from batchppo.backends import get_backend, make_env
from batchppo.backends.host import builds_with_envs_make
from batchppo.backends.ray import ray_batch_env
from batchppo.envs import RayWorkerOptions, WorkerOptions, make


def test_ray_batch_env_refuses_another_autoreset_mode_and_restarts():
    with pytest.raises(ValueError) as info:
        make("CartPole-v1", 2, backend=ray_batch_env, autoreset_mode="NextStep")
    assert str(info.value) == (
        "autoreset_mode='NextStep': the ray backend has SAME_STEP only; use backend='process' "
        "or 'sync' for another autoreset mode."
    )
    with pytest.raises(ValueError) as info:
        RayWorkerOptions(max_restarts=1)
    assert str(info.value) == (
        "max_restarts=1: Ray env actors are not restarted; use the process or sync backend for "
        "env restarts"
    )
    with pytest.raises(TypeError, match=r"^options must be a batchppo.envs.RayWorkerOptions"):
        make("Pendulum-v1", 2, backend=ray_batch_env, options=WorkerOptions(max_restarts=1))


def test_the_ray_record_builds_with_envs_make_and_ray_batch_env():
    record = get_backend("ray")
    assert builds_with_envs_make(record)
    assert record.make.keywords == {"backend": ray_batch_env}
    # Ray's actors are not restarted: the backend has no such option.
    assert not record.supports_restarts
    with pytest.raises(ValueError, match=r"^backend_options\.max_restarts: backend 'ray' has no"):
        make_env("Pendulum-v1", 2, "ray", options={"max_restarts": 1})

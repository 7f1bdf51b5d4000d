"""WorkerOptions: BatchEnv's process and fault settings as one checked value, and Ray's
extension of them."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from envs_testlib import CountEnv
from gymnasium.vector import AsyncVectorEnv

from batchppo.envs import BatchEnv, RayWorkerOptions, WorkerOptions

pytestmark = pytest.mark.timeout(60)


def test_defaults_are_a_worker_per_cpu_failing_fast_without_a_time_limit():
    options = WorkerOptions()
    assert dataclasses.asdict(options) == {
        "num_workers": None,
        "envs_per_worker": None,
        "step_in_parent": False,
        "max_restarts": 0,
        "step_timeout": None,
        "spin_us": 50.0,
        "worker_spin_us": 1000.0,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.num_workers = 2  # type: ignore[misc]


def test_a_whole_step_timeout_becomes_float_seconds():
    assert WorkerOptions(step_timeout=3).step_timeout == 3.0
    assert type(WorkerOptions(step_timeout=3).step_timeout) is float


@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        ("num_workers", 0, "num_workers must be >= 1 (or None for the CPUs available), got 0."),
        ("num_workers", "4", "num_workers must be an int or None, got '4'."),
        ("num_workers", True, "num_workers must be an int or None, got True."),
        ("envs_per_worker", 2.0, "envs_per_worker must be an int or None, got 2.0."),
        ("envs_per_worker", 0, "envs_per_worker must be >= 1 (or None for an even split), got 0."),
        ("step_in_parent", 1, "step_in_parent must be a bool; got 1."),
        ("max_restarts", -1, "max_restarts must be an int >= 0; got -1."),
        ("max_restarts", 1.5, "max_restarts must be an int >= 0; got 1.5."),
        (
            "step_timeout",
            "5",
            "step_timeout must be a number of seconds > 0, or None to wait for ever; got '5'.",
        ),
        ("spin_us", -1.0, "spin_us must be a number of microseconds >= 0; got -1.0."),
        ("worker_spin_us", None, "worker_spin_us must be a number of microseconds >= 0; got None."),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(field, bad, message):
    with pytest.raises(ValueError) as info:
        WorkerOptions(**{field: bad})
    assert str(info.value) == message


def test_the_constructor_keeps_async_vector_envs_keywords_in_ten_parameters():
    ours = inspect.signature(BatchEnv).parameters
    theirs = inspect.signature(AsyncVectorEnv).parameters
    assert len(ours) <= 10
    assert set(theirs) <= set(ours)  # a drop-in: every AsyncVectorEnv keyword is taken
    assert list(ours)[:2] == ["env_fns", "worker_options"]


def test_worker_options_of_another_type_are_a_type_error():
    with pytest.raises(TypeError) as info:
        BatchEnv([CountEnv] * 2, 4)
    assert str(info.value) == (
        "worker_options must be a batchppo.envs.WorkerOptions or None; got 4 (int): pass, say, "
        "worker_options=WorkerOptions(num_workers=4)."
    )


def test_the_batch_env_uses_and_reports_its_options():
    options = WorkerOptions(num_workers=2, envs_per_worker=1, max_restarts=3, step_timeout=30)
    with BatchEnv([CountEnv] * 3, options, autoreset_mode="SameStep") as env:
        assert env.worker_options is options
        assert (env.max_restarts, env.step_timeout) == (3, 30.0)
        assert env.worker_envs == [(0, 1), (1, 2), (2, 3)]
        assert env.parent_envs is None
        env.reset(seed=0)
        obs, *_ = env.step_arrays(np.zeros((3, 1), np.float32))
        assert obs[:, 2].tolist() == [1, 1, 1]
    with BatchEnv(
        [CountEnv] * 3, WorkerOptions(num_workers=2, step_in_parent=True), autoreset_mode="SameStep"
    ) as env:
        assert env.parent_envs == (0, 2) and env.worker_envs == [(2, 3)]


def test_ray_worker_options_extend_them_and_hold_what_ray_actors_cannot_do():
    options = RayWorkerOptions(num_workers=2, envs_per_worker=3, address="auto")
    assert isinstance(options, WorkerOptions)
    assert (options.num_cpus, options.startup_timeout, options.step_timeout) == (0.5, 60.0, None)
    bad = {
        "step_in_parent": (True, "Ray actors step every env; use BatchEnv (backend process)"),
        "max_restarts": (1, "Ray env actors are not restarted; use the process or sync backend"),
        "spin_us": (5.0, "Ray actors answer through Ray's own calls, which do not spin"),
        "address": ("  ", "give host:port or auto, or None (RAY_ADDRESS, else a local Ray)"),
        "num_cpus": (-1.0, "must be >= 0 (CPUs per Ray env actor)"),
        "startup_timeout": (0.0, "must be > 0 (seconds), or None to wait for ever"),
        "num_workers": (0, None),  # WorkerOptions' own check
    }
    for name, (value, why) in bad.items():
        with pytest.raises(ValueError) as info:
            RayWorkerOptions(**{name: value})
        message = str(info.value)
        assert "\n" not in message
        if why is None:
            assert message == "num_workers must be >= 1 (or None for the CPUs available), got 0."
        else:
            assert message.startswith(f"{name}={value!r}: {why}"), message


def test_a_batch_env_refuses_ray_worker_options():
    with pytest.raises(
        TypeError,
        match=r"RayWorkerOptions are RayBatchEnv's; give BatchEnv a batchppo.envs.WorkerOptions\.$",
    ):
        BatchEnv([CountEnv] * 2, RayWorkerOptions())

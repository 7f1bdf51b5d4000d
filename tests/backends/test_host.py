"""The host backends' builder (``batchppo.backends.host.make_host_env``)."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from batchppo.backends import HostEnv, make_env
from batchppo.backends.host import ProcessOptions, SyncOptions
from batchppo.envs import BatchEnv, WorkerOptions

pytestmark = pytest.mark.timeout(120)


def test_a_host_env_is_reset_once_before_its_first_step(monkeypatch):
    # The learner's reset(key) is the first: the envs are not reset when built (its seeds
    # would be replaced), so the first observations come from the key alone.
    reset, seeds = BatchEnv.reset, []

    def counting(self, *, seed=None, options=None):
        seeds.append(seed)
        return reset(self, seed=seed, options=options)

    monkeypatch.setattr(BatchEnv, "reset", counting)
    env = make_env("Pendulum-v1", 2, "sync")
    try:
        assert isinstance(env, HostEnv) and seeds == []
        key = jax.random.key(7)
        _, obs = env.reset(key)
        assert seeds == [int(HostEnv.seed_from_key(key))] and obs.shape == (2, 3)
    finally:
        env.close()


def test_the_process_backend_hands_its_options_given_or_default_to_the_batch_env():
    env = make_env("Pendulum-v1", 2, "process", options={"num_workers": 1, "worker_spin_us": 7})
    try:
        options = env.vector_env.worker_options
        assert isinstance(options, ProcessOptions) and isinstance(options, WorkerOptions)
        assert (options.num_workers, options.max_restarts) == (1, 0)
        assert (options.spin_us, options.worker_spin_us) == (50.0, 7.0)
        assert options.step_timeout == 60.0  # a run bounds its workers; a bare BatchEnv does not
    finally:
        env.close()


def test_an_options_object_reaches_the_batch_env_as_it_is():
    options = SyncOptions(max_restarts=2)
    env = make_env("Pendulum-v1", 2, "sync", options=options)
    try:
        assert env.vector_env.worker_options is options
        assert env.vector_env.parent_envs == (0, 2) and env.vector_env.worker_envs == []
    finally:
        env.close()
    with pytest.raises(TypeError) as info:
        make_env("Pendulum-v1", 2, "sync", options=ProcessOptions())
    assert str(info.value).startswith("options=ProcessOptions(")
    assert str(info.value).endswith(
        ": backend 'sync' takes SyncOptions, a mapping of its keys, or None for its defaults"
    )


def test_the_process_options_refuse_bad_values_in_one_line():
    with pytest.raises(ValueError) as info:
        ProcessOptions(spin_us=-1.0)
    # WorkerOptions' own check (the one check of the setting), named as the config key.
    assert str(info.value) == (
        "backend_options.spin_us must be a number of microseconds >= 0; got -1.0."
    )
    with pytest.raises(ValueError) as info:
        ProcessOptions(num_workers=0)
    assert str(info.value) == (
        "backend_options.num_workers must be >= 1 (or None for the CPUs available), got 0."
    )
    # The sync backend's options hold the settings of workers it does not have.
    with pytest.raises(ValueError) as info:
        SyncOptions(step_timeout=5.0)
    assert str(info.value) == (
        "backend_options.step_timeout=5.0: the sync backend steps every env in the calling "
        "process, which cannot bound them; use the process backend for a timeout"
    )


@pytest.mark.parametrize(
    ("backend", "given", "placed"),
    [
        (
            "process",
            "{num_workers: 2, max_restarts: 1, step_timeout: 30}",
            ([(0, 1), (1, 2)], None),
        ),
        ("sync", "{max_restarts: 1}", ([], (0, 2))),
    ],
)
def test_backend_options_travel_from_a_config_to_the_worker_pool_as_one_object(
    monkeypatch, backend, given, placed
):
    from batchppo.algorithms.training.trainer import make_run_env
    from batchppo.core.backends import Backend
    from batchppo.experiment.config import configs

    overrides = [f"backend={backend}", "num_agents=2", f"backend_options={given}"]
    config = configs.apply_overrides(configs.get_preset("pendulum_fast"), overrides)
    parsed = config.parsed_backend_options  # the one parse, when the config was made
    assert type(parsed) is (ProcessOptions if backend == "process" else SyncOptions)
    assert parsed.max_restarts == 1
    # From the config to the workers nothing parses, builds or converts options again.
    made, parses = [], []
    post_init, check = WorkerOptions.__post_init__, Backend.check_options
    monkeypatch.setattr(WorkerOptions, "__post_init__", lambda o: made.append(o) or post_init(o))
    monkeypatch.setattr(Backend, "check_options", lambda b, g: parses.append(g) or check(b, g))
    monkeypatch.setattr(dataclasses, "asdict", lambda *a, **k: pytest.fail("asdict on the way"))
    env = make_run_env(config, config.num_agents)
    try:
        batch = env.vector_env
        assert batch.worker_options is parsed and batch._pool.options is parsed
        assert (batch.worker_envs, batch.parent_envs) == placed
        assert (batch.max_restarts, batch.step_timeout) == (1, parsed.step_timeout)
        assert made == [] and parses == []
    finally:
        env.close()

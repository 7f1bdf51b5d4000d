"""The host backends' builder (``batchppo.backends.host.make_host_env``)."""

from __future__ import annotations

import jax
import pytest

from batchppo.backends import HostEnv, make_env
from batchppo.envs import BatchEnv

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
        assert (options.num_workers, options.max_restarts) == (1, 0)
        assert (options.spin_us, options.worker_spin_us) == (50.0, 7.0)
        assert options.step_timeout == 60.0  # a run bounds its workers; a bare BatchEnv does not
    finally:
        env.close()


def test_the_process_options_refuse_bad_values_in_one_line():
    from batchppo.backends.host import ProcessOptions

    with pytest.raises(ValueError) as info:
        ProcessOptions(spin_us=-1.0)
    assert str(info.value) == "backend_options.spin_us=-1.0: must be >= 0 (microseconds)"
    with pytest.raises(ValueError) as info:
        ProcessOptions(num_workers=0)
    assert str(info.value) == (
        "backend_options.num_workers=0: must be >= 1, or None for one per core"
    )

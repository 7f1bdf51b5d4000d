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
    env = make_env("Pendulum-v1", 2, "sync", seed=3)
    try:
        assert isinstance(env, HostEnv) and seeds == []
        key = jax.random.key(7)
        _, obs = env.reset(key)
        assert seeds == [int(HostEnv.seed_from_key(key))] and obs.shape == (2, 3)
    finally:
        env.close()

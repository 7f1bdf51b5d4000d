"""The learner's device mesh (``algorithms/training/sharding.py``) on this process's one device.

A mesh of one device lays states out as a mesh of many would (its specs), so the rules run
here; that several devices compute what one does is ``tests/algorithms/ppo/test_sharding.py``
(fresh processes with forced devices). This file is not ``test_sharding.py``: that basename
is the PPO test's.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec

from batchppo.algorithms.training.sharding import AXIS, Sharding, learner_devices
from batchppo.core import init_sim_state
from batchppo.core.keys import raw_key
from batchppo.testing import MockEnv


def config(backend: str, devices: int | None, num_agents: int = 4) -> types.SimpleNamespace:
    return types.SimpleNamespace(backend=backend, devices=devices, num_agents=num_agents)


def test_learner_devices_follow_the_config_or_say_what_to_change():
    device = jax.devices()[0]
    assert learner_devices(config("gymnax", None)) == [device]
    assert learner_devices(config("gymnax", 1)) == [device]
    assert learner_devices(config("process", None)) == [device]
    with pytest.raises(ValueError) as error:
        learner_devices(config("sync", 2))
    assert str(error.value) == (
        "devices=2: backend='sync' steps its envs on the host and its learner runs on one "
        "device; set devices=1 (or None), or use a pure-JAX backend (gymnax, brax, jumanji)"
    )
    with pytest.raises(ValueError) as error:
        learner_devices(config("gymnax", 2))
    assert str(error.value) == "devices=2: only 1 JAX devices (cpu) exist; set devices to at most 1"


def test_the_env_axis_is_sharded_and_everything_else_replicated():
    # Two envs: the raw PRNG key of the sim state is (2,) too, and is replicated all the same.
    env = MockEnv((3, 5))
    ss = init_sim_state(env, (), raw_key(jax.random.key(0)))
    assert ss.key.shape == (2,)
    sharding = Sharding(jax.devices()[:1], env.num_envs)
    assert sharding.num_devices == 1
    specs = jax.tree.map(lambda s: s.spec, sharding.sim_state(ss))
    assert specs.obs == PartitionSpec(AXIS) and specs.first == PartitionSpec(AXIS)
    assert specs.score == PartitionSpec(AXIS) and specs.length == PartitionSpec(AXIS)
    assert specs.env_state.t == PartitionSpec(AXIS)
    assert specs.key == PartitionSpec()
    train_state = {"params": jnp.zeros((2, 8)), "step": jnp.zeros((), jnp.int32)}
    train_specs = jax.tree.map(lambda s: s.spec, sharding.train_state(train_state))
    assert train_specs == {"params": PartitionSpec(), "step": PartitionSpec()}
    assert sharding.minibatches.spec == PartitionSpec(None, AXIS)


def test_put_lays_a_state_out_with_its_values_unchanged():
    env = MockEnv((3, 5))
    ss = init_sim_state(env, (), raw_key(jax.random.key(0)))
    sharding = Sharding(jax.devices()[:1], env.num_envs)
    shardings = sharding.sim_state(ss)
    placed = sharding.put(ss, shardings)
    assert placed.obs.sharding == shardings.obs
    assert placed.key.sharding == sharding.replicated
    jax.tree.map(np.testing.assert_array_equal, placed, ss)

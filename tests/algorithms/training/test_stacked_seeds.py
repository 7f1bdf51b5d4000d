"""SeedsTrainer (``algorithms/training/stacked_seeds.py``): N seeds in one program equal N
separate runs.

The counting agent (``counting_agent.py``) samples its actions from its keys, so a seed's
observations, sampled actions and counts depend on its keys: equal states mean the seed's
computation is the separate run's. (The loop's ``--seeds``, a run dir per seed, is tested in
``tests/experiment/run/test_seed_runs.py``.)
"""

from __future__ import annotations

import dataclasses
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from counting_agent import Counter

from batchppo.algorithms.run_config import RunConfig
from batchppo.algorithms.training.episodes import ENDED
from batchppo.algorithms.training.stacked_seeds import (
    SeedsTrainer,
    SharedHostEnv,
    seeds_of,
    stack,
    unstack,
)
from batchppo.algorithms.training.trainer import Trainer
from batchppo.core.keys import host_key
from batchppo.experiment.artifacts.checkpoint import to_host

CONFIG = RunConfig(
    env="CartPole-v1", backend="gymnax", num_agents=3, max_length=5, steps=36, seed=5
)


def run(trainer, init_keys, sim_keys):
    """Init, fresh episodes and two iterations; the states on the host and the metrics."""
    ts = trainer.init(init_keys)
    ss = trainer.init_sim(ts, sim_keys)
    first = to_host(ss.obs)
    metrics = []
    for _ in range(2):
        ts, ss, m = trainer.iteration(ts, ss)
        metrics.append(m)
    return first, to_host(ts), to_host(ss), metrics


class UnrolledCounter(Counter):
    """The counting agent, declaring its update unrolled (as PPO does for a CNN on the CPU)."""

    unroll_update = True


def assert_seeds_equal_separate_runs(config: RunConfig, exact: bool, agent=Counter) -> SeedsTrainer:
    """Two seeds together equal two separate runs; returns the (closed) SeedsTrainer."""
    seeds = SeedsTrainer(config, 2, agent)
    assert seeds.seeds == [5, 6] and seeds.steps_per_iteration == 12
    init_keys = [host_key(s, 0) for s in seeds.seeds]
    sim_keys = [host_key(s, 1) for s in seeds.seeds]
    together = run(seeds, init_keys, sim_keys)
    seeds.close()
    first, ts, ss, metrics = together
    same = np.testing.assert_array_equal
    if not exact:
        same = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)  # noqa: E731
    for i, seed in enumerate([5, 6]):
        single = Trainer(dataclasses.replace(config, seed=seed), agent)
        alone = run(single, init_keys[i], sim_keys[i])
        single.close()
        same(unstack(first, i), alone[0])
        jax.tree.map(same, unstack((ts, ss), i), alone[1:3])
        np.testing.assert_equal([m[i] for m in metrics], alone[3])
    # Each seed's own keys: its sampling probability and its envs' observations differ.
    assert ts.p[0] != ts.p[1]
    assert not np.array_equal(ss.obs[0], ss.obs[1])
    assert ts.step.tolist() == [24, 24] and ts.reward_sum.tolist() == [24.0, 24.0]
    assert [m["episodes"] for m in metrics[1]] == [3.0, 3.0]
    # Each seed lists its own envs' episodes (compared with the separate runs' above).
    assert [m[ENDED].step.tolist() for m in metrics[1]] == [[15, 15, 15]] * 2
    return seeds


@pytest.mark.timeout(120)
def test_seeds_of_pure_jax_envs_equal_separate_runs():
    # Float leaves of the fused env (resets, physics) may differ in their last bits: the
    # programs are compiled differently (vmapped, other XLA options).
    assert_seeds_equal_separate_runs(CONFIG, exact=False)


@pytest.mark.timeout(120)
def test_fused_seeds_of_an_unrolled_update_run_one_after_another_bit_for_bit():
    # The single-seed programs serve every seed in turn: no vmapped program is built, and
    # each seed computes exactly what its separate run computes.
    seeds = assert_seeds_equal_separate_runs(CONFIG, exact=True, agent=UnrolledCounter)
    assert seeds.seed_after_seed
    programs = (seeds._init_program, seeds._init_sim_program, seeds._iteration_program)
    assert all(program.stage is None for program in programs)
    vmapped = SeedsTrainer(CONFIG, 2, Counter)
    assert not vmapped.seed_after_seed
    vmapped.close()
    host = SeedsTrainer(dataclasses.replace(CONFIG, backend="sync"), 2, UnrolledCounter)
    assert not host.seed_after_seed  # host envs: one shared env, stepped in one program
    host.close()


@pytest.mark.timeout(120)
def test_seeds_over_one_shared_host_env_equal_separate_runs():
    # Env j of seed s is reset with the seed a separate run of seed s gives its env j.
    assert_seeds_equal_separate_runs(dataclasses.replace(CONFIG, backend="sync"), exact=True)


@pytest.mark.timeout(120)
def test_over_host_envs_an_iteration_keeps_the_train_state_passed_in():
    seeds = SeedsTrainer(
        dataclasses.replace(CONFIG, backend="sync", backend_options={"max_restarts": 1}), 2, Counter
    )
    ts = seeds.init([host_key(s, 0) for s in seeds.seeds])
    ss = seeds.init_sim(ts, [host_key(s, 1) for s in seeds.seeds])
    new_ts, _, metrics = seeds.iteration(ts, ss)
    assert not ts.step.is_deleted() and ts.step.tolist() == [0, 0]
    assert ss.obs.is_deleted() and new_ts.step.tolist() == [12, 12]
    assert [m["env_restarts"] for m in metrics] == [0.0, 0.0]  # the shared envs' total
    seeds.close()


def test_seeds_are_the_configs_seed_counted_up():
    assert seeds_of(CONFIG, 3) == [5, 6, 7]
    with pytest.raises(ValueError, match="seeds=0: must be >= 1"):
        seeds_of(CONFIG, 0)


def test_stack_and_unstack_are_inverse_on_pytrees():
    states = [{"a": jnp.full((2,), i), "b": (jnp.asarray(float(i)),)} for i in range(3)]
    stacked = stack(states)
    assert stacked["a"].shape == (3, 2) and stacked["b"][0].tolist() == [0.0, 1.0, 2.0]
    for i, state in enumerate(states):
        jax.tree.map(np.testing.assert_array_equal, unstack(stacked, i), state)


@pytest.mark.timeout(120)
def test_keys_must_be_one_per_seed():
    seeds = SeedsTrainer(CONFIG, 2, Counter)
    with pytest.raises(ValueError, match="3 keys for 2 seeds"):
        seeds.init([host_key(0, i) for i in range(3)])
    seeds.close()


def test_several_seeds_train_on_one_device():
    with pytest.raises(ValueError, match=r"devices=2: several seeds train on one device"):
        SeedsTrainer(dataclasses.replace(CONFIG, num_agents=4, devices=2), 2, Counter)


@pytest.mark.timeout(120)
def test_host_loop_with_seeds_warns_and_steps_in_the_compiled_iteration():
    config = dataclasses.replace(CONFIG, backend="sync", host_loop=True)
    with pytest.warns(UserWarning, match="host_loop=True is not used with several seeds"):
        seeds = SeedsTrainer(config, 2, Counter)
    assert seeds.shared is not None and seeds.shared.env.num_envs == 6
    seeds.close()
    assert seeds.shared is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SeedsTrainer(dataclasses.replace(config, host_loop=False), 2, Counter).close()


def test_a_shared_host_env_must_split_evenly_into_seeds():
    with pytest.raises(ValueError, match="5 envs do not split into 2 seeds"):
        SharedHostEnv(types.SimpleNamespace(num_envs=5), 2)

"""HostLoop: the Python-loop host driver gives exactly what the in-graph rollout gives."""

import jax
import numpy as np
import pytest

from batchppo.backends.host_env import HostEnv
from batchppo.backends.host_loop import HostLoop
from batchppo.core.simulation import init_sim_state, rollout
from batchppo.testing import MockEnv, make_mock_vector_env, random_policy


def _raw(state):
    return state.replace(key=jax.random.key_data(state.key))  # typed keys are not NumPy arrays


@pytest.mark.timeout(120)
def test_host_loop_equals_in_graph_rollout_step_for_step():
    durations, terminate = (1, 2, 3, 5), (True, False, True, False)
    graph_env = HostEnv(make_mock_vector_env(durations, terminate))
    loop_env = HostEnv(make_mock_vector_env(durations, terminate))
    policy = random_policy(graph_env.spec)
    run = jax.jit(rollout, static_argnums=(0, 1, 4))
    loop = HostLoop(loop_env, policy)
    graph_state = init_sim_state(graph_env, (), jax.random.key(5))
    loop_state = init_sim_state(loop_env, (), jax.random.key(5))
    for length in (7, 1, 7):  # each rollout continues from the carried state
        graph_state, graph_traj, graph_stats = run(graph_env, policy, None, graph_state, length)
        loop_state, loop_traj, loop_stats = loop.rollout(None, loop_state, length)
        # Same keys, so the same sampled actions; same envs, so the same everything else.
        jax.tree.map(np.testing.assert_array_equal, loop_traj, graph_traj)
        jax.tree.map(np.testing.assert_array_equal, loop_stats, graph_stats)
        jax.tree.map(np.testing.assert_array_equal, _raw(loop_state), _raw(graph_state))
    assert int(loop_state.env_state) == 15
    graph_env.close()
    loop_env.close()


def test_host_loop_rejects_pure_jax_envs_and_bad_lengths():
    with pytest.raises(TypeError, match="HostLoop drives a HostEnv"):
        HostLoop(MockEnv((2,)), random_policy(MockEnv((2,)).spec))
    env = HostEnv(make_mock_vector_env((2,)))
    loop = HostLoop(env, random_policy(env.spec))
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        loop.rollout(None, init_sim_state(env, (), jax.random.key(0)), 0)
    env.close()


@pytest.mark.timeout(60)
def test_host_loop_surfaces_env_errors_with_their_type():
    env = HostEnv(make_mock_vector_env((2, 3), fail_at_step={1: 2}))
    loop = HostLoop(env, random_policy(env.spec))
    state = init_sim_state(env, (), jax.random.key(0))
    with pytest.raises(Exception, match="step 2") as info:
        loop.rollout(None, state, 5)
    assert "JaxRuntimeError" not in type(info.value).__name__  # the env's own exception
    env.close()


def test_host_calls_chain_by_env_state_and_take_a_token_only_on_the_cpu(monkeypatch):
    # random_policy ignores the observations, so only the env state orders the host calls.
    envs = {}
    lowered = {}
    results = {}
    for backend in ("cpu", "gpu"):  # "gpu": the unordered form, run here on the CPU
        monkeypatch.setattr(jax, "default_backend", lambda b=backend: b)
        env = envs[backend] = HostEnv(make_mock_vector_env((2, 3, 4), (True, False, True)))
        policy = random_policy(env.spec)
        state = init_sim_state(env, (), jax.random.key(3))
        run = jax.jit(rollout, static_argnums=(0, 1, 4))
        lowered[backend] = run.lower(env, policy, None, state, 9).as_text()
        state, traj, stats = run(env, policy, None, state, 9)
        results[backend] = _raw(state), traj, stats
        env.close()
    assert "token" in lowered["cpu"] and "token" not in lowered["gpu"]
    jax.tree.map(np.testing.assert_array_equal, results["cpu"], results["gpu"])
    assert int(results["gpu"][0].env_state) == 9  # the counter came back through every call
    assert results["gpu"][1].terminated[:, 0].tolist() == [0, 1, 0, 1, 0, 1, 0, 1, 0]

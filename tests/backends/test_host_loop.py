"""HostLoop: the Python-loop host driver gives exactly what the in-graph rollout gives."""

import jax
import numpy as np
import pytest

from batchppo.backends.host_env import HostEnv
from batchppo.backends.host_loop import TRANSFERS, HostLoop, _Packing
from batchppo.core.simulation import init_sim_state, rollout
from batchppo.testing import MockEnv, make_mock_vector_env, random_policy


def _raw(state):
    return state.replace(key=jax.random.key_data(state.key))  # typed keys are not NumPy arrays


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transfer", TRANSFERS)
def test_host_loop_equals_in_graph_rollout_step_for_step(transfer):
    durations, terminate = (2, 3, 5, 6), (True, False, True, False)
    graph_env = HostEnv(make_mock_vector_env(durations, terminate))
    loop_env = HostEnv(make_mock_vector_env(durations, terminate))
    policy = random_policy(graph_env.spec)
    run = jax.jit(rollout, static_argnums=(0, 1, 4))
    loop = HostLoop(loop_env, policy, transfer=transfer)
    graph_state = init_sim_state(graph_env, (), jax.random.key(5))
    loop_state = init_sim_state(loop_env, (), jax.random.key(5))
    ended = []
    for length in (7, 1, 7):  # each rollout continues from the carried state
        graph_state, graph_traj, graph_stats = run(graph_env, policy, None, graph_state, length)
        loop_state, loop_traj, loop_stats = loop.rollout(None, loop_state, length)
        # Same keys, so the same sampled actions; same envs, so the same everything else.
        jax.tree.map(np.testing.assert_array_equal, loop_traj, graph_traj)
        jax.tree.map(np.testing.assert_array_equal, loop_stats, graph_stats)
        jax.tree.map(np.testing.assert_array_equal, _raw(loop_state), _raw(graph_state))
        ended.extend(np.asarray(graph_stats.done).any(axis=1).tolist())
    # Steps where no episode ended (their final observations stayed on the host) and others.
    # Step s ends an episode of env i where d_i divides s: steps 1, 7, 11 and 13 end none.
    assert [s for s, any_ended in enumerate(ended, 1) if not any_ended] == [1, 7, 11, 13]
    assert int(loop_state.env_state) == 15
    graph_env.close()
    loop_env.close()


def test_host_loop_rejects_pure_jax_envs_and_bad_lengths():
    with pytest.raises(TypeError, match="HostLoop drives a HostEnv"):
        HostLoop(MockEnv((2,)), random_policy(MockEnv((2,)).spec))
    env = HostEnv(make_mock_vector_env((2,)))
    with pytest.raises(ValueError, match=r"transfer='zip': choose one of \('arrays', 'packed'\)"):
        HostLoop(env, random_policy(env.spec), transfer="zip")
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


def test_a_step_sends_its_final_observations_only_where_an_episode_ended():
    env = HostEnv(make_mock_vector_env((2, 3)))
    loop = HostLoop(env, random_policy(env.spec))
    obs, final = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    reward, no, one = np.zeros(2, np.float32), np.zeros(2, bool), np.array([False, True])
    sent, layout = loop.send((obs, reward, no, no, final))
    assert sent[4] is None and sent[0] is obs and layout is None
    assert loop.send((obs, reward, one, no, final))[0][4] is final
    assert loop.send((obs, reward, no, one, final))[0][4] is final
    env.close()


def test_packing_gives_back_every_leaf_exactly():
    rng = np.random.default_rng(0)
    tree = {
        "frames": rng.integers(0, 256, (2, 4, 3, 3), dtype=np.uint8),
        "flags": np.array([[True, False, True]]),
        "small": np.array([-128, 5, 127], np.int8),
        "count": np.array([2**30 + 3, -7], np.int64),
        "x": rng.standard_normal((3, 2)).astype(np.float32),
        "y": np.array([np.pi, -0.0, np.inf]),  # float64, signed zero and infinity
        "none": None,
        "scalar": np.float32(2.5),
    }
    buffer = _Packing.pack(tree)
    assert buffer.dtype == np.uint8
    # What the arrays' own transfers give (float64 and int64 as 32 bits unless x64 is on).
    want = jax.jit(lambda t: t)(tree)
    assert buffer.nbytes == sum(leaf.nbytes for leaf in jax.tree.leaves(want))
    back = jax.jit(_Packing.unpack, static_argnums=1)(buffer, _Packing.layout(tree))
    assert back["none"] is None
    for name, leaf in want.items():
        if leaf is None:
            continue
        got = np.asarray(back[name])
        assert got.dtype == leaf.dtype and got.shape == leaf.shape, name
        np.testing.assert_array_equal(
            got.reshape(-1).view(np.uint8), np.asarray(leaf).reshape(-1).view(np.uint8)
        )

"""Exact done/reset patterns of simulate/rollout over mock envs, pure-JAX and host alike."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.backends.host_env import HostEnv
from batchppo.backends.host_loop import HostLoop
from batchppo.core.simulation import init_sim_state, rollout, simulate
from batchppo.testing import MockEnv, make_mock_vector_env, random_policy

NUM_STEPS = 12

# Hand-written episode ends over 12 steps: env i ends an episode every durations[i] steps.
DONE_1234 = [
    "111111111111",  # duration 1
    "010101010101",  # duration 2
    "001001001001",  # duration 3
    "000100010001",  # duration 4
]
DONE_24 = [
    "010101010101",  # duration 2
    "000100010001",  # duration 4
]


def _pattern(rows: list[str]) -> np.ndarray:
    """(T, num_envs) bool array from one string per env."""
    return np.array([[c == "1" for c in row] for row in rows]).T


def _expected(durations: tuple[int, ...], done_rows: list[str], terminate: tuple[bool, ...]):
    done = _pattern(done_rows)
    first = np.concatenate([np.ones((1, len(durations)), bool), done[:-1]], axis=0)
    steps = np.arange(NUM_STEPS)[:, None]
    index = np.arange(len(durations))[None, :]
    t_in_episode = steps % np.array(durations)[None, :]
    obs = 1000.0 * index + t_in_episode
    final_obs = obs + 1.0
    reward = t_in_episode + 1.0
    term = done & np.array(terminate)[None, :]
    trunc = done & ~np.array(terminate)[None, :]
    d = np.array(durations)[None, :]
    score = np.where(done, d * (d + 1) / 2, 0.0)
    length = np.where(done, d, 0)
    return dict(
        obs=obs,
        final_obs=final_obs,
        reward=reward,
        terminated=term,
        truncated=trunc,
        first=first,
        done=done,
        score=score,
        length=length,
    )


def _make_env(kind: str, durations, terminate, obs_shape=(2,)):
    if kind == "jax":
        return MockEnv(durations, terminate, obs_shape)
    return HostEnv(make_mock_vector_env(durations, terminate, obs_shape))


CASES = [
    ((1, 2, 3, 4), DONE_1234, (True, True, True, True)),
    ((1, 2, 3, 4), DONE_1234, (False, True, False, True)),
    ((2, 4), DONE_24, (True, False)),
    ((2, 4), DONE_24, (False, False)),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["jax", "host", "host_loop"])
@pytest.mark.parametrize(("durations", "done_rows", "terminate"), CASES)
def test_rollout_exact_done_reset_pattern(kind, durations, done_rows, terminate):
    env = _make_env(kind, durations, terminate)
    policy = random_policy(env.spec)
    state = init_sim_state(env, (), jax.random.key(3))
    if kind == "host_loop":  # the Python-loop driver over the same host env
        state, traj, stats = HostLoop(env, policy).rollout(None, state, NUM_STEPS)
    else:
        state, traj, stats = jax.jit(rollout, static_argnums=(0, 1, 4))(
            env, policy, None, state, NUM_STEPS
        )
    want = _expected(durations, done_rows, terminate)
    n = len(durations)
    assert traj.obs.shape == (NUM_STEPS, n, 2)
    np.testing.assert_array_equal(traj.obs[..., 0], want["obs"])
    np.testing.assert_array_equal(traj.obs[..., 1], want["obs"])
    np.testing.assert_array_equal(traj.final_obs[..., 0], want["final_obs"])
    np.testing.assert_array_equal(traj.reward, want["reward"])
    np.testing.assert_array_equal(traj.terminated, want["terminated"])
    np.testing.assert_array_equal(traj.truncated, want["truncated"])
    np.testing.assert_array_equal(traj.first, want["first"])
    np.testing.assert_array_equal(stats.done, want["done"])
    np.testing.assert_array_equal(stats.score, want["score"])
    np.testing.assert_array_equal(stats.length, want["length"])
    np.testing.assert_array_equal(stats.terminated, want["terminated"])
    np.testing.assert_array_equal(stats.truncated, want["truncated"])
    assert traj.action.shape == (NUM_STEPS, n, 1)
    assert bool(jnp.all(jnp.abs(traj.action) <= 1.0))
    # The carried state continues where the rollout stopped (12 steps into each cycle).
    np.testing.assert_array_equal(state.length, 12 % np.array(durations))
    np.testing.assert_array_equal(state.first, want["done"][-1])
    if kind != "jax":
        env.close()


@pytest.mark.timeout(60)
def test_rollout_in_two_halves_equals_one_rollout():
    env = MockEnv((1, 2, 3, 4), terminate=(True, False, True, False))
    policy = random_policy(env.spec)
    run = jax.jit(rollout, static_argnums=(0, 1, 4))
    start = init_sim_state(env, (), jax.random.key(0))
    _, whole, whole_stats = run(env, policy, None, start, NUM_STEPS)
    mid, first_half, s1 = run(env, policy, None, start, NUM_STEPS // 2)
    _, second_half, s2 = run(env, policy, None, mid, NUM_STEPS // 2)
    joined = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), first_half, second_half)
    jax.tree.map(np.testing.assert_array_equal, joined, whole)
    np.testing.assert_array_equal(jnp.concatenate([s1.score, s2.score]), whole_stats.score)


@pytest.mark.timeout(60)
def test_simulate_passes_carry_extras_and_first_to_policy():
    """The policy sees `first`, its carry threads through, and extras land in the transition."""
    env = MockEnv((2, 3))

    def counting_policy(params, carry, obs, first, key):
        # Recurrent-style: reset the counter where an episode starts.
        carry = jnp.where(first, 0, carry) + params
        action = jnp.zeros((obs.shape[0], 1), jnp.float32)
        return action, {"carry_seen": carry, "obs_seen": obs[:, 0]}, carry

    state = init_sim_state(env, jnp.zeros((2,), jnp.int32), jax.random.key(1))
    _, traj, _ = jax.jit(rollout, static_argnums=(0, 1, 4))(env, counting_policy, 1, state, 6)
    # Counter = steps into the episode + 1, restarting at each first observation.
    np.testing.assert_array_equal(
        traj.extras["carry_seen"], np.array([[1, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]).T
    )
    np.testing.assert_array_equal(traj.extras["obs_seen"], traj.obs[..., 0])


@pytest.mark.timeout(60)
def test_simulate_one_step_and_key_advances():
    env = MockEnv((1, 2))
    policy = random_policy(env.spec)
    state = init_sim_state(env, (), jax.random.key(0))
    np.testing.assert_array_equal(state.first, [True, True])
    np.testing.assert_array_equal(state.score, [0.0, 0.0])
    np.testing.assert_array_equal(state.length, [0, 0])
    nxt, tr, stats = simulate(env, policy, None, state)
    np.testing.assert_array_equal(tr.terminated, [True, False])
    np.testing.assert_array_equal(nxt.first, [True, False])
    np.testing.assert_array_equal(nxt.score, [0.0, 1.0])
    np.testing.assert_array_equal(nxt.length, [0, 1])
    np.testing.assert_array_equal(stats.score, [1.0, 0.0])
    assert not np.array_equal(jax.random.key_data(nxt.key), jax.random.key_data(state.key))
    # Actions of consecutive steps differ: the policy key is fresh every step.
    _, tr2, _ = simulate(env, policy, None, nxt)
    assert not np.array_equal(tr.action, tr2.action)


@pytest.mark.parametrize("obs_shape", [(), (3,), (2, 3)])
def test_rollout_obs_shapes(obs_shape):
    env = MockEnv((2, 3), obs_shape=obs_shape)
    state = init_sim_state(env, (), jax.random.key(0))
    _, traj, _ = rollout(env, random_policy(env.spec), None, state, 4)
    assert traj.obs.shape == (4, 2, *obs_shape)
    assert traj.final_obs.shape == (4, 2, *obs_shape)
    np.testing.assert_array_equal(
        traj.obs.reshape(4, 2, -1)[:, 1, 0], [1000.0, 1001.0, 1002.0, 1000.0]
    )


def test_rollout_rejects_bad_num_steps():
    env = MockEnv((2,))
    state = init_sim_state(env, (), jax.random.key(0))
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        rollout(env, random_policy(env.spec), None, state, 0)
    with pytest.raises(ValueError, match="static"):
        rollout(env, random_policy(env.spec), None, state, 2.5)

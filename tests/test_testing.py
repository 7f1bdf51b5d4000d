"""The mock envs and the random agent (`batchppo.testing`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.core.env import Env
from batchppo.testing import MockEnv, MockGymEnv, encode_obs, make_mock_vector_env, random_policy


def test_mock_env_step_by_step():
    env = MockEnv((1, 3), terminate=(True, False))
    assert isinstance(env, Env) and env.num_envs == 2
    state, obs = env.reset(jax.random.key(0))
    np.testing.assert_array_equal(obs, [[0.0, 0.0], [1000.0, 1000.0]])
    action = jnp.zeros((2, 1))
    got = []
    for _ in range(4):
        res = env.step(state, action, jax.random.key(0))
        got.append(
            (
                res.obs[:, 0].tolist(),
                res.final_obs[:, 0].tolist(),
                res.reward.tolist(),
                res.terminated.tolist(),
                res.truncated.tolist(),
            )
        )
        state = res.state
    assert got == [
        ([0.0, 1001.0], [1.0, 1001.0], [1.0, 1.0], [True, False], [False, False]),
        ([0.0, 1002.0], [1.0, 1002.0], [1.0, 2.0], [True, False], [False, False]),
        ([0.0, 1000.0], [1.0, 1003.0], [1.0, 3.0], [True, False], [False, True]),
        ([0.0, 1001.0], [1.0, 1001.0], [1.0, 1.0], [True, False], [False, False]),
    ]


def test_mock_gym_env_matches_mock_env():
    env = MockGymEnv(3, index=2, terminate=False, obs_shape=(2, 2))
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.full((2, 2), 2000.0, np.float32))
    steps = [env.step(np.zeros(1, np.float32)) for _ in range(3)]
    assert [float(s[0][0, 0]) for s in steps] == [2001.0, 2002.0, 2003.0]
    assert [s[1] for s in steps] == [1.0, 2.0, 3.0]
    assert [(s[2], s[3]) for s in steps] == [(False, False), (False, False), (False, True)]
    assert float(env.reset()[0][0, 0]) == encode_obs(2, 0)


def test_mock_gym_env_faults():
    env = MockGymEnv(5, fail_at_step=2, nan_reward_at_step=1)
    env.reset()
    assert np.isnan(env.step(0.0)[1])
    with pytest.raises(RuntimeError, match="MockGymEnv 0: injected failure at step 2"):
        env.step(0.0)
    env = MockGymEnv(5, nan_obs_at_step=1)
    env.reset()
    assert np.isnan(env.step(0.0)[0]).all()


def test_mock_vector_env_per_env_kwargs():
    vec = make_mock_vector_env((2, 2), terminate=False, discrete=True, nan_obs_at_step={1: 1})
    vec.reset()
    obs, *_ = vec.step(np.zeros(2, np.int64))
    assert not np.isnan(obs[0]).any() and np.isnan(obs[1]).all()
    vec.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(durations=()), "at least one env"),
        (dict(durations=(0, 2)), r"offending: \[0\]"),
        (dict(durations=(2, 3), terminate=(True,)), "one bool per env"),
    ],
)
def test_mock_env_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MockEnv(**kwargs)


def test_random_policy_continuous_and_discrete():
    env = MockEnv((2, 2, 2))
    obs = jnp.zeros((3, 2))
    action, extras, carry = random_policy(env.spec)(None, "carry", obs, None, jax.random.key(0))
    assert action.shape == (3, 1) and action.dtype == jnp.float32
    assert extras == {} and carry == "carry"
    keys = jax.random.split(jax.random.key(1), 200)
    many = jax.vmap(lambda k: random_policy(env.spec)(None, (), obs, None, k)[0])(keys)
    assert float(many.min()) >= -1.0 and float(many.max()) <= 1.0
    assert float(many.min()) < -0.9 and float(many.max()) > 0.9  # spans the range

    denv = MockEnv((2, 2, 2), discrete=True, num_actions=4)
    many = jax.vmap(lambda k: random_policy(denv.spec)(None, (), obs, None, k)[0])(keys)
    assert many.dtype == jnp.int32
    assert sorted(np.unique(np.asarray(many)).tolist()) == [0, 1, 2, 3]

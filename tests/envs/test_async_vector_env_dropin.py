"""BatchEnv as the README shows it: a drop-in for Gymnasium's own async vector env on real envs.

Gymnasium's ``make_vec(..., vectorization_mode="async")`` (an ``AsyncVectorEnv``) and
``BatchEnv([lambda: gymnasium.make(env_id)] * n)`` get the same seeds and the same actions, over
enough steps to cross several episode ends and their autoresets (Gymnasium's ``NEXT_STEP``, the
default of both: the step after an episode's end resets that env and ignores its action). Their
spaces, observations, rewards, terminated and truncated flags and infos are equal at every step;
the one difference is the documented one, float32 rewards (Gymnasium's are float64), whose
values are Gymnasium's cast to float32. ``make``, by contrast, is the learners' stack and
changes what the env reports (``test_make_is_not_the_drop_in``).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from batchppo.envs import BatchEnv, WorkerOptions, make

pytestmark = pytest.mark.timeout(120)

NUM_ENVS = 4


def _actions(env_id: str, rng: np.random.Generator) -> np.ndarray:
    """A batch of actions over the whole of the env's own action space."""
    if env_id == "Pendulum-v1":
        return rng.uniform(-2.0, 2.0, (NUM_ENVS, 1)).astype(np.float32)
    return rng.integers(0, 2, NUM_ENVS)


@pytest.mark.parametrize(
    ("env_id", "steps", "least_ends"),
    # Pendulum never terminates and is truncated at 200 steps: with NEXT_STEP's reset step in
    # between, 450 steps hold two episode ends per env. CartPole's random-action episodes end
    # within a few dozen steps.
    [("Pendulum-v1", 450, 2 * NUM_ENVS), ("CartPole-v1", 300, 3 * NUM_ENVS)],
)
def test_batch_env_steps_as_gymnasiums_async_vector_env(env_id, steps, least_ends):
    reference = gymnasium.make_vec(env_id, num_envs=NUM_ENVS, vectorization_mode="async")
    ours = BatchEnv([lambda: gymnasium.make(env_id)] * NUM_ENVS, WorkerOptions(num_workers=2))
    try:
        assert isinstance(reference, AsyncVectorEnv)
        for name in ("single_observation_space", "single_action_space"):
            assert getattr(ours, name) == getattr(reference, name), name
        assert ours.observation_space == reference.observation_space
        assert ours.action_space == reference.action_space
        assert ours.metadata["autoreset_mode"] == reference.metadata["autoreset_mode"]
        assert ours.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP

        obs, infos = ours.reset(seed=7)
        expected_obs, expected_infos = reference.reset(seed=7)
        assert obs.dtype == expected_obs.dtype and np.array_equal(obs, expected_obs)
        assert infos == expected_infos

        rng = np.random.default_rng(0)
        ends = 0
        for t in range(steps):
            actions = _actions(env_id, rng)
            obs, reward, terminated, truncated, infos = ours.step(actions)
            expected = reference.step(actions)
            assert obs.dtype == expected[0].dtype and np.array_equal(obs, expected[0]), t
            assert reward.dtype == np.float32 and expected[1].dtype == np.float64
            assert np.array_equal(reward, expected[1].astype(np.float32)), t
            assert np.array_equal(terminated, expected[2]), t
            assert np.array_equal(truncated, expected[3]), t
            assert infos == expected[4], t
            ends += int(np.sum(terminated | truncated))
        assert ends >= least_ends, ends
    finally:
        ours.close()
        reference.close()


def test_make_is_not_the_drop_in():
    """``make`` is the learners' stack: its Pendulum takes actions on [-1, 1] and reports
    observations on [-1, 1]; its CartPole's Discrete actions are int32; it resets in the
    step that ends an episode. What ``docs/batch_env.md`` and ``make``'s docstring say."""
    with make("Pendulum-v1", 2, backend="sync") as env:
        assert env.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        assert env.single_observation_space == gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
        assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    with make("CartPole-v1", 2, backend="sync") as env:
        assert env.single_action_space == gymnasium.spaces.Discrete(2, dtype=np.int32)
        assert gymnasium.make("CartPole-v1").action_space == gymnasium.spaces.Discrete(2)
        assert gymnasium.spaces.Discrete(2).dtype == np.int64

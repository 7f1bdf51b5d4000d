"""make / make_env_fn: the wrapper stack, backends and the unknown-id error."""

from __future__ import annotations

import importlib
import os

import gymnasium
import numpy as np
import pytest
from gymnasium.wrappers import ClipAction, TimeLimit

from batchppo.envs import BatchEnv, ConvertTo32Bit, RangeNormalize, make, make_env_fn

pytestmark = pytest.mark.timeout(60)

# The function batchppo.envs.make shadows the module of the same name as an attribute.
make_module = importlib.import_module("batchppo.envs.make")


def test_unknown_id_suggests_close_matches_before_starting_workers(monkeypatch):
    monkeypatch.setattr(make_module, "BatchEnv", lambda *a, **k: pytest.fail("workers built"))
    with pytest.raises(ValueError, match=r"'Pendulm-v1'.*Did you mean: Pendulum-v1"):
        make("Pendulm-v1", 4)
    with pytest.raises(ValueError, match="Unknown env id 'NoSuchEnv-v0'"):
        make_env_fn("NoSuchEnv-v0")
    with pytest.raises(ValueError, match="backend"):
        make("Pendulum-v1", 4, backend="threads")


def test_stack_order_and_spaces():
    env = make_env_fn("Pendulum-v1", max_length=7)()
    chain = []
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        chain.append(type(layer))
        layer = layer.env
    # Outermost first: ConvertTo32Bit, RangeNormalize (which clips actions itself), then
    # gymnasium.make's own.
    assert chain[:2] == [ConvertTo32Bit, RangeNormalize]
    assert ClipAction not in chain and TimeLimit in chain[2:]
    assert env.get_wrapper_attr("_max_episode_steps") == 7
    np.testing.assert_array_equal(env.observation_space.low, [-1, -1, -1])
    assert env.observation_space.dtype == np.float32
    np.testing.assert_array_equal(env.action_space.low, [-1])  # finite: the agent's range
    np.testing.assert_array_equal(env.action_space.high, [1])
    # Without range normalisation, Gymnasium's ClipAction clips to the env's own bounds.
    raw = make_env_fn("Pendulum-v1", normalize_ranges=False)()
    assert type(raw.env) is ClipAction
    raw.reset(seed=0)
    raw.step(np.array([5.0], np.float32))
    assert raw.unwrapped.last_u == 2.0  # Pendulum's max torque


def test_stack_matches_raw_env_through_the_formulas():
    env = make_env_fn("Pendulum-v1")()
    raw = gymnasium.make("Pendulum-v1")
    obs, _ = env.reset(seed=5)
    raw_obs, _ = raw.reset(seed=5)
    high = raw.observation_space.high
    np.testing.assert_array_equal(obs, 2 * (raw_obs + high) / (2 * high) - 1)
    # Normalised action 0.5 -> -2 + 1.5 / 2 * 4 = 1; 3.0 is clipped to 1 -> 2 (the max torque).
    for action, raw_action in [(0.5, 1.0), (3.0, 2.0)]:
        obs, reward, *_ = env.step(np.array([action], np.float32))
        raw_obs, raw_reward, *_ = raw.step(np.array([raw_action], np.float32))
        np.testing.assert_allclose(obs, 2 * (raw_obs + high) / (2 * high) - 1, rtol=1e-6)
        assert reward == np.float32(raw_reward) and type(reward) is np.float32


def test_discrete_actions_become_int32_and_partial_bounds_normalise():
    env = make_env_fn("CartPole-v1")()
    assert env.action_space.dtype == np.int32
    high = env.observation_space.high
    np.testing.assert_array_equal(np.isinf(high), [False, True, False, True])
    np.testing.assert_array_equal(high[[0, 2]], [1, 1])


def test_sync_and_process_backends_agree():
    with (
        make("Pendulum-v1", 5, seed=2, backend="sync", max_length=3) as a,
        make("Pendulum-v1", 5, seed=2, backend="process", num_workers=2, max_length=3) as b,
    ):
        assert isinstance(a, BatchEnv) and isinstance(b, BatchEnv)
        rng = np.random.default_rng(1)
        for _ in range(4):
            action = rng.uniform(-1, 1, (5, 1)).astype(np.float32)
            for x, y in zip(a.step_arrays(action), b.step_arrays(action), strict=True):
                np.testing.assert_array_equal(x, y)


def test_halfcheetah_batch():
    with make("HalfCheetah-v5", 2, seed=0, num_workers=2, max_length=2) as env:
        assert env.single_observation_space.shape == (17,)
        assert env.single_action_space.shape == (6,)
        obs, reward, _, truncated, final_obs = env.step_arrays(np.zeros((2, 6)))
        assert obs.dtype == np.float32 and reward.dtype == np.float32
        obs, _, _, truncated, final_obs = env.step_arrays(np.zeros((2, 6)))
        np.testing.assert_array_equal(truncated, [True, True])
        assert not np.array_equal(obs, final_obs)  # reset obs vs the episode's last obs


def test_render_for_videos():
    env = make_env_fn("Pendulum-v1", render_mode="rgb_array")()
    env.reset(seed=0)
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3


@pytest.mark.parametrize("int_obs", [False, True])
@pytest.mark.parametrize("backend", ["process", "sync"])
def test_make_builds_each_env_once(tmp_path, backend, int_obs):
    """make() reads the spaces for its batch transform off the envs the batch env builds:
    4 envs, 4 constructions, none in the calling process unless the backend is "sync"."""
    path = tmp_path / "builds"
    env_id = "envs_testlib:ConstructionCounting-v0"
    with make(
        env_id, 4, seed=0, backend=backend, num_workers=2, path=str(path), int_obs=int_obs
    ) as env:
        built = [int(line) for line in path.read_text().split()]
        assert len(built) == 4, built
        assert built.count(os.getpid()) == (4 if backend == "sync" else 0)
        # The batch transform covers float observations; integer ones get the per-env stack.
        assert (env.transform is not None) != int_obs
        expected = make_env_fn(env_id, path=os.devnull, int_obs=int_obs)().observation_space
        assert env.single_observation_space == expected
        env.step(np.zeros((4, 1), np.float32))
    assert len(path.read_text().split()) == 4

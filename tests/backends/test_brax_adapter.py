"""BraxEnv: time limits as truncation, falls as termination, same-step reset (brax is in the
test extra)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.training.programs import cold_compiler_options
from batchppo.backends import BraxEnv, make_env
from batchppo.core.env import Env
from batchppo.core.simulation import init_sim_state, rollout
from batchppo.testing import random_policy


@pytest.fixture(scope="module")
def run_rollout():
    """``rollout`` jitted with the XLA options of the package's programs that run once (each
    rollout here runs once). Built by the first test that takes it: the options ask JAX for its
    backend, which collecting the module would otherwise initialise."""
    return jax.jit(rollout, static_argnums=(0, 1, 4), compiler_options=cold_compiler_options())


def push(value: float):
    """A policy that always applies the same action (drives the pole over)."""

    def policy(params, carry, obs, first, key):
        return jnp.full((obs.shape[0], 1), value, jnp.float32), {}, carry

    return policy


@pytest.mark.timeout(300)
def test_brax_inverted_pendulum_truncates_and_terminates(monkeypatch, run_rollout):
    from brax.envs.inverted_pendulum import InvertedPendulum

    traces = []  # of one env's reset: once, for the shape and every program that resets
    reset = InvertedPendulum.reset
    monkeypatch.setattr(
        InvertedPendulum, "reset", lambda self, rng: traces.append(1) or reset(self, rng)
    )
    env = BraxEnv("inverted_pendulum", 3, max_length=4, backend="spring")
    assert isinstance(env, BraxEnv) and isinstance(env, Env)
    assert env.spec.obs_shape == (4,) and env.spec.action_shape == (1,)
    key = jax.random.key(0)

    # No force: the pole cannot fall within 4 steps, so every episode is cut by the limit.
    state = init_sim_state(env, (), key)
    _, traj, stats = run_rollout(env, push(0.0), None, state, 9)
    assert traj.obs.dtype == jnp.float32 and traj.reward.dtype == jnp.float32
    assert not bool(traj.terminated.any())
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(traj.truncated).all(axis=1)), [3, 7])
    np.testing.assert_array_equal(stats.length[3], [4, 4, 4])
    # final_obs continues the episode except at the cut, where the next obs is a fresh reset.
    np.testing.assert_array_equal(traj.final_obs[:2], traj.obs[1:3])
    assert not np.allclose(traj.final_obs[3], traj.obs[4])
    assert len(traces) == 1  # the first reset's program and the restarts' reused the shape's

    # Full push with a long limit: the pole falls, which Brax reports as termination.
    long = BraxEnv("inverted_pendulum", 3, max_length=1000, backend="spring")
    _, traj, stats = run_rollout(long, push(1.0), None, init_sim_state(long, (), key), 60)
    assert bool(traj.terminated.any()) and not bool(traj.truncated.any())
    ended = np.asarray(traj.terminated)
    # The pole angle (obs[1]) is past Brax's 0.2 rad threshold where it terminated.
    assert np.all(np.abs(np.asarray(traj.final_obs)[ended][:, 1]) > 0.2)
    assert bool(traj.first[1:][ended[:-1]].all())


def test_brax_make_env_and_errors():
    env = make_env("inverted_pendulum", 2, "brax")
    assert isinstance(env, BraxEnv) and env.max_length == 1000
    policy = random_policy(env.spec)
    action, _, _ = policy(None, (), jnp.zeros((2, 4)), None, jax.random.key(0))
    assert action.shape == (2, 1)
    with pytest.raises(ValueError, match="unknown Brax env 'nope'"):
        BraxEnv("nope", 2)


@pytest.mark.extended  # CI covers the fused autoresets in tests/backends/test_adapters.py
@pytest.mark.timeout(300)
def test_brax_autoreset_first_restarts_from_the_first_state(run_rollout):
    """``autoreset="first"`` (Brax's own restart): every episode of an env starts from the
    state of its first reset; with a fresh reset (the default) the starts differ; with
    ``optimistic`` at one reset for the three envs, the three restart from one state."""
    key = jax.random.key(0)
    starts = {}
    for mode in ("first", "cond", "optimistic"):
        env = BraxEnv(
            "inverted_pendulum", 3, max_length=4, backend="spring", autoreset=mode, reset_ratio=3
        )
        _, traj, _ = run_rollout(env, push(0.0), None, init_sim_state(env, (), key), 9)
        obs = np.asarray(traj.obs)
        assert bool(np.asarray(traj.truncated)[3].all())
        starts[mode] = obs[[0, 4, 8]]
    np.testing.assert_array_equal(starts["first"][1], starts["first"][0])
    np.testing.assert_array_equal(starts["first"][2], starts["first"][0])
    np.testing.assert_array_equal(starts["cond"][0], starts["first"][0])
    assert not np.allclose(starts["cond"][1], starts["cond"][0])
    np.testing.assert_array_equal(starts["optimistic"][0], starts["first"][0])
    restarted = starts["optimistic"][1]
    np.testing.assert_array_equal(restarted, np.broadcast_to(restarted[0], restarted.shape))
    assert not np.allclose(restarted, starts["first"][0])

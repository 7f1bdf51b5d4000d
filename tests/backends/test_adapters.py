"""Env adapters: gymnax time limits and range normalisation, HostEnv under jit, make_env."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from program_values import assert_same_values

from batchppo import envs
from batchppo.backends import GymnaxEnv, HostEnv, make_env
from batchppo.core.env import Env
from batchppo.core.simulation import init_sim_state, rollout
from batchppo.core.worker_options import WorkerOptions
from batchppo.envs.stack.wrappers import RangeNormalize
from batchppo.testing import MockGymEnv, make_mock_vector_env, random_policy

run_rollout = jax.jit(rollout, static_argnums=(0, 1, 4))


def always(action: int):
    """A policy that always takes discrete ``action``."""

    def policy(params, carry, obs, first, key):
        return jnp.full((obs.shape[0],), action, jnp.int32), {}, carry

    return policy


# -- range normalisation ------------------------------------------------------------------------


class _BoxEnv(gym.Env):
    """Observation and action spaces both ``Box(low, high)``; never stepped."""

    def __init__(self, low, high):
        self.observation_space = gym.spaces.Box(low, high, dtype=low.dtype)
        self.action_space = gym.spaces.Box(low, high, dtype=low.dtype)


def test_gymnax_mountaincar_obs_normalised_like_host_formula():
    raw = GymnaxEnv("MountainCarContinuous-v0", 5, normalize_ranges=False)
    norm = GymnaxEnv("MountainCarContinuous-v0", 5)
    key = jax.random.key(7)
    _, raw_obs = jax.jit(raw.reset)(key)
    _, norm_obs = jax.jit(norm.reset)(key)
    low = np.array([-1.2, -0.07])
    high = np.array([0.6, 0.07])
    want = 2.0 * (np.asarray(raw_obs, np.float64) - low) / (high - low) - 1.0
    np.testing.assert_allclose(norm_obs, want, atol=1e-6)
    np.testing.assert_array_equal(norm.spec.obs_low, [-1.0, -1.0])
    np.testing.assert_array_equal(norm.spec.action_low, [-1.0])
    np.testing.assert_array_equal(raw.spec.action_high, [1.0])


def test_gymnax_integer_box_obs_pass_unchanged_as_on_the_host():
    # Catch-bsuite observes an int32 Box [0, 1]; RangeNormalize leaves integer Boxes alone, so
    # the adapter must too (the board stays 0/1, not -1/1), bounds included.
    raw = GymnaxEnv("Catch-bsuite", 3, normalize_ranges=False)
    norm = GymnaxEnv("Catch-bsuite", 3)
    key = jax.random.key(1)
    raw_state, raw_obs = jax.jit(raw.reset)(key)
    norm_state, norm_obs = jax.jit(norm.reset)(key)
    np.testing.assert_array_equal(norm_obs, raw_obs)
    assert norm_obs.dtype == jnp.float32 and set(np.unique(norm_obs)) == {0.0, 1.0}
    np.testing.assert_array_equal(norm.spec.obs_low, raw.spec.obs_low)
    np.testing.assert_array_equal(norm.spec.obs_high, np.ones((10, 5)))
    action = jnp.array([0, 1, 2], jnp.int32)
    raw_next = jax.jit(raw.step)(raw_state, action, key)
    norm_next = jax.jit(norm.step)(norm_state, action, key)
    np.testing.assert_array_equal(norm_next.obs, raw_next.obs)
    np.testing.assert_array_equal(norm_next.final_obs, raw_next.final_obs)
    wrapper = RangeNormalize(_BoxEnv(np.zeros(3, np.int32), np.ones(3, np.int32)))
    assert wrapper.observation_space == wrapper.env.observation_space


def test_gymnax_pendulum_action_mapped_to_torque_range():
    raw = GymnaxEnv("Pendulum-v1", 3, normalize_ranges=False)
    norm = GymnaxEnv("Pendulum-v1", 3)
    key, key_step = jax.random.split(jax.random.key(0))
    raw_state, _ = jax.jit(raw.reset)(key)
    norm_state, _ = jax.jit(norm.reset)(key)
    # Agent actions 0.5, 5.0 (clipped to 1) and -1 are torques 1.0, 2.0 and -2.0.
    agent = jnp.array([[0.5], [5.0], [-1.0]], jnp.float32)
    torque = jnp.array([[1.0], [2.0], [-2.0]], jnp.float32)
    r_raw = jax.jit(raw.step)(raw_state, torque, key_step)
    r_norm = jax.jit(norm.step)(norm_state, agent, key_step)
    np.testing.assert_allclose(r_norm.reward, r_raw.reward, rtol=1e-6)
    # Pendulum obs bounds: [1, 1, 8] symmetric, so normalised obs = raw / high.
    np.testing.assert_allclose(r_norm.obs, r_raw.obs / np.array([1.0, 1.0, 8.0]), atol=1e-6)
    # The reward of a step depends on the applied torque: u^2 / 1000 separates the envs.
    assert norm.spec.action_low.tolist() == [-1.0]
    assert raw.spec.action_low.tolist() == [-2.0]


def test_env_kwargs_reach_every_backend_kind():
    def action_high(env_kwargs):
        env = make_env("Pendulum-v1", 2, "gymnax", normalize_ranges=False, env_kwargs=env_kwargs)
        return env.spec.action_high.tolist()

    assert action_high(None) == [2.0]
    assert action_high({"max_torque": 1.0}) == [1.0]
    with pytest.raises(ValueError, match=r"env_kwargs \['max_torq'\] are not EnvParams fields"):
        action_high({"max_torq": 1.0})
    for include, obs_shape in ((True, (105,)), (False, (27,))):
        host_env = make_env(
            "Ant-v5", 1, "sync", env_kwargs={"include_cfrc_ext_in_observation": include}
        )
        host_env.close()
        assert host_env.spec.obs_shape == obs_shape


@pytest.mark.parametrize(
    ("env_id", "obs_shape", "discrete", "num_actions", "act_shape"),
    [
        ("Pendulum-v1", (3,), False, 0, (1,)),
        ("CartPole-v1", (4,), True, 2, ()),
        ("MountainCarContinuous-v0", (2,), False, 0, (1,)),
        ("Acrobot-v1", (6,), True, 3, ()),
    ],
)
def test_gymnax_specs_and_dtypes(env_id, obs_shape, discrete, num_actions, act_shape):
    env = GymnaxEnv(env_id, 4, max_length=5)
    assert isinstance(env, Env)
    spec = env.spec
    assert (spec.obs_shape, spec.discrete, spec.num_actions) == (obs_shape, discrete, num_actions)
    assert spec.action_shape == act_shape
    state = init_sim_state(env, (), jax.random.key(0))
    _, traj, stats = run_rollout(env, random_policy(spec), None, state, 6)
    assert traj.obs.dtype == jnp.float32 and traj.final_obs.dtype == jnp.float32
    assert traj.reward.dtype == jnp.float32
    assert traj.action.dtype == (jnp.int32 if discrete else jnp.float32)
    assert traj.obs.shape == (6, 4, *obs_shape)
    # Random agents need at least 5 steps to end any of these episodes: the limit cuts them.
    assert not bool(traj.terminated.any())
    np.testing.assert_array_equal(traj.truncated[4], [True] * 4)
    np.testing.assert_array_equal(stats.length[4], [5] * 4)
    assert bool(jnp.isfinite(traj.obs).all())


# -- truncation vs termination in gymnax --------------------------------------------------------


@pytest.mark.timeout(60)
def test_gymnax_pendulum_only_truncates_at_env_limit():
    env = GymnaxEnv("Pendulum-v1", 3)  # max_length None -> gymnax's 200
    assert env.max_length == 200
    state = init_sim_state(env, (), jax.random.key(1))
    _, traj, stats = run_rollout(env, random_policy(env.spec), None, state, 202)
    assert not bool(traj.terminated.any())
    truncated_steps = np.flatnonzero(np.asarray(traj.truncated).any(axis=1))
    np.testing.assert_array_equal(truncated_steps, [199])
    assert bool(traj.truncated[199].all())
    np.testing.assert_array_equal(stats.length[199], [200] * 3)
    assert bool(traj.first[200].all()) and not bool(traj.first[1:200].any())
    # final_obs continues the episode: it is the next obs, except at the cut where it is the
    # true last observation and the next obs starts a new episode.
    cont = np.ones(201, bool)
    cont[199] = False
    np.testing.assert_array_equal(traj.final_obs[:-1][cont], traj.obs[1:][cont])
    assert not np.allclose(traj.final_obs[199], traj.obs[200])


@pytest.mark.timeout(60)
def test_gymnax_cartpole_falling_terminates_and_short_limit_truncates():
    key = jax.random.key(2)
    falling = GymnaxEnv("CartPole-v1", 4, normalize_ranges=False)
    state = init_sim_state(falling, (), key)
    _, traj, stats = run_rollout(falling, always(0), None, state, 40)
    assert bool(traj.terminated.any()) and not bool(traj.truncated.any())
    # Where it terminated, the final observation is past the thresholds; obs restarts near 0.
    fo = np.asarray(traj.final_obs)[np.asarray(traj.terminated)]
    assert np.all((np.abs(fo[:, 0]) > 2.4) | (np.abs(fo[:, 2]) > 12 * 2 * np.pi / 360))
    assert np.all(np.abs(np.asarray(traj.obs)[1:][np.asarray(traj.terminated)[:-1]]) <= 0.05)

    # The same start with a 5-step limit: every episode is cut at 5, 10, 15... never terminated.
    short = GymnaxEnv("CartPole-v1", 4, max_length=5, normalize_ranges=False)
    _, traj5, _ = run_rollout(short, always(0), None, init_sim_state(short, (), key), 15)
    assert not bool(traj5.terminated.any())
    np.testing.assert_array_equal(
        np.flatnonzero(np.asarray(traj5.truncated).all(axis=1)), [4, 9, 14]
    )
    assert int(traj5.truncated.sum()) == 12
    np.testing.assert_array_equal(traj5.obs[:5], traj.obs[:5])

    # A limit equal to an env's own termination step: terminated wins, truncated stays False.
    first_len = [int(stats.length[:, i][stats.done[:, i]][0]) for i in range(4)]
    limit = min(first_len)
    tie = GymnaxEnv("CartPole-v1", 4, max_length=limit, normalize_ranges=False)
    _, traj_tie, _ = run_rollout(tie, always(0), None, init_sim_state(tie, (), key), limit)
    ends_here = np.array(first_len) == limit
    np.testing.assert_array_equal(traj_tie.terminated[limit - 1], ends_here)
    np.testing.assert_array_equal(traj_tie.truncated[limit - 1], ~ends_here)


def test_gymnax_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown gymnax env id 'Nope-v0'"):
        GymnaxEnv("Nope-v0", 2)
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        GymnaxEnv("Pendulum-v1", 0)
    with pytest.raises(ValueError, match="max_length must be >= 1"):
        GymnaxEnv("Pendulum-v1", 2, max_length=0)
    with pytest.raises(ValueError, match="autoreset must be one of"):
        GymnaxEnv("Pendulum-v1", 2, autoreset="always")


def test_gymnax_autoreset_select_and_cond_give_the_same_rollout():
    """The reset computed at every step and selected (the default) or computed under
    ``lax.cond``: the same values, episodes ending throughout (limit 7, CartPole falling); flags
    and counts to the bit, floats to float32 rounding (``assert_same_values``: the two programs
    differ in structure)."""
    trajs = []
    for mode in ("select", "cond"):
        env = GymnaxEnv("CartPole-v1", 5, max_length=7, normalize_ranges=False, autoreset=mode)
        state = init_sim_state(env, (), jax.random.key(3))
        _, traj, stats = jax.jit(rollout, static_argnums=(0, 1, 4))(
            env, random_policy(env.spec), None, state, 40
        )
        trajs.append((traj, stats))
    assert bool(trajs[0][1].done.any())
    assert_same_values(trajs[0], trajs[1])


def test_gymnax_autoreset_first_restarts_each_env_from_its_first_state():
    """``autoreset="first"``: an env whose episode ended starts again from the observation its
    reset drew at the start (Brax's restart), the others go on as with a fresh reset."""
    key = jax.random.key(3)
    first = GymnaxEnv("CartPole-v1", 5, max_length=7, normalize_ranges=False, autoreset="first")
    fresh = GymnaxEnv("CartPole-v1", 5, max_length=7, normalize_ranges=False)
    runs = []
    for env in (first, fresh):
        state = init_sim_state(env, (), key)
        runs.append(jax.jit(rollout, static_argnums=(0, 1, 4))(
            env, random_policy(env.spec), None, state, 40
        ))  # fmt: skip
    (_, traj, stats), (_, traj_fresh, _) = runs
    obs, done = np.asarray(traj.obs), np.asarray(stats.done)
    assert done[:-1].sum() > 5
    steps, envs = np.nonzero(done[:-1])
    np.testing.assert_array_equal(obs[steps + 1, envs], obs[0, envs])
    # Up to the first end the two modes are one rollout (the same keys).
    end = int(np.argmax(done.any(axis=1)))
    np.testing.assert_array_equal(obs[: end + 1], np.asarray(traj_fresh.obs)[: end + 1])
    assert not np.array_equal(obs, np.asarray(traj_fresh.obs))


def test_gymnax_autoreset_optimistic_shares_each_steps_fresh_resets():
    """``autoreset="optimistic"``: 5 envs at ``reset_ratio=2`` draw 3 fresh resets a step; with
    every episode cut at each step (limit 1), envs 0-4 restart from resets 0, 1, 2, 0, 1."""
    env = GymnaxEnv(
        "CartPole-v1", 5, max_length=1, normalize_ranges=False, autoreset="optimistic",
        reset_ratio=2,
    )  # fmt: skip
    state, _ = env.reset(jax.random.key(0))
    key = jax.random.key(1)
    out = env.step(state, jnp.zeros(5, jnp.int32), key)
    _, fresh = env._reset_all(jax.random.split(key)[1], 3)
    np.testing.assert_array_equal(np.asarray(out.truncated), [True] * 5)
    np.testing.assert_array_equal(np.asarray(out.obs), np.asarray(fresh)[[0, 1, 2, 0, 1]])
    assert not np.array_equal(np.asarray(out.obs), np.asarray(out.final_obs))
    with pytest.raises(ValueError, match="reset_ratio must be >= 1"):
        GymnaxEnv("CartPole-v1", 5, autoreset="optimistic", reset_ratio=0)


# -- HostEnv ---------------------------------------------------------------------------------------


def _pendulum_vec(kind: str, num_envs: int, max_steps: int):
    if kind == "gymnasium":
        return SyncVectorEnv(
            [lambda: gym.make("Pendulum-v1", max_episode_steps=max_steps)] * num_envs,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
    options = WorkerOptions(num_workers=2) if kind == "process" else None
    return envs.make("Pendulum-v1", num_envs, backend=kind, options=options, max_length=max_steps)


def _tanh_policy(params, carry, obs, first, key):
    return jnp.tanh(obs @ params), {}, carry


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["gymnasium", "sync", "process"])
def test_host_env_in_scan_equals_python_loop(kind):
    num_envs, steps, limit = 4, 20, 7
    params = jnp.array([[0.9], [-1.3], [0.4]], jnp.float32)
    key = jax.random.key(11)

    host = HostEnv(_pendulum_vec(kind, num_envs, limit))
    state = init_sim_state(host, (), key)
    _, traj, stats = run_rollout(host, _tanh_policy, params, state, steps)
    host.close()

    # The plain loop: same envs, same seed (what init_sim_state's reset key draws), the
    # same jitted policy called per step, final obs from Gymnasium's same-step infos.
    vec = _pendulum_vec(kind, num_envs, limit)
    seed = int(HostEnv.seed_from_key(jax.random.split(key)[0]))
    obs, _ = vec.reset(seed=seed)
    act = jax.jit(_tanh_policy)
    rows = {k: [] for k in ("obs", "action", "reward", "terminated", "truncated", "final_obs")}
    for _ in range(steps):
        action, _, _ = act(params, (), jnp.asarray(obs, jnp.float32), None, None)
        action = np.asarray(action)
        next_obs, reward, term, trunc, infos = vec.step(action)
        final = np.array(next_obs)
        for i in np.flatnonzero(infos.get("_final_obs", np.zeros(num_envs, bool))):
            final[i] = infos["final_obs"][i]
        for name, value in zip(rows, (obs, action, reward, term, trunc, final), strict=True):
            rows[name].append(np.array(value))
        obs = next_obs
    vec.close()

    for name, values in rows.items():
        want = np.stack(values).astype(np.asarray(getattr(traj, name)).dtype)
        np.testing.assert_array_equal(getattr(traj, name), want, err_msg=name)
    # Limit 7: cut at steps 7 and 14, as truncations.
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(traj.truncated).all(axis=1)), [6, 13])
    assert not bool(traj.terminated.any())
    np.testing.assert_array_equal(stats.length[6], [7] * num_envs)


@pytest.mark.timeout(60)
def test_host_env_worker_error_in_compiled_rollout_surfaces():
    # Env 1 raises on its 5th step, in the middle of a compiled 8-step rollout.
    host = HostEnv(make_mock_vector_env((2, 3), fail_at_step={1: 5}))
    state = init_sim_state(host, (), jax.random.key(0))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(run_rollout(host, random_policy(host.spec), None, state, 8))
    message = str(info.value)
    assert "RuntimeError" in message
    assert "MockGymEnv 1: injected failure at step 5" in message


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ("nan_reward_at_step", "non-finite reward from env 1 of 2"),
        ("nan_obs_at_step", "non-finite observation from env 1 of 2"),
    ],
)
def test_host_env_non_finite_values_raise(fault, field):
    host = HostEnv(make_mock_vector_env((2, 3), **{fault: {1: 2}}))
    state = init_sim_state(host, (), jax.random.key(0))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(run_rollout(host, random_policy(host.spec), None, state, 4))
    assert "ValueError" in str(info.value)
    assert field in str(info.value)


def test_host_env_rejects_next_step_autoreset_and_bad_spaces():
    vec = SyncVectorEnv([lambda: gym.make("Pendulum-v1")], autoreset_mode=AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="same-step auto-reset"):
        HostEnv(vec)
    vec.close()


def test_host_env_discrete_spec_and_actions():
    host = HostEnv(make_mock_vector_env((2, 2), discrete=True, num_actions=4))
    assert host.spec.discrete and host.spec.num_actions == 4 and host.spec.action_shape == ()
    state = init_sim_state(host, (), jax.random.key(0))
    _, traj, _ = run_rollout(host, random_policy(host.spec), None, state, 5)
    assert traj.action.dtype == jnp.int32
    assert bool(((traj.action >= 0) & (traj.action < 4)).all())
    host.close()


def test_host_env_prefers_step_arrays():
    """A vector env with step_arrays (the BatchEnv fast path) is stepped through it."""

    class WithStepArrays(SyncVectorEnv):
        calls = 0

        def step_arrays(self, actions):
            WithStepArrays.calls += 1
            obs, reward, term, trunc, infos = self.step(actions)
            final = np.array(obs)
            mask = infos.get("_final_obs", np.zeros(self.num_envs, bool))
            for i in np.flatnonzero(mask):
                final[i] = infos["final_obs"][i]
            return obs, reward, term, trunc, final

    vec = WithStepArrays(
        [lambda: MockGymEnv(2, 0), lambda: MockGymEnv(3, 1, terminate=False)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    host = HostEnv(vec)
    state = init_sim_state(host, (), jax.random.key(0))
    _, traj, _ = run_rollout(host, random_policy(host.spec), None, state, 6)
    assert WithStepArrays.calls == 6
    np.testing.assert_array_equal(traj.final_obs[:, 1, 0], [1001, 1002, 1003, 1001, 1002, 1003])
    np.testing.assert_array_equal(traj.truncated[:, 1], [0, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(traj.terminated[:, 0], [0, 1, 0, 1, 0, 1])
    host.close()


# -- make_env ------------------------------------------------------------------------------------


def test_make_env_gymnax_and_errors():
    env = make_env("CartPole-v1", 3, "gymnax", max_length=50, normalize_ranges=False)
    assert isinstance(env, GymnaxEnv) and env.num_envs == 3 and env.max_length == 50
    env.close()
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        make_env("CartPole-v1", 3, "cuda")
    with pytest.raises(ValueError, match="unknown gymnax env id"):
        make_env("NoSuchEnv-v0", 3, "gymnax")


@pytest.mark.timeout(120)
def test_make_env_host_backend_sync():
    env = make_env("Pendulum-v1", 3, "sync", max_length=4)
    try:
        assert isinstance(env, HostEnv)
        assert env.spec.obs_shape == (3,) and not env.spec.discrete
        np.testing.assert_array_equal(env.spec.obs_high, [1.0, 1.0, 1.0])  # normalised ranges
        state = init_sim_state(env, (), jax.random.key(0))
        _, traj, _ = run_rollout(env, random_policy(env.spec), None, state, 9)
        np.testing.assert_array_equal(
            np.flatnonzero(np.asarray(traj.truncated).all(axis=1)), [3, 7]
        )
        assert not bool(traj.terminated.any())
    finally:
        env.close()


@pytest.mark.timeout(120)
def test_host_env_over_batch_env_process_worker_error_surfaces():
    # Two units: the parent steps env 0, a worker process steps env 1, which fails at step 4.
    fns = [partial(MockGymEnv, 2, 0), partial(MockGymEnv, 3, 1, fail_at_step=4)]
    batch = envs.BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep")
    try:
        host = HostEnv(batch)
        state = init_sim_state(host, (), jax.random.key(0))
        _, traj, _ = run_rollout(host, random_policy(host.spec), None, state, 3)
        np.testing.assert_array_equal(traj.final_obs[:, 1, 0], [1001, 1002, 1003])
        np.testing.assert_array_equal(traj.terminated[:, 1], [False, False, True])
        with pytest.raises(jax.errors.JaxRuntimeError) as info:
            jax.block_until_ready(run_rollout(host, random_policy(host.spec), None, state, 3))
        assert "MockGymEnv 1: injected failure at step 4" in str(info.value)
    finally:
        batch.close()


# -- composite spaces through io_callback ------------------------------------------------------


class _DictEnv(gym.Env):
    """Dict observations (a uint8 frame and a float64 vector) and Dict actions; episodes of 3
    steps. The frame is filled with ``10 * t + the last move``; ``pos`` is ``[t, bits sum]``."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {
                "frame": gym.spaces.Box(0, 255, (4, 4, 1), np.uint8),
                "pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float64),
            }
        )
        self.action_space = gym.spaces.Dict(
            {"move": gym.spaces.Discrete(3), "bits": gym.spaces.MultiBinary(2)}
        )
        self._t = 0

    def _obs(self, move: int = 0, bits: int = 0) -> dict:
        frame = np.full((4, 4, 1), 10 * self._t + move, np.uint8)
        return {"frame": frame, "pos": np.array([self._t, bits], np.float64)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        obs = self._obs(int(action["move"]), int(np.sum(action["bits"])))
        return obs, 1.0, self._t >= 3, False, {}


@pytest.mark.parametrize("batch", ["sync", "batch_env"])
def test_host_env_carries_dict_spaces_with_their_dtypes(batch):
    fns = [_DictEnv, _DictEnv]
    if batch == "sync":
        vector_env = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        vector_env = envs.BatchEnv(fns, WorkerOptions(num_workers=1), autoreset_mode="SameStep")
    env = HostEnv(vector_env)
    try:
        spec = env.spec
        assert spec.obs_shape is None and sorted(spec.obs_space) == ["frame", "pos"]
        assert spec.obs_space["frame"].dtype == np.uint8
        assert spec.obs_space["pos"].dtype == np.float32
        assert sorted(spec.action_space) == ["bits", "move"]
        state, obs = jax.jit(env.reset)(jax.random.key(0))
        assert obs["frame"].dtype == jnp.uint8 and obs["frame"].shape == (2, 4, 4, 1)
        assert obs["pos"].dtype == jnp.float32
        action = {"move": jnp.array([1, 2]), "bits": jnp.array([[1, 1], [0, 1]])}
        step = jax.jit(env.step)
        for _ in range(3):
            result = step(state, action, jax.random.key(1))
            state = result.state
        # The third step ends both episodes: obs restarts, final_obs keeps the last frame.
        assert result.terminated.tolist() == [True, True]
        assert result.obs["frame"].dtype == jnp.uint8
        np.testing.assert_array_equal(result.obs["frame"][:, 0, 0, 0], [0, 0])
        np.testing.assert_array_equal(result.final_obs["frame"][:, 0, 0, 0], [31, 32])
        np.testing.assert_array_equal(result.final_obs["pos"], [[3.0, 2.0], [3.0, 1.0]])
        assert result.final_obs["frame"].dtype == jnp.uint8
    finally:
        env.close()

"""BatchVecEnv against SB3's DummyVecEnv and SubprocVecEnv: the same checks, run on each.

The checks cover what Stable-Baselines3's own vec-env tests (``tests/test_vec_envs.py``)
exercise, written here with exact assertions: ``get_attr``/``set_attr``/``env_method``/
``has_attr`` with ``indices`` (negative ones too), ``set_options``, ``render``, the terminal
observation and ``TimeLimit.truncated`` across episode ends, every observation space SB3
accepts (Dict, unordered Dict and Tuple ones as dicts/tuples of arrays), start methods,
``env_is_wrapped``, seeding, SB3's ``VecNormalize``/``VecFrameStack`` wrappers over each, and
``VecFrameStack``'s stacking of uint8 image observations by ``channels_order``
(upstream's ``test_framestack_vecenv``). Where BatchVecEnv's results must equal
DummyVecEnv's, bit for bit, they are compared: fixed action sequences on Pendulum and
CartPole, and SB3's PPO trained on each. Where it differs on purpose (float32 rewards as in
DummyVecEnv, not SubprocVecEnv's float64; ``reset`` during a pending step; an env whose
``reset`` lacks ``options``) is asserted too.

Upstream cases left out, and why:

* ``render(mode="human")`` (part of ``test_vecenv_custom_calls`` and ``test_render``): it
  opens windows (OpenCV's, or the envs' own, which for BatchVecEnv live in the worker
  processes) and needs an X server; upstream skips it without ``DISPLAY``, and CI has none.
  The ``rgb_array`` renders and the warning for other modes are checked.
* An env whose ``reset`` takes no ``seed`` (``test_backward_compat_seed`` of SB3 before 2.0,
  since dropped upstream): SB3 2.x's ``DummyVecEnv`` raises ``TypeError`` on its reset, and
  BatchVecEnv does not support such envs either; it refuses them when the workers start,
  with a one-line ``ValueError`` (checked here). One whose ``reset`` takes ``seed`` only is
  taken, as ``SubprocVecEnv`` takes it: ``options`` reach it only when given.
* ``test_vecenv_wrapper_getattr`` and ``test_video_recorder``: they run on ``DummyVecEnv``
  alone upstream and check SB3's wrappers (attribute lookup through ``VecEnvWrapper``s,
  ``VecVideoRecorder``), not the vec env under them.
"""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Callable
from typing import Any

import cloudpickle
import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecEnv,
    VecFrameStack,
    VecNormalize,
)

from batchppo.envs import EnvRestartWarning, WorkerOptions
from batchppo.envs.adapters.sb3 import BatchVecEnv, unbatch_infos

pytestmark = pytest.mark.timeout(180)

# The envs below travel to the worker processes by value, as a script's envs would.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

N_ENVS = 3
TWO_WORKERS = WorkerOptions(num_workers=2)

IMPLS: dict[str, Callable[..., VecEnv]] = {
    "DummyVecEnv": lambda fns: DummyVecEnv(fns),
    "SubprocVecEnv": lambda fns, **kw: SubprocVecEnv(fns, **kw),
    "BatchVecEnv": lambda fns, **kw: BatchVecEnv(fns, worker_options=TWO_WORKERS, **kw),
    "BatchVecEnv-parent": lambda fns, **kw: BatchVecEnv(
        fns, worker_options=WorkerOptions(num_workers=2, step_in_parent=True), **kw
    ),
}
OURS = ["BatchVecEnv", "BatchVecEnv-parent"]


# SubprocVecEnv's workers each import SB3 and torch (seconds apiece on a 2-core CI machine),
# so it runs the checks of the contract (calls, terminal observations, start methods,
# wrappers), and those in the extended tier: in CI, DummyVecEnv's run of the same checks
# holds them to SB3's behaviour; the checks of values compare against DummyVecEnv.
def subproc(*values: Any) -> Any:
    """``values`` (SubprocVecEnv's parameters of a check) as a pytest param of the extended tier."""
    return pytest.param(*values, marks=pytest.mark.extended)


WITH_SUBPROC = ["DummyVecEnv", subproc("SubprocVecEnv"), *OURS]


@pytest.fixture(params=["DummyVecEnv", *OURS])
def impl(request: pytest.FixtureRequest) -> str:
    return request.param


# The checks whose envs are wrapped in SB3's Monitor (each worker imports SB3 and torch) run on
# BatchVecEnv-parent in the extended tier: its envs answer the same per-env calls in the parent
# process as in the workers (envs/adapters/indexed.py), which CI covers with
# test_attribute_and_method_calls_with_indices[BatchVecEnv-parent-None].
MONITORED = [
    "DummyVecEnv",
    "BatchVecEnv",
    pytest.param("BatchVecEnv-parent", marks=pytest.mark.extended),
]


# --------------------------------------------------------------------------- envs

SPACES: dict[str, spaces.Space] = {
    "discrete": spaces.Discrete(5),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),
    "multibinary": spaces.MultiBinary(3),
    "box": spaces.Box(np.zeros(2, np.float32), np.ones(2, np.float32)),
}


ALL_SPACES: dict[str, spaces.Space] = {
    **SPACES,
    "dict": spaces.Dict(SPACES),
    "unordered_dict": spaces.Dict(SPACES),  # SampleEnv returns its keys in reverse order
    "tuple": spaces.Tuple(tuple(SPACES.values())),
}


class SampleEnv(gymnasium.Env):
    """Observations sampled from its own copy of ``space`` (seeded by ``reset(seed)``).

    The action space is ``space`` too; episodes are truncated after ``length`` steps. The
    reward is a quarter-integer drawn from ``np_random`` (exact in float32). With
    ``unordered``, dict observations come with their keys in reverse order.
    """

    def __init__(
        self,
        space: spaces.Space,
        length: int = 4,
        render_mode: str = "rgb_array",
        unordered: bool = False,
    ):
        self.unordered = unordered
        self.observation_space = copy.deepcopy(space)
        self.action_space = copy.deepcopy(space)
        self.length = length
        self.render_mode = render_mode
        self.current_step = 0
        self.current_options: dict | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.current_step = 0
        self.current_options = options
        return self._obs(), {"draw": int(self.np_random.integers(100))}

    def step(self, action: Any):
        self.current_step += 1
        reward = int(self.np_random.integers(100)) / 4
        truncated = self.current_step >= self.length
        return self._obs(), reward, False, truncated, {"t": self.current_step}

    def _obs(self) -> Any:
        obs = self.observation_space.sample()
        return dict(reversed(list(obs.items()))) if self.unordered else obs

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            return np.full((4, 4, 3), self.current_step, np.uint8)
        return None

    @staticmethod
    def custom_method(dim_0: int = 1, dim_1: int = 1) -> np.ndarray:
        return np.ones((dim_0, dim_1))


class CountEnv(gymnasium.Env):
    """Obs ``[100 * episode + t]``; even tags terminate, odd ones are truncated at ``t == 3 + tag``.

    The reward is ``t + 0.5 * action``; step infos ``{"t": t}``, reset infos ``{"episode": e}``.
    """

    def __init__(self, tag: int):
        self.observation_space = spaces.Box(0, 10_000, (1,), np.int64)
        self.action_space = spaces.Discrete(2)
        self.tag, self.length = tag, 3 + tag
        self.episode = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return np.array([100 * self.episode], np.int64), {"episode": self.episode}

    def step(self, action: Any):
        self.t += 1
        ended = self.t >= self.length
        terminated, truncated = ended and self.tag % 2 == 0, ended and self.tag % 2 == 1
        obs = np.array([100 * self.episode + self.t], np.int64)
        return obs, self.t + 0.5 * int(action), terminated, truncated, {"t": self.t}


class FlakyEnv(CountEnv):
    """A CountEnv whose ``step`` raises at ``t == 2`` (tag 0 only)."""

    def step(self, action: Any):
        if self.tag == 0 and self.t == 1:
            raise RuntimeError("flaky env")
        return super().step(action)


def image_frame(shape: tuple[int, ...], dtype: type, tag: int, t: int) -> np.ndarray:
    """ImageEnv's frame: a pattern that differs along every axis, plus ``10 * t + 60 * tag``."""
    return (np.indices(shape).sum(0) % 8 + 10 * t + 60 * tag).astype(dtype)


class ImageEnv(gymnasium.Env):
    """Frames ``image_frame`` of ``shape`` (``t``: the step of the episode); episodes are
    truncated at ``t == 4``; Discrete(2) actions."""

    def __init__(self, shape: tuple[int, ...], tag: int, dtype: type = np.uint8):
        self.observation_space = spaces.Box(0, 255, shape, dtype)
        self.action_space = spaces.Discrete(2)
        self.shape, self.dtype, self.tag, self.t = shape, dtype, tag, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return image_frame(self.shape, self.dtype, self.tag, 0), {}

    def step(self, action: Any):
        self.t += 1
        frame = image_frame(self.shape, self.dtype, self.tag, self.t)
        return frame, 0.0, False, self.t == 4, {}


class NoSeedEnv(gymnasium.Env):
    """An env whose ``reset`` takes only the keywords ``keywords`` (as old ``gym`` envs)."""

    observation_space = spaces.Box(0, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, keywords: tuple[str, ...]):
        obs = np.zeros(2, np.float32)
        if keywords == ():
            self.reset = lambda: (obs, {})
        elif keywords == ("seed",):
            self.reset = lambda seed=None: (obs, {})
        else:  # ("**kwargs",)
            self.reset = lambda **kwargs: (obs, {})

    def step(self, action: Any):
        return np.zeros(2, np.float32), 0.0, False, False, {}


def sample_env(name: str = "box", render_mode: str = "rgb_array") -> Callable[[], gymnasium.Env]:
    unordered = name == "unordered_dict"
    return lambda: SampleEnv(ALL_SPACES[name], render_mode=render_mode, unordered=unordered)


def count_fns() -> list[Callable[[], gymnasium.Env]]:
    return [lambda i=i: CountEnv(i) for i in range(N_ENVS)]


SB3_WRAPPERS = [VecNormalize, VecFrameStack]


def wrap(vec_env: VecEnv, wrapper: type | None) -> VecEnv:
    if wrapper is VecFrameStack:
        return VecFrameStack(vec_env, n_stack=2)
    return vec_env if wrapper is None else wrapper(vec_env)


# --------------------------------------------------------------------------- helpers


def assert_tree_equal(actual: Any, expected: Any) -> None:
    """Same dict/tuple structure, equal leaves and leaf dtypes."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (actual, expected)
        for key in expected:
            assert_tree_equal(actual[key], expected[key])
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected, strict=True):
            assert_tree_equal(a, e)
    else:
        np.testing.assert_array_equal(actual, expected)
        assert np.asarray(actual).dtype == np.asarray(expected).dtype, (actual, expected)


def assert_infos_equal(actual: list[dict], expected: list[dict]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert set(got) == set(want), (got, want)
        for key, value in want.items():
            if key == "terminal_observation":
                assert_tree_equal(got[key], value)
            else:
                assert got[key] == value and type(got[key]) is type(value), (key, got, want)


def run(vec_env: VecEnv, actions: list[Any], seed: int | None) -> list[tuple]:
    """``reset`` (after ``seed``) and a step per action: everything each returned."""
    if seed is not None:
        vec_env.seed(seed)
    out: list[tuple] = [(vec_env.reset(), list(vec_env.reset_infos))]
    for action in actions:
        out.append((*vec_env.step(action), list(vec_env.reset_infos)))
    return out


def assert_runs_equal(actual: list[tuple], expected: list[tuple], reward_dtype: bool) -> None:
    assert len(actual) == len(expected)
    (obs, reset_infos), (want_obs, want_reset_infos) = actual[0], expected[0]
    assert_tree_equal(obs, want_obs)
    assert_infos_equal(reset_infos, want_reset_infos)
    for (obs, rew, done, infos, resets), (w_obs, w_rew, w_done, w_infos, w_resets) in zip(
        actual[1:], expected[1:], strict=True
    ):
        assert_tree_equal(obs, w_obs)
        np.testing.assert_array_equal(rew, w_rew)
        assert not reward_dtype or rew.dtype == w_rew.dtype
        assert_tree_equal(done, w_done)
        assert_infos_equal(infos, w_infos)
        assert_infos_equal(resets, w_resets)


def space_actions(space: spaces.Space, steps: int) -> list[list[Any]]:
    """A list of per-env actions for each step, as SB3's tests send them."""
    space = copy.deepcopy(space)
    space.seed(123)
    return [[space.sample() for _ in range(N_ENVS)] for _ in range(steps)]


# --------------------------------------------------------------------------- the checks


# SB3's wrappers over BatchVecEnv are a second path, in the extended tier: CI covers the calls
# on BatchVecEnv itself ([BatchVecEnv-None], [BatchVecEnv-parent-None]), the wrappers passing
# them on over DummyVecEnv ([DummyVecEnv-VecNormalize], [DummyVecEnv-VecFrameStack]), and the
# wrappers' steps over BatchVecEnv in test_terminal_observation_through_sb3_wrappers.
@pytest.mark.parametrize(
    ("impl", "wrapper"),
    [
        *[(impl, None) for impl in ("DummyVecEnv", *OURS)],
        subproc("SubprocVecEnv", None),
        *[("DummyVecEnv", wrapper) for wrapper in SB3_WRAPPERS],
        *[
            pytest.param("BatchVecEnv", wrapper, marks=pytest.mark.extended)
            for wrapper in SB3_WRAPPERS
        ],
    ],
)
def test_attribute_and_method_calls_with_indices(impl, wrapper):
    vec_env = wrap(IMPLS[impl]([lambda: Monitor(SampleEnv(SPACES["box"]))] * N_ENVS), wrapper)
    try:
        vec_env.seed(0)
        vec_env.reset()
        np.testing.assert_array_equal(vec_env.render(mode="rgb_array"), vec_env.render())
        assert vec_env.render().shape == (8, 8, 3)  # 3 frames of 4x4 tiled 2x2
        with pytest.warns(UserWarning, match="render mode"):
            assert vec_env.render(mode="something_else") is None

        assert not vec_env.has_attr("dummy")
        assert vec_env.set_attr("dummy", 12) is None  # on the outermost wrapper (Monitor)
        assert vec_env.get_attr("dummy") == [12] * N_ENVS
        assert vec_env.env_method("set_wrapper_attr", "dummy2", 2) == [True] * N_ENVS
        assert vec_env.get_attr("dummy2") == [2] * N_ENVS

        results = vec_env.env_method("custom_method", 1, indices=None, dim_1=2)
        assert [r.tolist() for r in results] == [[[1.0, 1.0]]] * N_ENVS
        for i in range(N_ENVS):
            assert vec_env.set_attr("dummy1", i, indices=i) is None
        assert vec_env.has_attr("dummy1")
        assert vec_env.get_attr("dummy1") == [0, 1, 2]
        subset = vec_env.env_method("custom_method", 1, indices=[0, 2], dim_1=3)
        assert [r.tolist() for r in subset] == [[[1.0, 1.0, 1.0]]] * 2
        vec_env.set_attr("dummy1", 42, indices=None)
        assert vec_env.get_attr("dummy1") == [42] * N_ENVS

        vec_env.reset()
        calls = vec_env.env_method("set_wrapper_attr", "current_step", 12, indices=[0, 1])
        assert calls == [True, True]
        assert vec_env.get_attr("current_step") == [12, 12, 0]
        assert vec_env.get_attr("current_step", indices=[0, 1]) == [12, 12]
        assert vec_env.get_attr("current_step", indices=[2, 0]) == [0, 12]
        vec_env.reset()
        calls = vec_env.env_method("set_wrapper_attr", "current_step", 12, indices=[0, -1])
        assert calls == [True, True]
        assert vec_env.get_attr("current_step") == [12, 0, 12]
        assert vec_env.get_attr("current_step", indices=[-1]) == [12]
        if impl != "SubprocVecEnv":  # its worker dies of the AttributeError
            with pytest.raises(AttributeError):
                vec_env.get_attr("no_such_attribute")
            assert vec_env.get_attr("current_step", indices=1) == [0]  # still usable

        # Options apply at the next reset only; per-env options reach their own env.
        assert vec_env.get_attr("current_options") == [None] * N_ENVS
        vec_env.set_options({"hello": 1})
        assert vec_env.get_attr("current_options") == [None] * N_ENVS
        vec_env.reset()
        assert vec_env.get_attr("current_options") == [{"hello": 1}] * N_ENVS
        vec_env.reset()
        assert vec_env.get_attr("current_options") == [None] * N_ENVS
        options = [{"other_option": 2}, {"hello": 1}, {"hello": 1}]
        vec_env.set_options(options)
        vec_env.reset()
        assert vec_env.get_attr("current_options") == options
    finally:
        vec_env.close()


def _expected_count_steps(actions: list[np.ndarray]) -> list[tuple]:
    """What CountEnv's batch returns: SB3's contract worked out by hand."""
    episode, t = [1] * N_ENVS, [0] * N_ENVS
    out = []
    for action in actions:
        obs, rewards, dones, infos = [], [], [], []
        for i in range(N_ENVS):
            t[i] += 1
            rewards.append(t[i] + 0.5 * int(action[i]))
            done = t[i] == 3 + i
            info: dict[str, Any] = {"t": t[i], "TimeLimit.truncated": done and i % 2 == 1}
            if done:
                info["terminal_observation"] = np.array([100 * episode[i] + t[i]])
                episode[i], t[i] = episode[i] + 1, 0
            obs.append([100 * episode[i] + t[i]])
            dones.append(done)
            infos.append(info)
        resets = [{"episode": e} for e in episode]
        out.append((np.array(obs), np.array(rewards), np.array(dones), infos, resets))
    return out


@pytest.mark.parametrize("impl", WITH_SUBPROC)
def test_terminal_observation_flags_and_reset_infos_exactly(impl):
    actions = [np.array([k % 2, 1, (k + 1) % 2]) for k in range(9)]
    vec_env = IMPLS[impl](count_fns())
    try:
        got = run(vec_env, actions, seed=None)
    finally:
        vec_env.close()
    expected = [(np.array([[100]] * N_ENVS), [{"episode": 1}] * N_ENVS)]
    expected += _expected_count_steps(actions)
    assert_runs_equal(got, expected, reward_dtype=False)
    # Rewards are float32 as in DummyVecEnv; SubprocVecEnv stacks the envs' Python floats.
    reward_dtype = np.float64 if impl == "SubprocVecEnv" else np.float32
    assert all(step[1].dtype == reward_dtype for step in got[1:])
    assert all(step[2].dtype == np.bool_ for step in got[1:])


@pytest.mark.parametrize("wrapper", SB3_WRAPPERS)
@pytest.mark.parametrize("impl", WITH_SUBPROC)
def test_terminal_observation_through_sb3_wrappers(impl, wrapper):
    """SB3's wrappers normalise or stack the terminal observation where an episode ended."""
    vec_env = wrap(IMPLS[impl](count_fns()), wrapper)
    try:
        vec_env.reset()
        for k in range(5):  # env i's first episode ends at step 3 + i
            _, _, dones, infos = vec_env.step(np.zeros(N_ENVS, np.int64))
            for i in range(N_ENVS):
                assert dones[i] == (k + 1 == 3 + i)
                if not dones[i]:
                    assert "terminal_observation" not in infos[i]
                    continue
                terminal = infos[i]["terminal_observation"]
                if wrapper is VecNormalize:
                    raw = vec_env.unnormalize_obs(terminal)
                    np.testing.assert_allclose(raw, [100 + k + 1], rtol=1e-5)
                else:  # the previous frame, then the terminal one
                    np.testing.assert_array_equal(terminal, [100 + k, 100 + k + 1])
    finally:
        vec_env.close()


@pytest.mark.parametrize("name", list(ALL_SPACES))
def test_every_space_matches_dummy_vec_env(impl, name):
    space = ALL_SPACES[name]
    actions = space_actions(space, 6)  # truncation at step 4, then 2 steps more
    results = {}
    for which in ("DummyVecEnv", impl):
        vec_env = IMPLS[which]([sample_env(name)] * N_ENVS)
        try:
            results[which] = run(vec_env, actions, seed=11)
        finally:
            vec_env.close()
    got = results[impl]
    assert_runs_equal(got, results["DummyVecEnv"], reward_dtype=True)
    for step in got:
        obs = step[0]
        if isinstance(space, spaces.Dict):
            assert isinstance(obs, dict) and obs.keys() == space.spaces.keys()
            rows = [{key: obs[key][i] for key in obs} for i in range(N_ENVS)]
        elif isinstance(space, spaces.Tuple):
            assert isinstance(obs, tuple) and len(obs) == len(space.spaces)
            rows = [tuple(leaf[i] for leaf in obs) for i in range(N_ENVS)]
        else:
            assert obs.shape[0] == N_ENVS
            rows = list(obs)
        assert all(space.contains(row) for row in rows)
    np.testing.assert_array_equal(got[4][2], [True] * N_ENVS)


@pytest.mark.parametrize(
    ("impl", "start_method"),
    [
        subproc("SubprocVecEnv", None),
        *[(impl, m) for impl in OURS for m in (None, "forkserver", "spawn")],
    ],
)
def test_start_methods(impl, start_method):
    vec_env = IMPLS[impl](count_fns(), start_method=start_method)
    try:
        np.testing.assert_array_equal(vec_env.reset(), [[100]] * N_ENVS)
        obs, *_ = vec_env.step(np.zeros(N_ENVS, np.int64))
        np.testing.assert_array_equal(obs, [[101]] * N_ENVS)
    finally:
        vec_env.close()


def test_bad_start_methods_are_value_errors():
    with pytest.raises(ValueError, match=r"cannot find context for 'illegal_method'"):
        IMPLS["SubprocVecEnv"](count_fns(), start_method="illegal_method")
    for impl in OURS:  # SB3's words (multiprocessing's), which its own test matches
        with pytest.raises(ValueError, match=r"cannot find context for 'illegal_method'"):
            IMPLS[impl](count_fns(), start_method="illegal_method")
        # fork is refused: a fork of a process that runs threads (JAX's, torch's) can hang.
        with pytest.raises(ValueError, match=r"^context must be 'forkserver'.*'fork' can deadlock"):
            IMPLS[impl](count_fns(), start_method="fork")


@pytest.mark.parametrize("impl", MONITORED)
def test_env_is_wrapped(impl):
    fns = [sample_env(), lambda: Monitor(SampleEnv(SPACES["box"]))]
    vec_env = IMPLS[impl](fns)
    try:
        assert vec_env.env_is_wrapped(Monitor) == [False, True]
        assert vec_env.env_is_wrapped(Monitor, indices=[1]) == [True]
        assert vec_env.env_is_wrapped(gymnasium.Wrapper) == [False, True]
        assert VecFrameStack(vec_env, n_stack=2).env_is_wrapped(Monitor) == [False, True]
    finally:
        vec_env.close()


def test_seed_applies_at_the_next_reset_only(impl):
    vec_env = IMPLS[impl]([sample_env()] * N_ENVS)
    try:
        assert vec_env.seed(3) == [3, 4, 5]
        obs = vec_env.reset()
        assert [info["draw"] for info in vec_env.reset_infos] == [
            int(np.random.default_rng(3 + i).integers(100)) for i in range(N_ENVS)
        ]
        unseeded = vec_env.reset()
        assert not np.array_equal(unseeded, obs)
        vec_env.seed(3)
        np.testing.assert_array_equal(vec_env.reset(), obs)
        normalized = VecNormalize(vec_env)  # VecEnvWrapper.seed reaches the vec env
        normalized.seed(3)
        np.testing.assert_array_equal(vec_env.reset(), obs)
        # Without a seed, SB3 draws one; env i still gets that seed + i.
        seeds = vec_env.seed()
        assert seeds == [seeds[0] + i for i in range(N_ENVS)]
        vec_env.reset()
        assert [info["draw"] for info in vec_env.reset_infos] == [
            int(np.random.default_rng(seed).integers(100)) for seed in seeds
        ]
    finally:
        vec_env.close()


@pytest.mark.parametrize("impl", MONITORED)
def test_make_vec_env_matches_dummy_vec_env(impl):
    """SB3's make_vec_env (Monitor, seeds) on Pendulum: the same obs as DummyVecEnv's."""
    results = []
    for cls in (DummyVecEnv, IMPLS[impl]):
        vec_env = make_vec_env("Pendulum-v1", n_envs=N_ENVS, seed=0, vec_env_cls=cls)
        try:
            actions = [np.full((N_ENVS, 1), a, np.float32) for a in (-2.0, 0.5, 1.5)]
            results.append(run(vec_env, actions, seed=None))
        finally:
            vec_env.close()
    assert_runs_equal(results[1], results[0], reward_dtype=True)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_fixed_actions_bit_for_bit_as_dummy_vec_env(env_id):
    """300 steps over episode ends (CartPole terminates, Pendulum truncates at 200)."""
    space = gymnasium.make(env_id).action_space
    space.seed(5)
    actions = [np.stack([space.sample() for _ in range(4)]) for _ in range(300)]
    results = []
    for cls in (DummyVecEnv, IMPLS["BatchVecEnv"]):
        vec_env = cls([lambda: gymnasium.make(env_id)] * 4)
        try:
            results.append(run(vec_env, actions, seed=9))
        finally:
            vec_env.close()
    assert_runs_equal(results[1], results[0], reward_dtype=True)
    dones = np.array([step[2] for step in results[1][1:]])
    truncations = [info["TimeLimit.truncated"] for step in results[1][1:] for info in step[3]]
    if env_id == "Pendulum-v1":
        assert dones.sum() == 4 and dones[199].all() and all(truncations[199 * 4 :][:4])
    else:
        assert dones.sum() > 4 and not any(truncations)


def test_ppo_trains_bit_for_bit_as_on_dummy_vec_env():
    """SB3's PPO, same seed, on DummyVecEnv and BatchVecEnv: the same weights after training.

    2048 steps of Pendulum on 4 envs cross the 200-step time limit, so PPO's bootstrap from
    ``terminal_observation`` on truncation is part of what must agree.
    """
    torch.set_num_threads(1)
    trained = {}
    for name, cls in (("dummy", DummyVecEnv), ("batch", IMPLS["BatchVecEnv"])):
        vec_env = make_vec_env("Pendulum-v1", n_envs=4, seed=0, vec_env_cls=cls)
        try:
            model = PPO("MlpPolicy", vec_env, n_steps=128, batch_size=128, n_epochs=2, seed=0)
            model.learn(total_timesteps=2048)
        finally:
            vec_env.close()
        episodes = [(info["r"], info["l"]) for info in model.ep_info_buffer]
        trained[name] = model.policy.state_dict(), model.rollout_buffer, episodes
    (dummy_params, dummy_buffer, dummy_episodes) = trained["dummy"]
    (batch_params, batch_buffer, batch_episodes) = trained["batch"]
    assert model.num_timesteps == 2048
    assert batch_episodes == dummy_episodes and len(batch_episodes) == 8  # 2 per env
    for key, value in dummy_params.items():
        assert torch.equal(batch_params[key], value), key
    for field in ("observations", "actions", "rewards", "episode_starts", "values", "returns"):
        np.testing.assert_array_equal(getattr(batch_buffer, field), getattr(dummy_buffer, field))


@pytest.mark.parametrize(
    ("shape", "dtype", "channels_order", "channel_axis"),
    [
        ((12, 8, 3), np.uint8, None, -1),  # an image space, channels last: detected
        ((3, 8, 12), np.uint8, None, 0),  # channels first: detected
        ((12, 8, 3), np.uint8, "last", -1),
        ((12, 8, 3), np.uint8, "first", 0),  # forced onto the first axis
        ((2,), np.float32, None, -1),  # not an image: the last axis
    ],
)
def test_frame_stack_stacks_on_the_channel_axis(impl, shape, dtype, channels_order, channel_axis):
    """SB3's VecFrameStack over image (uint8) observations, by channels_order, through an
    episode end: each env's stack holds its last two frames, exactly."""
    fns = [lambda i=i: ImageEnv(shape, i, dtype) for i in range(N_ENVS)]
    vec_env = VecFrameStack(IMPLS[impl](fns), n_stack=2, channels_order=channels_order)
    try:
        stacked_shape = list(shape)
        stacked_shape[channel_axis] *= 2
        assert vec_env.observation_space.shape == tuple(stacked_shape)
        assert vec_env.observation_space.dtype == dtype

        def stacked(frames: list[int | None]) -> np.ndarray:
            """Each env's stack of its frames at steps ``frames`` (None: a zero frame)."""
            return np.stack(
                [
                    np.concatenate(
                        [
                            np.zeros(shape, dtype) if t is None else image_frame(shape, dtype, i, t)
                            for t in frames
                        ],
                        axis=channel_axis,
                    )
                    for i in range(N_ENVS)
                ]
            )

        assert_tree_equal(vec_env.reset(), stacked([None, 0]))
        for k in range(1, 6):  # the episodes are truncated at step 4
            obs, _, dones, infos = vec_env.step(np.zeros(N_ENVS, np.int64))
            assert dones.tolist() == [k == 4] * N_ENVS
            if k == 4:
                assert_tree_equal(obs, stacked([None, 0]))
                terminal = stacked([3, 4])
                for i in range(N_ENVS):
                    assert_tree_equal(infos[i]["terminal_observation"], terminal[i])
            else:
                assert_tree_equal(obs, stacked([k - 1, k] if k < 4 else [0, 1]))
    finally:
        vec_env.close()


@pytest.mark.parametrize(
    ("keywords", "missing"), [((), "`seed`"), (("seed",), None), (("**kwargs",), None)]
)
def test_an_env_whose_reset_takes_no_seed_is_refused(keywords, missing):
    """An env whose reset takes no ``seed`` (upstream's old ``test_backward_compat_seed``)
    fails in DummyVecEnv too; BatchVecEnv refuses it when the workers start, in one line. One
    that takes ``seed`` only is reset as SubprocVecEnv resets it (``options`` only when
    given)."""
    fns = [lambda: NoSeedEnv(keywords)] * N_ENVS
    dummy = DummyVecEnv(fns)
    if keywords == ():
        with pytest.raises(TypeError, match="unexpected keyword argument 'seed'"):
            dummy.reset()
    else:
        np.testing.assert_array_equal(dummy.reset(), np.zeros((N_ENVS, 2)))
    for impl in OURS:
        if missing is None:
            vec_env = IMPLS[impl](fns)
            try:
                np.testing.assert_array_equal(vec_env.reset(), np.zeros((N_ENVS, 2)))
                if keywords == ("seed",):  # options given: the env's own TypeError
                    vec_env.set_options({"level": 1})
                    with pytest.raises(TypeError, match="unexpected keyword argument 'options'"):
                        vec_env.reset()
            finally:
                vec_env.close()
            continue
        message = (
            f"env_fns[0] returned an env whose reset() takes no {missing} argument, which "
            "BatchVecEnv passes; give it Gymnasium's signature "
            "`reset(self, *, seed=None, options=None)`."
        )
        with pytest.raises(ValueError) as info:
            IMPLS[impl](fns)
        assert str(info.value) == message


def test_same_env_instance_is_a_value_error():
    env = SampleEnv(SPACES["box"])
    with pytest.raises(ValueError, match="same instance"):
        DummyVecEnv([lambda: env] * N_ENVS)
    for impl in OURS:
        with pytest.raises(ValueError, match=r"^env_fns\[0\] and env_fns\[1\] returned the same"):
            IMPLS[impl]([lambda: env] * N_ENVS)


# --------------------------------------------------------------------------- BatchVecEnv only


def test_unbatch_infos_gives_one_dict_per_env():
    info = {
        "t": np.array([1, 2, 3]),
        "_t": np.array([True, False, True]),
        "x": np.array([0.5, 1.5, 2.5], np.float32),  # no mask: every env
        "obj": np.array([None, "a", (1, 2)], dtype=object),
        "_obj": np.array([False, True, True]),
        "_own": np.array([7, 8, 9]),  # a key of the env's own, with a leading underscore
        "__own": np.array([True, True, False]),
        "nested": {"k": np.array([4, 5, 6]), "_k": np.array([False, False, True])},
        "_nested": np.array([False, False, True]),
    }
    rows = unbatch_infos(info, 3)
    assert rows == [
        {"t": 1, "x": 0.5, "_own": 7},
        {"x": 1.5, "obj": "a", "_own": 8},
        {"t": 3, "x": 2.5, "obj": (1, 2), "nested": {"k": 6}},
    ]
    assert type(rows[0]["t"]) is int and type(rows[0]["x"]) is float
    assert unbatch_infos({}, 2) == [{}, {}]


def test_a_restarted_env_reports_a_truncated_episode():
    options = WorkerOptions(num_workers=2, max_restarts=1)
    vec_env = BatchVecEnv([lambda i=i: FlakyEnv(i) for i in range(N_ENVS)], worker_options=options)
    assert vec_env.batch_env.worker_options is options
    try:
        vec_env.reset()
        vec_env.step(np.zeros(N_ENVS, np.int64))
        with pytest.warns(EnvRestartWarning, match="flaky env"):
            obs, rewards, dones, infos = vec_env.step(np.zeros(N_ENVS, np.int64))
    finally:
        vec_env.close()
    np.testing.assert_array_equal(obs, [[100], [102], [102]])  # env 0 rebuilt: episode 1
    np.testing.assert_array_equal(rewards, [0.0, 2.0, 2.0])
    np.testing.assert_array_equal(dones, [True, False, False])
    assert_infos_equal(
        infos,
        [
            {
                "env_restarted": True,
                "terminal_observation": np.array([101]),
                "TimeLimit.truncated": True,
            },
            {"t": 2, "TimeLimit.truncated": False},
            {"t": 2, "TimeLimit.truncated": False},
        ],
    )
    assert vec_env.reset_infos[0] == {"episode": 1}


def test_reset_during_a_pending_step_raises_and_close_is_idempotent():
    vec_env = BatchVecEnv(count_fns(), worker_options=TWO_WORKERS)
    vec_env.reset()
    vec_env.step_async(np.zeros(N_ENVS, np.int64))
    with pytest.raises(AlreadyPendingCallError):
        vec_env.reset()
    obs, *_ = vec_env.step_wait()
    np.testing.assert_array_equal(obs, [[101]] * N_ENVS)
    vec_env.close()
    vec_env.close()
    assert vec_env.closed


def test_reset_mask_option_is_refused():
    vec_env = BatchVecEnv(count_fns(), worker_options=TWO_WORKERS)
    try:
        vec_env.set_options({"reset_mask": np.ones(N_ENVS, bool)})
        message = r"^the options of env 0 hold the key 'reset_mask'.*rename that option\.$"
        with pytest.raises(ValueError, match=message):
            vec_env.reset()
    finally:
        vec_env.close()


def test_warnings_free_construction():
    """No warning from SB3's VecEnv base (e.g. a missing render_mode) for ordinary envs."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vec_env = BatchVecEnv(
            [lambda: gymnasium.make("Pendulum-v1")] * 2,
            worker_options=WorkerOptions(num_workers=1),
        )
    try:
        assert vec_env.render_mode is None and vec_env.num_envs == 2
        assert vec_env.observation_space == gymnasium.make("Pendulum-v1").observation_space
    finally:
        vec_env.close()

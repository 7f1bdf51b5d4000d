"""make()'s batch transform: bitwise the per-env wrapper stack, errors and restarts included."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from envs_testlib import BoundedNestedObsEnv, DivergingEnv, NestedEnv
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

from batchppo.envs import (
    BatchEnv,
    ConvertTo32Bit,
    RangeNormalize,
    SpaceMismatchError,
    WorkerOptions,
    batch_transform,
    make,
    make_env_fn,
)
from batchppo.envs.spaces import flattener, gym_leaves

pytestmark = pytest.mark.timeout(120)


def _sample(space: gymnasium.Space, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random agent actions, half again as wide as a Box's finite bounds (to be clipped)."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(0, space.n, n)
    low = np.where(np.isfinite(space.low), space.low, -3.0)
    high = np.where(np.isfinite(space.high), space.high, 3.0)
    return rng.uniform(1.5 * low, 1.5 * high, (n, *space.shape)).astype(space.dtype)


def _assert_same_steps(a: BatchEnv, b: BatchEnv, steps: int, seed: int = 0) -> int:
    """Steps both with the same random actions (and a mid-way reset); asserts bitwise equal
    obs, rewards, flags, final obs and infos. Returns how many episodes ended."""
    assert a.single_observation_space == b.single_observation_space
    assert a.single_action_space == b.single_action_space
    rng = np.random.default_rng(seed)
    ended = 0
    for x, y in zip(a.reset(seed=seed), b.reset(seed=seed), strict=True):
        _assert_equal(x, y)
    for t in range(steps):
        actions = _sample(a.single_action_space, rng, a.num_envs)
        if t % 2:
            results = a.step(actions), b.step(actions)
        else:
            results = a.step_arrays(actions), b.step_arrays(actions)
        for x, y in zip(*results, strict=True):
            _assert_equal(x, y)
        ended += int(np.sum(results[0][2] | results[0][3]))
        if t == steps // 2:
            for x, y in zip(a.reset(seed=seed + 1), b.reset(seed=seed + 1), strict=True):
                _assert_equal(x, y)
    return ended


def _assert_equal(x, y) -> None:
    if isinstance(x, dict):
        assert list(x) == list(y)
        for key in x:
            _assert_equal(x[key], y[key])
        return
    if isinstance(x, tuple):
        assert isinstance(y, tuple) and len(x) == len(y)
        for a, b in zip(x, y, strict=True):
            _assert_equal(a, b)
        return
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape
    if x.dtype.kind == "f":  # bitwise: signed zeros and NaN payloads included
        x, y = x.view(f"u{x.dtype.itemsize}"), y.view(f"u{y.dtype.itemsize}")
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    ("env_id", "max_length", "steps"),
    [("Pendulum-v1", 37, 300), ("HalfCheetah-v5", 29, 200), ("CartPole-v1", 60, 300)],
)
@pytest.mark.parametrize("backend", ["process", "sync"])
def test_make_is_bitwise_the_per_env_stack(env_id, max_length, steps, backend):
    kwargs = {"options": WorkerOptions(num_workers=2)} if backend == "process" else {}
    fns = [make_env_fn(env_id, max_length=max_length)] * 6
    step_in_parent = backend == "sync"
    with (
        make(env_id, 6, backend=backend, max_length=max_length, **kwargs) as fast,
        BatchEnv(
            fns,
            WorkerOptions(num_workers=2 - step_in_parent, step_in_parent=step_in_parent),
            autoreset_mode="SameStep",
        ) as slow,
    ):
        assert fast.transform is not None  # the batch path, not the per-env stack
        assert _assert_same_steps(fast, slow, steps) >= 6
        for name in ("observation_space", "action_space"):
            assert fast.get_attr(name) == slow.get_attr(name)


def test_make_without_range_normalisation_clips_to_the_env_bounds():
    options = WorkerOptions(num_workers=2)
    with make("Pendulum-v1", 4, options=options, max_length=20, normalize_ranges=False) as fast:
        fns = [make_env_fn("Pendulum-v1", max_length=20, normalize_ranges=False)] * 4
        with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as slow:
            assert fast.single_action_space.high[0] == np.inf  # ClipAction's space
            _assert_same_steps(fast, slow, 60)


@pytest.mark.filterwarnings("ignore:.*not within the observation space:UserWarning")
@pytest.mark.parametrize("backend", ["process", "sync"])
def test_make_on_nested_observations_is_bitwise_the_per_env_stack(backend):
    """Dict/Tuple observations: make() gives exactly make_env_fn's per-env stack, whose float
    Box leaves are range-normalised (the batch transform covers flat spaces only, so make()
    wraps each env in that stack)."""
    env_id = "envs_testlib:BoundedNestedObs-v0"
    kwargs = {"options": WorkerOptions(num_workers=2)} if backend == "process" else {}
    step_in_parent = backend == "sync"
    fns = [make_env_fn(env_id)] * 4
    with (
        make(env_id, 4, backend=backend, **kwargs) as fast,
        BatchEnv(
            fns,
            WorkerOptions(num_workers=2 - step_in_parent, step_in_parent=step_in_parent),
            autoreset_mode="SameStep",
        ) as slow,
    ):
        assert fast.transform is None
        assert fast.single_observation_space["b"].high.tolist() == [1, 1, np.inf]
        assert _assert_same_steps(fast, slow, 12) >= 4
        obs, _ = fast.reset(seed=0)
        assert np.all(np.abs(obs["b"][:, :2]) <= 1) and np.all(obs["b"][:, 2] == 7)


def test_nested_float_leaves_are_bitwise_the_batch_transform_of_flat_spaces():
    """A bounded float leaf of a nested observation comes out of the per-env stack bitwise as
    the same values of a flat space like it come out of make()'s batch transform."""
    raw = BoundedNestedObsEnv()
    stack = make_env_fn("envs_testlib:BoundedNestedObs-v0")()
    nested_obs = [stack.reset(seed=5)[0]]
    raw_obs = [raw.reset(seed=5)[0]]
    for _ in range(2):
        nested_obs.append(stack.step(np.zeros(1, np.float32))[0])
        raw_obs.append(raw.step(np.zeros(1))[0])
    raw_flat, out_flat = flattener(raw.observation_space), flattener(stack.observation_space)
    checked = 0
    for i, leaf in enumerate(gym_leaves(raw.observation_space)):
        if not (isinstance(leaf, spaces.Box) and leaf.dtype.kind == "f"):
            continue
        transform = batch_transform("x", leaf, spaces.Box(-2.0, 2.0, (1,), np.float64))
        assert transform is not None
        assert gym_leaves(stack.observation_space)[i] == transform.spaces[0]
        batch = transform.observations(np.stack([raw_flat(o)[i] for o in raw_obs]))
        stored = np.asarray(batch, transform.spaces[0].dtype)  # as BatchEnv stores it
        _assert_equal(np.stack([out_flat(o)[i] for o in nested_obs]), stored)
        checked += 1
    assert checked == 3


def _diverging(fault: str | None = None, at: int = 3, stacked: bool = False):
    """Env fns of 4 DivergingEnvs (env 2 faulty), raw or in the standard stack."""

    def fn(i: int):
        def build():
            env = TimeLimit(DivergingEnv(i, bad_tag=2, fault=fault, at=at), 9)
            if stacked:
                env = ConvertTo32Bit(RangeNormalize(env), env_id="Diverging-v0")
            return env

        return build

    return [fn(i) for i in range(4)]


def _transform():
    env = DivergingEnv()
    return batch_transform("Diverging-v0", env.observation_space, env.action_space)


@pytest.mark.parametrize("autoreset_mode", ["SameStep", "NextStep", "Disabled"])
def test_float64_envs_and_every_autoreset_mode(autoreset_mode):
    kwargs = {"autoreset_mode": autoreset_mode}
    options = WorkerOptions(num_workers=2)
    with (
        BatchEnv(_diverging("overflow"), options, transform=_transform(), **kwargs) as fast,
        BatchEnv(_diverging("overflow", stacked=True), options, **kwargs) as slow,
    ):
        assert fast.single_observation_space.dtype == np.float32
        assert fast.single_action_space.dtype == np.float32
        rng = np.random.default_rng(3)
        fast.reset(seed=1), slow.reset(seed=1)
        overflowed = False
        for _ in range(60):
            actions = _sample(fast.single_action_space, rng, 4)
            x, y = fast.step(actions), slow.step(actions)
            for u, v in zip(x, y, strict=True):
                _assert_equal(u, v)
            overflowed |= bool(np.isinf(x[1]).any())  # float64 -1e300 -> float32 -inf
            if autoreset_mode == "Disabled" and (x[2] | x[3]).any():
                mask = x[2] | x[3]
                for u, v in zip(
                    fast.reset(options={"reset_mask": mask}),
                    slow.reset(options={"reset_mask": mask}),
                    strict=True,
                ):
                    _assert_equal(u, v)
        assert overflowed  # finite in float64: no error in either path, inf after conversion


def _first_line(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value).splitlines()[0]


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("obs", "Diverging-v0: non-finite observation at step 3 of the episode"),
        ("reward", "Diverging-v0: non-finite reward inf at step 3 of the episode"),
        ("final_obs", "Diverging-v0: non-finite observation at step 3 of the episode"),
        ("reset_obs", "Diverging-v0: non-finite observation at step 0 of the episode"),
    ],
)
@pytest.mark.parametrize("step_in_parent", [False, True])
def test_non_finite_values_raise_as_in_the_stack(fault, expected, step_in_parent):
    options = WorkerOptions(num_workers=2, step_in_parent=step_in_parent, envs_per_worker=3)
    errors = []
    for fns, transform in [
        (_diverging(fault), _transform()),
        (_diverging(fault, stacked=True), None),
    ]:
        with BatchEnv(fns, options, transform=transform, autoreset_mode="SameStep") as env:
            env.reset(seed=0)
            with pytest.raises(ValueError) as excinfo:
                for _ in range(40):
                    env.step_arrays(np.zeros((4, 2), np.float32))
            errors.append(excinfo)
    fast, slow = (_first_line(e) for e in errors)
    assert fast == slow and fast.startswith(expected)
    assert "raised by env 2" in str(errors[0].value)  # the env that returned it


@pytest.mark.parametrize("fault", ["obs", "reward", "final_obs"])
@pytest.mark.filterwarnings("ignore::batchppo.envs.EnvRestartWarning")
def test_non_finite_values_restart_the_env_as_in_the_stack(fault):
    options = WorkerOptions(num_workers=2, max_restarts=10)
    with (
        BatchEnv(
            _diverging(fault), options, transform=_transform(), autoreset_mode="SameStep"
        ) as fast,
        BatchEnv(_diverging(fault, stacked=True), options, autoreset_mode="SameStep") as slow,
    ):
        fast.reset(seed=0), slow.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(40):
            actions = _sample(fast.single_action_space, rng, 4)
            x, y = fast.step(actions), slow.step(actions)
            for u, v in zip(x, y, strict=True):
                _assert_equal(u, v)
        assert fast.restarts == slow.restarts >= 2  # a rebuilt env 2 diverges again


def test_transform_needs_the_spaces_it_was_built_for():
    env = DivergingEnv()
    other = batch_transform("Pendulum-v1", env.observation_space, spaces.Box(-1, 1, (2,)))
    with pytest.raises(SpaceMismatchError, match="the transform applies to"):
        BatchEnv(
            _diverging(), WorkerOptions(num_workers=1), transform=other, autoreset_mode="SameStep"
        )


def test_spaces_the_transform_does_not_cover():
    nested = NestedEnv()
    assert batch_transform("x", nested.observation_space, spaces.Box(-1, 1, (1,))) is None
    box = spaces.Box(-1, 1, (2,))
    assert batch_transform("x", spaces.Box(0, 255, (2,), np.uint8), box) is None
    assert batch_transform("x", box, spaces.MultiDiscrete([2, 3])) is None
    assert batch_transform("x", box, spaces.Discrete(3)) is not None

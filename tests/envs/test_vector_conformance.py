"""BatchEnv against Gymnasium's AsyncVectorEnv: the same checks, run on both.

Every test but the last takes ``impl``, one of Gymnasium's ``AsyncVectorEnv`` and two
BatchEnv layouts (envs in worker processes only; a share stepped in the parent), and makes
the same assertions for each: exact observation, reward and flag sequences across episode
boundaries in every autoreset mode and for every space kind BatchEnv supports, seeds,
``reset_mask``, ``final_obs``/``final_info``, the errors of out-of-order calls and
``np_random_seed``, and AsyncVectorEnv's constructor keywords (``shared_memory``, ``copy``,
``context``, ``daemon``, ``worker``, ``observation_mode``). Where BatchEnv differs on purpose (a
dense ``final_obs``, float32 rewards, the caller's ``options`` left alone, the keyword values it
refuses) is asserted in the last tests.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import cloudpickle
import gymnasium
import numpy as np
import pytest
from envs_testlib import assert_all_gone, wait_until
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.async_vector_env import _async_worker
from gymnasium.vector.utils import (
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
    iterate,
)

from batchppo.envs import BatchEnv, WorkerOptions

pytestmark = pytest.mark.timeout(120)

# The envs below travel to BatchEnv's workers by value, as a script's envs would.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

NUM_ENVS = 3  # tags 0 and 2 terminate at t == 3; tag 1 is truncated at t == 5
SAME, NEXT, DISABLED = AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED


def _bits(episode: int, t: int, tag: int) -> list[int]:
    return [episode & 1, episode >> 1 & 1, t & 1, t >> 1 & 1, t >> 2 & 1, tag & 1]


# kind: (observation space, action space, obs of (tag, episode, t)).
KINDS: dict[str, tuple[spaces.Space, spaces.Space, Any]] = {
    "box": (
        spaces.Box(-np.inf, np.inf, (3,), np.float32),
        spaces.Box(-1.0, 1.0, (2,), np.float32),
        lambda tag, ep, t: np.array([tag, ep, t], np.float32),
    ),
    "discrete": (
        spaces.Discrete(1000),
        spaces.Discrete(3),
        lambda tag, ep, t: 100 * tag + 10 * ep + t,
    ),
    "multidiscrete": (
        spaces.MultiDiscrete([8, 8, 8]),
        spaces.MultiDiscrete([2, 3]),
        lambda tag, ep, t: np.array([tag, ep, t], np.int64),
    ),
    "multibinary": (
        spaces.MultiBinary(6),
        spaces.MultiBinary(3),
        lambda tag, ep, t: np.array(_bits(ep, t, tag), np.int8),
    ),
    "bool_box": (
        spaces.Box(0, 1, (6,), np.bool_),
        spaces.Box(0, 1, (2,), np.bool_),
        lambda tag, ep, t: np.array(_bits(ep, t, tag), np.bool_),
    ),
    "dict": (
        spaces.Dict(
            {
                "pos": spaces.Box(-np.inf, np.inf, (3,), np.float32),
                "t": spaces.Discrete(8),
                "flags": spaces.Tuple((spaces.MultiBinary(2), spaces.Box(0, 1, (1,), np.bool_))),
            }
        ),
        spaces.Dict({"move": spaces.Box(-1.0, 1.0, (2,), np.float32), "pick": spaces.Discrete(3)}),
        lambda tag, ep, t: {
            "pos": np.array([tag, ep, t], np.float32),
            "t": t,
            "flags": (np.array([ep & 1, t & 1], np.int8), np.array([t >= 3])),
        },
    ),
    "tuple": (
        spaces.Tuple(
            (
                spaces.Discrete(8),
                spaces.Dict(
                    {
                        "ep": spaces.MultiDiscrete([8]),
                        "xy": spaces.Box(-np.inf, np.inf, (2,), np.float64),
                    }
                ),
            )
        ),
        spaces.Tuple((spaces.MultiBinary(2), spaces.Discrete(2))),
        lambda tag, ep, t: (t, {"ep": np.array([ep]), "xy": np.array([tag, t], np.float64)}),
    ),
}


def _leaf_values(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaf_values(value[key])]
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaf_values(item)]
    return [value]


def action_code(action: Any) -> int:
    """A small integer summarising an action (rounded sum of its leaves): enters the reward."""
    return int(np.round(sum(float(np.sum(leaf)) for leaf in _leaf_values(action))))


class CountingEnv(gymnasium.Env):
    """Counts steps ``t`` and resets ``episode``; the obs encodes ``(tag, episode, t)``.

    Even tags terminate at ``t >= 3``, odd tags are truncated at ``t >= 5``. The reward is
    ``t + 0.5 * action_code(action)``, step infos are ``{"t": t}`` and reset infos
    ``{"episode": episode, "draw": <an int drawn from np_random>}``.
    """

    def __init__(self, kind: str, tag: int):
        self.observation_space, self.action_space, self._encode = KINDS[kind]
        self.tag = tag
        self.episode = 0
        self.t = 0
        self.last_action: Any = None
        self.last_options: Any = "never reset"

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.last_options = options
        self.episode += 1
        self.t = 0
        draw = int(self.np_random.integers(1000))
        return self._encode(self.tag, self.episode, 0), {"episode": self.episode, "draw": draw}

    def step(self, action: Any):
        self.last_action = action
        self.t += 1
        terminated = self.tag % 2 == 0 and self.t >= 3
        truncated = self.tag % 2 == 1 and self.t >= 5
        reward = self.t + 0.5 * action_code(action)
        obs = self._encode(self.tag, self.episode, self.t)
        return obs, reward, terminated, truncated, {"t": self.t}

    def parent_pid(self) -> int:
        """The pid of the process that started this env's process."""
        return os.getppid()

    def start_child(self) -> int:
        """Starts a child process and returns its exit code (a daemonic process cannot)."""
        child = multiprocessing.get_context("fork").Process(target=os._exit, args=(0,))
        child.start()
        child.join(60)
        return child.exitcode


class BoundsEnv(gymnasium.Env):
    """Env ``tag``'s observation space depends on its tag: its bounds, or (``shape``) its shape.

    The obs is ``[tag, episode]`` (``"box"``) or ``tag`` (``"discrete"``, in ``Discrete(tag +
    2)``); any action does.
    """

    def __init__(self, kind: str, tag: int, shape: bool = False):
        if kind == "box":
            size = 2 + (tag if shape else 0)
            self.observation_space = spaces.Box(-1.0 - tag, 1.0 + tag, (size,), np.float32)
        else:
            self.observation_space = spaces.Discrete(tag + 2)
        self.action_space = spaces.Discrete(2)
        self.kind, self.tag, self.episode = kind, tag, 0

    def _obs(self) -> Any:
        if self.kind == "box":
            obs = np.zeros(self.observation_space.shape, np.float32)
            obs[:2] = [self.tag, self.episode]
            return obs
        return self.tag

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.episode += 1
        return self._obs(), {}

    def step(self, action: Any):
        return self._obs(), 0.0, False, False, {}


# The test process runs JAX's threads (other tests import it), and forking a multithreaded
# process can deadlock the child: Gymnasium's default context on Linux is fork.
_CONTEXT = "forkserver"

IMPLS = {
    "AsyncVectorEnv": lambda fns, mode, **kw: AsyncVectorEnv(
        fns, autoreset_mode=mode, **{"context": _CONTEXT, **kw}
    ),
    "BatchEnv": lambda fns, mode, **kw: BatchEnv(
        fns, WorkerOptions(num_workers=2), autoreset_mode=mode, **kw
    ),
    "BatchEnv-parent": lambda fns, mode, **kw: BatchEnv(
        fns, WorkerOptions(num_workers=2, step_in_parent=True), autoreset_mode=mode, **kw
    ),
}
# The implementations whose every env runs in a worker process (for the checks of workers).
WORKER_IMPLS = ["AsyncVectorEnv", "BatchEnv"]


@pytest.fixture(params=list(IMPLS))
def impl(request: pytest.FixtureRequest) -> str:
    return request.param


@contextlib.contextmanager
def open_vec(
    impl: str, kind: str = "box", mode: AutoresetMode = SAME, **kwargs: Any
) -> Iterator[Any]:
    fns = [lambda i=i: CountingEnv(kind, i) for i in range(NUM_ENVS)]
    env = IMPLS[impl](fns, mode, **kwargs)
    try:
        yield env
    finally:
        env.close()


# --------------------------------------------------------------------------- helpers


def assert_tree_equal(actual: Any, expected: Any, dtypes: bool = True) -> None:
    """Same dict/tuple structure, equal leaves (and equal leaf dtypes when ``dtypes``)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (actual, expected)
        for key in expected:
            assert_tree_equal(actual[key], expected[key], dtypes)
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected, strict=True):
            assert_tree_equal(a, e, dtypes)
    else:
        np.testing.assert_array_equal(actual, expected)
        if dtypes:
            assert np.asarray(actual).dtype == np.asarray(expected).dtype, (actual, expected)


def expected_obs(kind: str, rows: list[tuple[int, int]]) -> Any:
    """The batch of obs of envs ``i`` at ``rows[i] = (episode, t)``, batched by Gymnasium."""
    space, _, encode = KINDS[kind]
    values = [encode(tag, ep, t) for tag, (ep, t) in enumerate(rows)]
    return concatenate(space, values, create_empty_array(space, len(rows)))


def final_obs_row(final_obs: Any, i: int) -> Any:
    """Env ``i``'s final obs from Gymnasium's object array or BatchEnv's dense batch."""
    if isinstance(final_obs, np.ndarray) and final_obs.dtype == object:
        return final_obs[i]
    if isinstance(final_obs, dict):
        return {key: final_obs_row(value, i) for key, value in final_obs.items()}
    if isinstance(final_obs, tuple):
        return tuple(final_obs_row(value, i) for value in final_obs)
    return final_obs[i]


def actions_for(kind: str, k: int) -> Any:
    """A deterministic batch of actions for step ``k`` (the same for every implementation)."""
    space = batch_space(KINDS[kind][1], NUM_ENVS)
    space.seed(k)
    return space.sample()


def second_draw(seed: int) -> int:
    """The draw of an env's second reset after seeding it with ``seed``."""
    rng = np.random.default_rng(seed)
    rng.integers(1000)
    return int(rng.integers(1000))


def final_mask(infos: dict[str, Any]) -> np.ndarray:
    """``_final_obs``, all False when absent (Gymnasium leaves it out when nothing ended)."""
    return infos.get("_final_obs", np.zeros(NUM_ENVS, bool))


# Per step after reset(seed): (episode, t) of the obs, the reward's t part, terminated,
# truncated, and the (episode, t) of the final obs where an episode ended.
Row = tuple[tuple[int, int], int, bool, bool, "tuple[int, int] | None"]
EVEN: dict[AutoresetMode, list[Row]] = {
    SAME: [
        ((1, 1), 1, False, False, None),
        ((1, 2), 2, False, False, None),
        ((2, 0), 3, True, False, (1, 3)),
        ((2, 1), 1, False, False, None),
        ((2, 2), 2, False, False, None),
        ((3, 0), 3, True, False, (2, 3)),
    ],
    NEXT: [
        ((1, 1), 1, False, False, None),
        ((1, 2), 2, False, False, None),
        ((1, 3), 3, True, False, None),
        ((2, 0), 0, False, False, None),  # the reset step: reward 0, action ignored
        ((2, 1), 1, False, False, None),
        ((2, 2), 2, False, False, None),
    ],
}
ODD: dict[AutoresetMode, list[Row]] = {
    SAME: [
        ((1, 1), 1, False, False, None),
        ((1, 2), 2, False, False, None),
        ((1, 3), 3, False, False, None),
        ((1, 4), 4, False, False, None),
        ((2, 0), 5, False, True, (1, 5)),
        ((2, 1), 1, False, False, None),
    ],
    NEXT: [
        ((1, 1), 1, False, False, None),
        ((1, 2), 2, False, False, None),
        ((1, 3), 3, False, False, None),
        ((1, 4), 4, False, False, None),
        ((1, 5), 5, False, True, None),
        ((2, 0), 0, False, False, None),
    ],
}


# --------------------------------------------------------------------------- the checks


@pytest.mark.parametrize("kind", list(KINDS))
def test_spaces_and_reset_obs(impl, kind):
    obs_space, act_space, _ = KINDS[kind]
    with open_vec(impl, kind) as env:
        assert env.num_envs == NUM_ENVS
        assert env.single_observation_space == obs_space
        assert env.single_action_space == act_space
        assert env.observation_space == batch_space(obs_space, NUM_ENVS)
        assert env.action_space == batch_space(act_space, NUM_ENVS)
        obs, infos = env.reset(seed=0)
        assert_tree_equal(obs, expected_obs(kind, [(1, 0)] * NUM_ENVS))
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(infos["episode"], [1, 1, 1])
        np.testing.assert_array_equal(infos["_episode"], [True, True, True])


@pytest.mark.parametrize("mode", [SAME, NEXT])
@pytest.mark.parametrize("kind", list(KINDS))
def test_exact_sequences_across_episode_boundaries(impl, kind, mode):
    with open_vec(impl, kind, mode) as env:
        assert env.metadata["autoreset_mode"] == mode
        env.reset(seed=1)
        for k in range(6):
            actions = actions_for(kind, k)
            obs, reward, terminated, truncated, infos = env.step(actions)
            rows = [EVEN[mode][k], ODD[mode][k], EVEN[mode][k]]
            assert_tree_equal(obs, expected_obs(kind, [row[0] for row in rows]))
            codes = [action_code(a) for a in iterate(env.action_space, actions)]
            expected_reward = [
                row[1] + (0.5 * code if row[1] else 0.0)
                for row, code in zip(rows, codes, strict=True)
            ]
            np.testing.assert_array_equal(reward, expected_reward)
            np.testing.assert_array_equal(terminated, [row[2] for row in rows])
            np.testing.assert_array_equal(truncated, [row[3] for row in rows])
            assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
            ended = [row[4] is not None for row in rows]
            np.testing.assert_array_equal(final_mask(infos), ended)
            for i, row in enumerate(rows):
                if row[4] is not None:
                    expected = KINDS[kind][2](i, *row[4])
                    assert_tree_equal(final_obs_row(infos["final_obs"], i), expected, False)
            if k == 0:  # every env got its own action, as a value of the single space
                for got, sent in zip(
                    env.get_attr("last_action"), iterate(env.action_space, actions), strict=True
                ):
                    assert_tree_equal(got, sent, dtypes=False)
                    assert env.single_action_space.contains(got)


def test_same_step_infos_of_an_episode_end(impl):
    with open_vec(impl, "box", SAME) as env:
        env.reset(seed=5)
        draws = [second_draw(5 + i) for i in range(3)]
        for k in range(2):
            *_, infos = env.step(actions_for("box", k))
            assert set(infos) - {"final_obs", "_final_obs"} == {"t", "_t"}
        *_, infos = env.step(actions_for("box", 2))  # envs 0 and 2 terminate and reset
    assert set(infos) - {"final_obs", "_final_obs"} == {
        "t",
        "_t",
        "episode",
        "_episode",
        "draw",
        "_draw",
        "final_info",
        "_final_info",
    }
    np.testing.assert_array_equal(infos["_final_info"], [True, False, True])
    assert set(infos["final_info"]) == {"t", "_t"}
    np.testing.assert_array_equal(infos["final_info"]["t"], [3, 0, 3])
    np.testing.assert_array_equal(infos["final_info"]["_t"], [True, False, True])
    # The reset infos of envs 0 and 2 sit at the top level, beside env 1's step info.
    np.testing.assert_array_equal(infos["t"], [0, 3, 0])
    np.testing.assert_array_equal(infos["_t"], [False, True, False])
    np.testing.assert_array_equal(infos["episode"], [2, 0, 2])
    np.testing.assert_array_equal(infos["_episode"], [True, False, True])
    # The autoreset continues each env's generator (seeded 5 + i at the first reset).
    np.testing.assert_array_equal(infos["draw"], [draws[0], 0, draws[2]])
    np.testing.assert_array_equal(infos["_final_obs"], [True, False, True])
    for i in (0, 2):
        np.testing.assert_array_equal(final_obs_row(infos["final_obs"], i), [i, 1, 3])


def test_next_step_infos_of_the_reset_step(impl):
    with open_vec(impl, "box", NEXT) as env:
        env.reset(seed=0)
        for k in range(3):
            *_, infos = env.step(actions_for("box", k))
            assert set(infos) == {"t", "_t"}
        *_, infos = env.step(actions_for("box", 3))  # envs 0 and 2 reset in this step
    assert set(infos) == {"t", "_t", "episode", "_episode", "draw", "_draw"}
    np.testing.assert_array_equal(infos["_t"], [False, True, False])
    np.testing.assert_array_equal(infos["episode"], [2, 0, 2])
    np.testing.assert_array_equal(infos["_episode"], [True, False, True])


@pytest.mark.parametrize("kind", list(KINDS))
def test_disabled_mode_resets_only_where_the_mask_says(impl, kind):
    with open_vec(impl, kind, DISABLED) as env:
        assert env.metadata["autoreset_mode"] == DISABLED
        env.reset(seed=3)
        for k in range(3):
            obs, _, terminated, truncated, infos = env.step(actions_for(kind, k))
            assert "final_obs" not in infos and "final_info" not in infos
        np.testing.assert_array_equal(terminated, [True, False, True])
        assert_tree_equal(obs, expected_obs(kind, [(1, 3)] * 3))
        obs, infos = env.reset(options={"reset_mask": terminated | truncated})
        assert_tree_equal(obs, expected_obs(kind, [(2, 0), (1, 3), (2, 0)]))
        assert set(infos) == {"episode", "_episode", "draw", "_draw"}
        np.testing.assert_array_equal(infos["_episode"], [True, False, True])
        assert env.get_attr("last_options") == ({}, None, {})  # the mask is not passed on
        for k in range(3, 5):
            obs, _, terminated, truncated, _ = env.step(actions_for(kind, k))
        assert_tree_equal(obs, expected_obs(kind, [(2, 2), (1, 5), (2, 2)]))
        np.testing.assert_array_equal(truncated, [False, True, False])
        np.testing.assert_array_equal(terminated, [False, False, False])
        mask = np.array([False, True, False])
        obs, infos = env.reset(seed=[None, 9, None], options={"reset_mask": mask, "x": 1})
        assert_tree_equal(obs, expected_obs(kind, [(2, 2), (2, 0), (2, 2)]))
        np.testing.assert_array_equal(
            infos["draw"], [0, np.random.default_rng(9).integers(1000), 0]
        )
        assert env.get_attr("last_options")[1] == {"x": 1}
        assert env.np_random_seed == (3, 9, 5)
        obs, _, terminated, truncated, _ = env.step(actions_for(kind, 5))
        assert_tree_equal(obs, expected_obs(kind, [(2, 3), (2, 1), (2, 3)]))
        np.testing.assert_array_equal(terminated, [True, False, True])
        # Nothing resets by itself: ended envs step on.
        obs, _, terminated, truncated, _ = env.step(actions_for(kind, 6))
        assert_tree_equal(obs, expected_obs(kind, [(2, 4), (2, 2), (2, 4)]))
        np.testing.assert_array_equal(terminated, [True, False, True])


@pytest.mark.parametrize("mode", [SAME, NEXT, DISABLED])
def test_reset_mask_in_every_mode(impl, mode):
    with open_vec(impl, "dict", mode) as env:
        env.reset(seed=0)
        env.step(actions_for("dict", 0))
        obs, infos = env.reset(options={"reset_mask": np.array([False, True, False])})
        assert_tree_equal(obs, expected_obs("dict", [(1, 1), (2, 0), (1, 1)]))
        np.testing.assert_array_equal(infos["episode"], [0, 2, 0])
        obs, *_ = env.step(actions_for("dict", 1))
        assert_tree_equal(obs, expected_obs("dict", [(1, 2), (2, 1), (1, 2)]))


@pytest.mark.parametrize(
    "mask",
    [
        [True, False, True],  # a list, not an array
        np.array([True, False]),  # wrong shape
        np.array([1, 0, 1]),  # wrong dtype
        np.zeros(3, bool),  # resets nothing
    ],
)
def test_bad_reset_mask_is_an_assertion_error(impl, mask):
    with open_vec(impl) as env:
        env.reset(seed=0)
        with pytest.raises(AssertionError, match="reset_mask"):
            env.reset(options={"reset_mask": mask})


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        ([True, False, True], "must be a numpy array, got <class 'list'>"),
        (np.array([True, False]), "must have shape `(3,)`, got (2,)"),
        (np.array([1, 0, 1]), "must have `dtype=np.bool_`, got int64"),
        (np.zeros(3, bool), "must contain a boolean array, got reset_mask=[False False False]"),
    ],
)
def test_bad_reset_mask_has_gymnasiums_words(impl, mask, words):
    with open_vec(impl) as env:
        env.reset(seed=0)
        with pytest.raises(AssertionError) as info:
            env.reset(options={"reset_mask": mask})
    assert str(info.value) == f"`options['reset_mask': mask]` {words}"


def test_a_scalar_action_for_a_batch_is_a_type_error(impl):
    with open_vec(impl) as env:
        env.reset(seed=0)
        with pytest.raises(TypeError, match=r"^Unable to iterate over the following elements: 0"):
            env.step(0)
        obs, *_ = env.step(actions_for("box", 0))  # the env is still usable
        assert_tree_equal(obs, expected_obs("box", [(1, 1)] * NUM_ENVS))


def test_close_with_a_call_pending_warns(impl):
    env = IMPLS[impl]([lambda i=i: CountingEnv("box", i) for i in range(NUM_ENVS)], SAME)
    env.reset(seed=0)
    env.step_async(actions_for("box", 0))
    expected = "Calling `close` while waiting for a pending call to `step` to complete."
    with pytest.warns(UserWarning, match=re.escape(expected)):
        env.close()
    assert env.closed


class StuckEnv(CountingEnv):
    """A CountingEnv whose step creates the file ``f"{marker}.{pid}"`` (``pid``: its process
    id), then never returns."""

    def __init__(self, kind: str, tag: int, marker: str):
        super().__init__(kind, tag)
        self.marker = marker

    def step(self, action: Any):
        with open(f"{self.marker}.{os.getpid()}", "w"):
            pass
        time.sleep(3600)

    def pid(self) -> int:
        return os.getpid()


def test_close_abandons_a_pending_call_where_gymnasium_waits_for_it(tmp_path):
    """A documented difference: BatchEnv's close() with a step pending warns as Gymnasium's
    does, then ends the workers without waiting for the step (Gymnasium's close waits for
    the pending call, here for ever)."""
    marker = str(tmp_path / "stuck")
    env = BatchEnv(
        [lambda i=i: StuckEnv("box", i, marker) for i in range(NUM_ENVS)],
        WorkerOptions(num_workers=2),
    )
    env.reset(seed=0)
    pids = set(env.call("pid"))
    env.step_async(actions_for("box", 0))
    wait_until(
        lambda: all(os.path.exists(f"{marker}.{pid}") for pid in pids), "every worker's step"
    )
    with pytest.warns(UserWarning, match="while waiting for a pending call to `step`"):
        env.close()
    assert env.closed and len(pids) == 2
    assert_all_gone(pids)


def test_the_default_autoreset_is_gymnasiums_so_its_wrappers_take_batch_env():
    """``BatchEnv(fns)`` where ``AsyncVectorEnv(fns)`` was, with no keyword: NEXT_STEP, and
    Gymnasium's observation wrappers that need it take it and step as over AsyncVectorEnv."""
    from gymnasium.wrappers.vector import FlattenObservation, NormalizeObservation

    fns = [lambda i=i: CountingEnv("dict", i) for i in range(NUM_ENVS)]
    results = {}
    for name, cls in (("AsyncVectorEnv", AsyncVectorEnv), ("BatchEnv", BatchEnv)):
        kwargs = {"context": _CONTEXT} if cls is AsyncVectorEnv else {}
        env = NormalizeObservation(FlattenObservation(cls(fns, **kwargs)))
        assert env.metadata["autoreset_mode"] is NEXT
        obs, _ = env.reset(seed=0)
        rows = [obs]
        for k in range(6):
            obs, reward, terminated, truncated, _ = env.step(actions_for("dict", k))
            rows.append(np.concatenate([obs.ravel(), reward, terminated, truncated]))
        env.close()
        results[name] = rows
    for ours, theirs in zip(results["BatchEnv"], results["AsyncVectorEnv"], strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_seeds_and_np_random_seed(impl):
    with open_vec(impl) as env:
        _, infos = env.reset(seed=42)
        assert env.np_random_seed == (42, 43, 44)
        assert all(type(s) is int for s in env.np_random_seed)
        expected = [np.random.default_rng(42 + i).integers(1000) for i in range(3)]
        np.testing.assert_array_equal(infos["draw"], expected)
        _, again = env.reset(seed=42)
        np.testing.assert_array_equal(again["draw"], expected)
        env.reset(seed=[1, None, 3])
        assert env.np_random_seed == (1, 43, 3)
        with pytest.raises(AssertionError):
            env.reset(seed=[1, 2])


# AsyncVectorEnv logs the error of `call("step")` in its workers as warnings.
@pytest.mark.filterwarnings("ignore:.*(error|Traceback|exception).*:UserWarning")
def test_async_pairs_and_out_of_order_calls(impl):
    action = actions_for("box", 0)
    with open_vec(impl) as env:
        with pytest.raises(NoAsyncCallError) as info:
            env.reset_wait()
        assert info.value.name == "reset"
        env.reset_async(seed=0)
        with pytest.raises(AlreadyPendingCallError) as info:
            env.step_async(action)
        assert info.value.name == "reset"
        with pytest.raises(AlreadyPendingCallError):
            env.reset_async()
        with pytest.raises(AlreadyPendingCallError):
            env.call_async("tag")
        with pytest.raises(AlreadyPendingCallError):
            env.set_attr("tag", 1)
        with pytest.raises(NoAsyncCallError) as info:
            env.step_wait()
        assert info.value.name == "step"
        obs, _ = env.reset_wait()
        np.testing.assert_array_equal(obs[:, 2], [0, 0, 0])
        with pytest.raises(NoAsyncCallError):
            env.step_wait()
        env.step_async(action)
        with pytest.raises(AlreadyPendingCallError) as info:
            env.step_async(action)
        assert info.value.name == "step"
        with pytest.raises(AlreadyPendingCallError):
            env.reset_async(seed=0)
        with pytest.raises(AlreadyPendingCallError):
            env.reset(seed=0)
        obs, *_ = env.step_wait()
        np.testing.assert_array_equal(obs[:, 2], [1, 1, 1])
        env.call_async("tag")
        with pytest.raises(NoAsyncCallError) as info:
            env.reset_wait()
        assert env.call_wait() == (0, 1, 2)
        with pytest.raises(ValueError, match="use `step` directly"):
            env.call("step", action)
    env.close()  # closing twice is fine
    for call in (
        lambda: env.step(action),
        lambda: env.step_async(action),
        lambda: env.step_wait(),
        lambda: env.reset(),
        lambda: env.reset_async(),
        lambda: env.reset_wait(),
        lambda: env.get_attr("tag"),
        lambda: env.set_attr("tag", 1),
    ):
        with pytest.raises(ClosedEnvironmentError):
            call()


def test_differing_spaces_are_a_runtime_error(impl):
    fns = [lambda i=i: CountingEnv("box" if i != 1 else "discrete", i) for i in range(NUM_ENVS)]
    with pytest.raises(RuntimeError):
        IMPLS[impl](fns, SAME).close()


# --------------------------------------------------------------------------- keywords


def test_async_vector_env_keywords_at_their_defaults(impl):
    keywords = {
        "shared_memory": True,
        "copy": True,
        "context": "forkserver",
        "daemon": True,
        "worker": None,
        "observation_mode": "same",
    }
    with open_vec(impl, **keywords) as env:
        for name, value in keywords.items():
            assert getattr(env, name) == value, name
        obs, _ = env.reset(seed=0)
        assert_tree_equal(obs, expected_obs("box", [(1, 0)] * NUM_ENVS))


@pytest.mark.parametrize("kind", ["box", "dict"])
def test_copy_false_returns_views_that_the_next_step_overwrites(impl, kind):
    with open_vec(impl, kind, copy=False) as env:
        reset_obs, _ = env.reset(seed=0)
        obs1, reward1, terminated1, _, _ = env.step(actions_for(kind, 0))
        kept = reward1.copy(), terminated1.copy()
        obs2, reward2, terminated2, _, _ = env.step(actions_for(kind, 1))
        for first, second, third in zip(
            _leaf_values(reset_obs), _leaf_values(obs1), _leaf_values(obs2), strict=True
        ):
            assert np.shares_memory(first, third) and np.shares_memory(second, third)
        # The obs of the first step now holds the second step's.
        assert_tree_equal(obs1, expected_obs(kind, [(1, 2)] * NUM_ENVS))
        assert_tree_equal(reset_obs, expected_obs(kind, [(1, 2)] * NUM_ENVS))
        # Rewards and flags are fresh arrays whatever `copy` says.
        np.testing.assert_array_equal(reward1, kept[0])
        np.testing.assert_array_equal(terminated1, kept[1])
        assert not np.shares_memory(reward1, reward2)
        assert not np.shares_memory(terminated1, terminated2)


@pytest.mark.parametrize("kind", ["box", "dict"])
def test_copy_true_returns_fresh_arrays(impl, kind):
    with open_vec(impl, kind, copy=True) as env:
        reset_obs, _ = env.reset(seed=0)
        obs1, *_ = env.step(actions_for(kind, 0))
        obs2, *_ = env.step(actions_for(kind, 1))
        for first, second, third in zip(
            _leaf_values(reset_obs), _leaf_values(obs1), _leaf_values(obs2), strict=True
        ):
            assert not np.shares_memory(first, third) and not np.shares_memory(second, third)
        assert_tree_equal(reset_obs, expected_obs(kind, [(1, 0)] * NUM_ENVS))
        assert_tree_equal(obs1, expected_obs(kind, [(1, 1)] * NUM_ENVS))
        assert_tree_equal(obs2, expected_obs(kind, [(1, 2)] * NUM_ENVS))


@pytest.mark.parametrize("context", ["forkserver", "spawn"])
@pytest.mark.parametrize("impl", WORKER_IMPLS)
def test_context_is_the_workers_start_method(impl, context):
    with open_vec(impl, context=context) as env:
        assert env.context == context
        # A spawned worker is the caller's child; a forkserver's is the server's.
        parents = env.call("parent_pid")
        assert all((pid == os.getpid()) == (context == "spawn") for pid in parents), parents
        obs, _ = env.reset(seed=0)
        assert_tree_equal(obs, expected_obs("box", [(1, 0)] * NUM_ENVS))


# AsyncVectorEnv logs the error of `call("start_child")` in its workers as warnings.
@pytest.mark.filterwarnings("ignore:.*(error|Traceback|exception).*:UserWarning")
@pytest.mark.parametrize("daemon", [True, False])
@pytest.mark.parametrize("impl", WORKER_IMPLS)
def test_daemon_workers_cannot_start_children(impl, daemon):
    with open_vec(impl, daemon=daemon) as env:
        assert env.daemon is daemon
        if daemon:
            with pytest.raises(AssertionError, match="daemonic processes are not allowed"):
                env.call("start_child")
        else:
            assert env.call("start_child") == (0,) * NUM_ENVS


@pytest.mark.parametrize("kind", ["box", "discrete"])
def test_observation_mode_different_batches_differing_bounds(impl, kind):
    fns = [lambda i=i: BoundsEnv(kind, i) for i in range(NUM_ENVS)]
    env_spaces = [BoundsEnv(kind, i).observation_space for i in range(NUM_ENVS)]
    env = IMPLS[impl](fns, SAME, observation_mode="different")
    try:
        assert env.observation_mode == "different"
        assert env.single_observation_space == env_spaces[0]
        assert env.observation_space == batch_differing_spaces(env_spaces)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        expected = [[i, 1] for i in range(NUM_ENVS)] if kind == "box" else list(range(NUM_ENVS))
        np.testing.assert_array_equal(obs, expected)
        obs, *_ = env.step(np.zeros(NUM_ENVS, np.int64))
        np.testing.assert_array_equal(obs, expected)
    finally:
        env.close()
    with pytest.raises(RuntimeError):  # "same" wants equal spaces
        IMPLS[impl](fns, SAME, observation_mode="same").close()


def test_observation_mode_different_needs_one_shape(impl):
    fns = [lambda i=i: BoundsEnv("box", i, shape=True) for i in range(NUM_ENVS)]
    # AsyncVectorEnv's batch_differing_spaces asserts before its own RuntimeError check can
    # run; BatchEnv raises its SpaceMismatchError (a RuntimeError) naming the env.
    with pytest.raises((AssertionError, RuntimeError), match=r"shape"):
        IMPLS[impl](fns, SAME, observation_mode="different").close()


def test_observation_mode_tuple_gives_both_spaces(impl):
    single = spaces.Box(-5.0, 5.0, (2,), np.float32)
    batched = batch_space(single, NUM_ENVS)
    fns = [lambda i=i: BoundsEnv("box", i) for i in range(NUM_ENVS)]
    env = IMPLS[impl](fns, SAME, observation_mode=(batched, single))
    try:
        assert env.single_observation_space == single
        assert env.observation_space == batched
        obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(obs, [[i, 1] for i in range(NUM_ENVS)])
    finally:
        env.close()
    wrong = spaces.Box(-5.0, 5.0, (3,), np.float32)
    with pytest.raises(RuntimeError):  # the envs' spaces must share its shape and dtype
        IMPLS[impl](fns, SAME, observation_mode=(batch_space(wrong, NUM_ENVS), wrong)).close()


# The words Gymnasium's own tests (tests/vector/test_observation_mode.py) match in the errors
# of its vector envs; code written for AsyncVectorEnv may match them too.
GYMNASIUM_INVALID_MODE = re.escape(
    "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch "
    "observation space, actual got invalid"
)
GYMNASIUM_NOT_EQUIVALENT = (
    "the sub-environments observation spaces are not equivalent. .*If this is intentional, "
    "use `observation_mode='different'` instead."
)
GYMNASIUM_NOT_COMMON = "do not share a common shape and dtype"


def test_observation_mode_errors_in_gymnasiums_words(impl):
    with (
        pytest.raises(ValueError, match=GYMNASIUM_INVALID_MODE),
        open_vec(impl, observation_mode="invalid"),
    ):
        pass
    fns = [lambda i=i: BoundsEnv("box", i) for i in range(NUM_ENVS)]
    with pytest.raises((AssertionError, RuntimeError), match=GYMNASIUM_NOT_EQUIVALENT):
        IMPLS[impl](fns, SAME, observation_mode="same").close()
    wrong = spaces.Box(-5.0, 5.0, (3,), np.float32)
    with pytest.raises(RuntimeError, match=GYMNASIUM_NOT_COMMON):
        IMPLS[impl](fns, SAME, observation_mode=(batch_space(wrong, NUM_ENVS), wrong)).close()


class GatedResetEnv(CountingEnv):
    """A CountingEnv whose reset in a worker process waits until the file ``gate`` exists; in
    process ``caller`` (the parent's share, where waiting would block the test) it takes 0.3 s
    (Gymnasium's ``make_slow_env(0.3, i)``)."""

    def __init__(self, kind: str, tag: int, gate: str, caller: int):
        super().__init__(kind, tag)
        self.gate = gate
        self.caller = caller

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if os.getpid() == self.caller:
            time.sleep(0.3)
        else:
            wait_until(lambda: os.path.exists(self.gate), f"the test creating {self.gate}")
        return super().reset(seed=seed, options=options)


def test_a_reset_slower_than_the_timeout_raises_timeout_error(impl, tmp_path):
    """Gymnasium's test_reset_timeout_async_vector_env, the parent's share included: the
    envs reset in this process take longer than ``timeout`` too."""
    gate, caller = tmp_path / "gate", os.getpid()
    fns = [lambda i=i: GatedResetEnv("box", i, str(gate), caller) for i in range(NUM_ENVS)]
    env = IMPLS[impl](fns, SAME)
    try:
        env.reset_async(seed=0)
        # The workers' resets wait for the gate, opened only after this: the wait can end only
        # at its timeout, never by waiting for them.
        with pytest.raises(multiprocessing.TimeoutError):
            env.reset_wait(timeout=0.1)
        gate.touch()
        if impl == "BatchEnv-parent":  # the reset stays pending and completes
            obs, _ = env.reset_wait()
            np.testing.assert_array_equal(obs[:, 0], range(NUM_ENVS))
    finally:
        gate.touch()
        env.close(terminate=True)


def test_unknown_observation_mode_is_a_value_error(impl):
    with pytest.raises(ValueError, match="observation_mode"), open_vec(impl, observation_mode="x"):
        pass


# --------------------------------------------------------------------------- differences


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"shared_memory": False}, r"shared_memory=False\) cannot be honoured.*AsyncVectorEnv"),
        ({"worker": _async_worker}, r"cannot run a custom worker function.*gymnasium\.Wrapper"),
    ],
)
def test_keywords_batch_env_cannot_honour_raise_naming_the_alternative(keywords, message):
    """AsyncVectorEnv honours these; BatchEnv raises one line saying why and what to use."""
    with open_vec("AsyncVectorEnv", **keywords) as env:
        obs, _ = env.reset(seed=0)
        assert_tree_equal(obs, expected_obs("box", [(1, 0)] * NUM_ENVS))
        obs, *_ = env.step(actions_for("box", 0))
        assert_tree_equal(obs, expected_obs("box", [(1, 1)] * NUM_ENVS))
    for impl in ("BatchEnv", "BatchEnv-parent"):
        with pytest.raises(ValueError, match=message) as info, open_vec(impl, **keywords):
            pass
        assert "\n" not in str(info.value)
    # context="fork" (not run for AsyncVectorEnv: this process runs JAX's threads).
    fork = r"^context must be 'forkserver'.*'fork' can deadlock"
    with pytest.raises(ValueError, match=fork), open_vec("BatchEnv", context="fork"):
        pass


def test_documented_differences_from_async_vector_env():
    """Where BatchEnv differs from AsyncVectorEnv on purpose (docs/batch_env.md, autoreset)."""
    options = {"reset_mask": np.array([True, False, True])}
    results = {}
    for impl in ("AsyncVectorEnv", "BatchEnv"):
        with open_vec(impl, "dict", SAME) as env:
            env.reset(seed=0)
            steps = [env.step(actions_for("dict", k)) for k in range(3)]
            caller_options = dict(options)
            env.reset(options=caller_options)
            results[impl] = steps, caller_options
    (gym_steps, gym_options), (our_steps, our_options) = (
        results["AsyncVectorEnv"],
        results["BatchEnv"],
    )
    # 1. final_obs. Gymnasium: only in steps where an episode ended, an object array holding
    # each finished env's own obs (None elsewhere).
    assert "final_obs" not in gym_steps[0][4]
    gym_final = gym_steps[2][4]["final_obs"]
    assert gym_final.dtype == object and gym_final[1] is None
    assert isinstance(gym_final[0], dict)
    # BatchEnv: at every step, a dense batch in the structure of obs, equal to obs where no
    # episode ended (here every env in step 1, env 1 in step 3).
    obs, *_, infos = our_steps[0]
    assert_tree_equal(infos["final_obs"], obs)
    np.testing.assert_array_equal(infos["_final_obs"], [False, False, False])
    obs, *_, infos = our_steps[2]
    final = infos["final_obs"]
    assert_tree_equal(final, expected_obs("dict", [(1, 3), (1, 3), (1, 3)]))
    assert_tree_equal(final_obs_row(final, 1), final_obs_row(obs, 1))
    # 2. Rewards: float64 in Gymnasium, float32 in BatchEnv (equal values here).
    assert gym_steps[2][1].dtype == np.float64 and our_steps[2][1].dtype == np.float32
    np.testing.assert_array_equal(gym_steps[2][1], our_steps[2][1])
    # 3. reset_mask: Gymnasium pops it from the caller's options; BatchEnv leaves them alone.
    assert "reset_mask" not in gym_options
    assert our_options["reset_mask"] is options["reset_mask"]

"""The wrappers Gymnasium lacks: exact formulas, dtypes, errors, frame and repeat logic."""

from __future__ import annotations

import os

import gymnasium
import numpy as np
import pytest
from envs_testlib import (
    BoundedEnv,
    BoundedNestedObsEnv,
    ConstructionCountingEnv,
    CountEnv,
    NestedObsEnv,
    TextInDictObsEnv,
)
from gymnasium import spaces
from gymnasium.wrappers import ClipAction

from batchppo.envs.make import StandardStack
from batchppo.envs.spaces import flattener, gym_leaves
from batchppo.envs.stack.wrappers import (
    ActionRepeat,
    ConvertTo32Bit,
    FrameDelta,
    FrameHistory,
    RandomStart,
    RangeNormalize,
)


def test_range_normalize_observations_on_finite_dims_only():
    env = RangeNormalize(BoundedEnv())
    space = env.observation_space
    np.testing.assert_array_equal(space.low, [-1, -np.inf, -1])
    np.testing.assert_array_equal(space.high, [1, np.inf, 1])
    obs, _ = env.reset(seed=0)
    # obs0 = (0.5, 7, -2): 2 * (0.5 - 0) / 2 - 1 = -0.5; dim 1 unbounded; 2 * 2 / 8 - 1 = -0.5.
    np.testing.assert_array_equal(obs, [-0.5, 7.0, -0.5])
    obs, *_ = env.step(np.zeros(2, np.float32))
    # (1.5, 8, -1) -> (0.5, 8, 2 * 3 / 8 - 1 = -0.25)
    np.testing.assert_array_equal(obs, [0.5, 8.0, -0.25])


def test_range_normalize_actions_on_finite_dims_only():
    inner = BoundedEnv()
    env = RangeNormalize(inner)
    np.testing.assert_array_equal(env.action_space.low, [-np.inf, -1])
    np.testing.assert_array_equal(env.action_space.high, [np.inf, 1])
    env.reset(seed=0)
    for a, expected in [([0.3, 0.5], [0.3, 8.0]), ([-1, -1], [-1, 2]), ([5, 1], [5, 10])]:
        env.step(np.array(a, np.float32))
        # low + (a + 1) / 2 * (high - low) with low 2, high 10 on dim 1.
        np.testing.assert_allclose(inner.actions[-1], expected, rtol=0, atol=1e-6)


def test_range_normalize_clips_actions_on_rescaled_dims_unless_told_not_to():
    inner = BoundedEnv()
    env = RangeNormalize(inner)
    env.reset(seed=0)
    env.step(np.array([3.0, 3.0], np.float32))
    # dim 0 has infinite bounds: unclipped; dim 1 clipped to 1 -> the env's high, 10.
    np.testing.assert_array_equal(inner.actions[-1], [3.0, 10.0])
    env.step(np.array([-3.0, -3.0], np.float32))
    np.testing.assert_array_equal(inner.actions[-1], [-3.0, 2.0])
    unclipped = RangeNormalize(inner, clip_actions=False)
    unclipped.step(np.array([3.0, 3.0], np.float32))
    np.testing.assert_array_equal(inner.actions[-1], [3.0, 18.0])  # 2 + (3 + 1) / 2 * 8


class BoxEnv(gymnasium.Env):
    """Observation and action spaces both ``Box(low, high)``; never stepped."""

    def __init__(self, low, high):
        self.observation_space = spaces.Box(low, high, dtype=low.dtype)
        self.action_space = spaces.Box(low, high, dtype=low.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_range_normalize_is_bitwise_the_documented_formulas(dtype):
    rng = np.random.default_rng(0)
    low = np.array([-3.0, 0.1, -np.inf, 2.0, -7.5], dtype)
    high = np.array([5.0, 0.7, np.inf, 2.0, 1e4], dtype)  # dim 3: empty range, not mapped
    finite = np.isfinite(low) & np.isfinite(high) & (high > low)
    env = RangeNormalize(BoxEnv(low, high))
    for _ in range(200):
        x = (rng.standard_normal(5) * 10).astype(dtype)
        with np.errstate(divide="ignore", invalid="ignore"):  # the empty and infinite dims
            want = np.where(finite, 2 * (x - low) / (high - low) - 1, x)
        np.testing.assert_array_equal(env.observation(x), want)
        a = rng.uniform(-1.5, 1.5, 5).astype(dtype)
        # Clipped to the wrapper's action space first: [-1, 1] on mapped dims, else the env's.
        a = np.clip(a, env.action_space.low, env.action_space.high)
        with np.errstate(invalid="ignore"):  # inf - inf on the infinite dim, not selected
            want = np.where(finite, low + (a + 1) / 2 * (high - low), a)
        np.testing.assert_array_equal(env.action(a), want)


def test_clip_action_outside_range_normalize_clips_in_normalised_space():
    inner = BoundedEnv()
    env = ClipAction(RangeNormalize(inner))
    env.reset(seed=0)
    env.step(np.array([3.0, 3.0], np.float32))
    # dim 0 has infinite bounds: unclipped; dim 1 clipped to 1 -> the env's high, 10.
    np.testing.assert_array_equal(inner.actions[-1], [3.0, 10.0])


def test_convert_to_32bit_dtypes():
    env = ConvertTo32Bit(BoundedEnv())
    assert env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32
    obs, reward, *_ = env.step(np.zeros(2, np.float32))
    assert obs.dtype == np.float32 and type(reward) is np.float32 and reward == 1.5
    discrete = ConvertTo32Bit(_DiscreteEnv())
    assert discrete.action_space.dtype == np.int32 and discrete.action_space.n == 3


class _DiscreteEnv(CountEnv):
    def __init__(self):
        super().__init__()
        self.action_space = spaces.Discrete(3)


@pytest.mark.parametrize(("bad", "what"), [("obs", "observation"), ("reward", "reward")])
def test_convert_to_32bit_rejects_non_finite_values(bad, what):
    inner = BoundedEnv()
    env = ConvertTo32Bit(inner, env_id="Bounded-v0")
    env.reset(seed=0)
    env.step(np.zeros(2, np.float32))
    inner.bad = bad
    with pytest.raises(ValueError, match=f"Bounded-v0: non-finite {what}.*step 2"):
        env.step(np.zeros(2, np.float32))


def test_convert_to_32bit_converts_and_checks_each_leaf_of_nested_observations():
    env = ConvertTo32Bit(NestedObsEnv(nan_tag=3, nan_step=0), env_id="Nested-v0")
    space = env.observation_space
    assert space["pos"] == spaces.Box(-np.inf, np.inf, (2,), np.float32)
    # int64 to int32 as a flat Box: the bounds are clipped to int32's.
    assert space["inner"]["count"] == spaces.Box(0, np.iinfo(np.int32).max, (1,), np.int32)
    assert list(space.spaces) == ["extra", "inner", "pos"]  # Dict keys stay in their order
    inner_space = env.env.observation_space
    assert space["inner"]["flags"] == inner_space["inner"]["flags"]
    assert space["extra"] == inner_space["extra"]  # no Box leaf to convert: as it was
    obs, _ = env.reset(seed=0)
    assert obs["pos"].dtype == np.float32 and obs["inner"]["count"].dtype == np.int32
    assert obs["extra"][2].dtype == np.float32 and obs["extra"][0] == 0
    assert obs in space
    obs, reward, *_ = env.step(np.array([1.5]))
    np.testing.assert_array_equal(obs["pos"], [0.0, 1.5])
    assert obs["inner"]["count"].tolist() == [1] and type(reward) is np.float32
    # The NaN leaf sits in a Tuple inside the Dict: its path is named, at reset too.
    with pytest.raises(
        ValueError,
        match=r"^Nested-v0: non-finite observation leaf obs\['extra'\]\[2\] at step 0 of the "
        r"episode \(0 = reset\): array\(\[ *nan, 3\.75\]",
    ):
        env.reset(seed=3)


class _BigCountEnv(NestedObsEnv):
    """NestedObsEnv whose int64 leaf ``obs['inner']['count']`` is ``2**31 + t``."""

    def _obs(self):
        obs = super()._obs()
        obs["inner"]["count"] = np.array([2**31 + self.t], np.int64)
        return obs


def test_convert_to_32bit_refuses_int64_leaf_values_int32_cannot_hold():
    """int64 leaves become int32 by a checked conversion: no value wraps around."""
    env = ConvertTo32Bit(_BigCountEnv(), env_id="Big-v0")
    assert env.observation_space["inner"]["count"].dtype == np.int32
    with pytest.raises(
        ValueError,
        match=r"^Big-v0: int64 observation leaf obs\['inner'\]\['count'\] at step 0 of the "
        r"episode \(0 = reset\) holds 2147483648, outside int32's range \[-2147483648, "
        r"2147483647\], the dtype int64 observations are converted to; return values in that "
        r"range, or a float Box\.$",
    ):
        env.reset(seed=0)


def test_convert_to_32bit_refuses_unsupported_leaves_of_nested_observations():
    with pytest.raises(ValueError, match=r"ConvertTo32Bit \(TextEnv\).*Text.*FlattenObservation"):
        ConvertTo32Bit(TextInDictObsEnv(), env_id="TextEnv")


class _FlatEnv(gymnasium.Env):
    """An env with one given observation space that returns the values it is told to."""

    def __init__(self, observation_space: gymnasium.Space):
        self.observation_space = observation_space
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float64)
        self.value: object = None

    def reset(self, *, seed=None, options=None):
        return self.value, {}

    def step(self, action):
        return self.value, 0.0, False, False, {}


def _bitwise_equal(actual, expected) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind == "f":
        actual, expected = actual.view(f"u{actual.itemsize}"), expected.view(f"u{actual.itemsize}")
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("layers", ["range_normalize", "standard_stack"])
def test_each_leaf_of_a_nested_observation_is_treated_as_a_flat_observation(layers):
    """Every leaf gets what a flat observation space like it gets: float Box leaves with
    finite bounds range-normalised (and float64 ones made float32 by the stack), the rest
    unchanged; spaces and values bitwise those of the flat space through the same layers."""

    def wrap(env: gymnasium.Env) -> gymnasium.Env:
        return RangeNormalize(env) if layers == "range_normalize" else StandardStack("N").wrap(env)

    raw = BoundedNestedObsEnv()
    env = wrap(raw)
    nested_leaves = gym_leaves(env.observation_space)
    obs, _ = env.reset(seed=1)
    raw_values = flattener(raw.observation_space)(raw._obs())
    values = flattener(env.observation_space)(obs)
    for raw_leaf, leaf, raw_value, value in zip(
        gym_leaves(raw.observation_space), nested_leaves, raw_values, values, strict=True
    ):
        flat = _FlatEnv(raw_leaf)
        flat.value = raw_value
        flat_env = wrap(flat)
        assert leaf == flat_env.observation_space
        _bitwise_equal(value, flat_env.reset()[0])
    # The rule at work: bounded dims in [-1, 1], unbounded and integer leaves as they were.
    b = obs["b"]
    np.testing.assert_allclose(b[:2], [2 * 1 / 4 - 1, np.cos(1)], rtol=1e-6)
    assert b[2] == 7.0 and obs["u"][0] == np.float64(1 / 3).astype(b.dtype)
    assert env.observation_space["b"].low.tolist() == [-1, -1, 0]
    assert env.observation_space["b"].high.tolist() == [1, 1, np.inf]
    np.testing.assert_allclose(obs["t"][0], [(0.1 * 0 - 1) / 2, 0.7 / 2], rtol=1e-6)
    assert obs["d"] == 0 and obs["t"][1].dtype == np.int64  # Discrete, MultiDiscrete: as is
    assert env.observation_space["t"][2] == spaces.Box(
        0, 10, (1,), np.int64 if layers == "range_normalize" else np.int32
    )
    assert obs in env.observation_space


def test_flat_integer_observations_pass_range_normalisation_unchanged():
    """Integer Boxes (even bounded ones), Discrete and MultiDiscrete pass unchanged: they
    cannot hold [-1, 1] in their dtype (an int64 Box(0, 100) came out truncated to -1/0/1, a
    uint8 Box(0, 255) failed at construction)."""
    int_env = ConstructionCountingEnv(os.devnull, tag=40, int_obs=True)
    env = StandardStack("I").wrap(int_env)
    assert env.observation_space == spaces.Box(0, 100, (3,), np.int32)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.int32 and obs.tolist() == int_env._obs().tolist()
    for space, value in [
        (spaces.Box(0, 255, (2,), np.uint8), np.array([7, 255], np.uint8)),
        (spaces.MultiDiscrete([3, 4]), np.array([2, 3], np.int64)),
        (spaces.Discrete(5), np.int64(4)),
    ]:
        flat = _FlatEnv(space)
        flat.value = value
        wrapped = StandardStack("I").wrap(flat)
        assert wrapped.observation_space == space
        obs, _ = wrapped.reset()
        assert obs is value  # passed through, int64 included


def test_non_finite_bounded_leaf_raises_the_flat_error_naming_the_leaf():
    env = StandardStack("N-v0").wrap(BoundedNestedObsEnv(nan_tag=2, nan_step=1))
    env.reset(seed=2)
    with pytest.raises(
        ValueError,
        match=r"^N-v0: non-finite observation leaf obs\['b'\] at step 1 of the episode "
        r"\(0 = reset\): array\(\[ *nan, ",
    ):
        env.step(np.zeros(1, np.float32))


def test_range_normalize_refuses_unsupported_leaves_naming_them():
    with pytest.raises(
        ValueError,
        match=r"^RangeNormalize: observation leaf obs\['name'\] is Text\(.*\), not a Box.*"
        r"FlattenObservation",
    ):
        RangeNormalize(TextInDictObsEnv())
    assert RangeNormalize(TextInDictObsEnv(), observations=False)  # nothing to walk


def test_frame_history_picks_past_frames():
    env = FrameHistory(CountEnv(7), steps=[0, 2])
    assert env.observation_space.shape == (2, 3)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [[7, 1, 0], [7, 1, 0]])  # padded with the reset obs
    for _ in range(3):
        obs, *_ = env.step(np.zeros(1, np.float32))
    np.testing.assert_array_equal(obs, [[7, 1, 3], [7, 1, 1]])
    flat = FrameHistory(CountEnv(7), steps=[1, 0], flatten=True)
    assert flat.observation_space.shape == (6,)
    flat.reset(seed=0)
    obs, *_ = flat.step(np.zeros(1, np.float32))
    np.testing.assert_array_equal(obs, [7, 1, 0, 7, 1, 1])
    with pytest.raises(ValueError, match="steps"):
        FrameHistory(CountEnv(), steps=[])


def test_frame_delta():
    env = FrameDelta(CountEnv(7))
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [7, 1, 0])
    obs, *_ = env.step(np.zeros(1, np.float32))
    np.testing.assert_array_equal(obs, [0, 0, 1])
    obs, *_ = env.step(np.zeros(1, np.float32))
    np.testing.assert_array_equal(obs, [0, 0, 1])


def test_action_repeat_sums_rewards_and_stops_at_episode_end():
    env = ActionRepeat(CountEnv(terminate_at=5), 2)
    env.reset(seed=0)
    a = np.full(1, 0.5, np.float32)
    obs, reward, terminated, *_ = env.step(a)
    assert obs[2] == 2 and reward == 1.5 + 2.5 and not terminated
    env.step(a)  # t = 4
    obs, reward, terminated, *_ = env.step(a)  # t = 5 ends the episode: only one repeat
    assert obs[2] == 5 and reward == 5.5 and terminated
    with pytest.raises(ValueError, match="amount"):
        ActionRepeat(CountEnv(), 0)


def test_random_start_is_reproducible_and_bounded():
    starts = []
    for _ in range(2):
        env = RandomStart(CountEnv(), max_steps=10)
        obs, _ = env.reset(seed=3)
        first = obs[2]
        seq = [first] + [env.reset()[0][2] for _ in range(20)]
        starts.append(seq)
    assert starts[0] == starts[1]
    assert all(0 <= t < 10 for t in starts[0]) and len(set(starts[0])) > 3

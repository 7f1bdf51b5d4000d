"""The env wrappers Gymnasium lacks, as in the original Batch PPO.

Gymnasium already has ``TimeLimit`` (the original's LimitDuration), ``ClipAction``,
``FrameStackObservation`` (used by [`FrameHistory`][batchppo.envs.FrameHistory]) and vector
autoreset, so only these are written here:

* [`RangeNormalize`][batchppo.envs.RangeNormalize]: finite observation bounds to ``[-1, 1]``;
  actions from ``[-1, 1]`` to the env's finite bounds. The formulas are part of the contract (the
  pure-JAX adapters apply the same maps): ``obs' = 2 * (obs - low) / (high - low) - 1`` on every
  observation dim with a finite range, and ``action = low + (a + 1) / 2 * (high - low)`` on every
  such action dim; other dims pass unchanged. Which dims have a finite range, and the maps
  themselves, are defined once in ``batchppo.core.ranges``. (Gymnasium's ``RescaleAction`` and
  ``RescaleObservation`` need all bounds finite, so they cannot express this.) Only float ``Box``
  spaces are mapped; integer ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` spaces
  pass unchanged.
* [`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit]: float64 -> float32 and int64 -> int32 ``Box``
  observations (an int64 value outside int32's range raises), float32 rewards, int32 discrete
  actions; non-finite observations or rewards raise ``ValueError``. Every other dtype keeps its own:
  uint8 frames stay uint8, bool stays bool, float32 and int32 as they are. ``Discrete``,
  ``MultiDiscrete`` and ``MultiBinary`` observations pass unchanged.
* [`FrameHistory`][batchppo.envs.FrameHistory], [`FrameDelta`][batchppo.envs.FrameDelta],
  [`ActionRepeat`][batchppo.envs.ActionRepeat], [`RandomStart`][batchppo.envs.RandomStart].

[`RangeNormalize`][batchppo.envs.RangeNormalize] and
[`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit] treat each leaf of a Dict/Tuple observation space
(a nesting of ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary``) as they treat a flat
observation space of that kind, through the same per-space rule (``_box_map``,
``_leaf_conversion``); a space of another kind in the nesting raises ``ValueError`` at construction,
naming where it sits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FrameStackObservation

from batchppo.core.ranges import RangeMap, maps_dtype, range_map
from batchppo.envs.spaces import flattener, gym_leaf_paths, gym_leaves, is_gym_leaf, unflatten

__all__ = [
    "ActionRepeat",
    "ConvertTo32Bit",
    "FrameDelta",
    "FrameHistory",
    "RandomStart",
    "RangeNormalize",
    "int_overflow_message",
    "non_finite_obs_message",
    "non_finite_reward_message",
]


def _box_map(space: gymnasium.Space) -> RangeMap | None:
    """The range map of a float Box in its own dtype, or None if it normalises no dim.

    The one rule of which spaces [`RangeNormalize`][batchppo.envs.RangeNormalize] maps, for a flat
    space and for each leaf of a nested one alike. Integer Boxes (and Discrete, MultiDiscrete,
    MultiBinary) get
    None: their values cannot hold ``[-1, 1]`` in their own dtype, so they pass unchanged.
    """
    if not isinstance(space, spaces.Box) or not maps_dtype(space.dtype):
        return None
    ranges = range_map(space.low, space.high, space.dtype)
    return ranges if ranges.any else None


def _nested_leaves(space: spaces.Dict | spaces.Tuple, owner: str) -> tuple[list[Any], list[str]]:
    """The leaf spaces of a Dict/Tuple observation space and their paths (``"['pos']"``).

    Args:
        space: The observation space.
        owner: Who asks, for the error (``"RangeNormalize"``, ``"ConvertTo32Bit (Env-v0)"``).

    Raises:
        ValueError: A part of the nesting is not a Box, Discrete, MultiDiscrete or
            MultiBinary; the one-line message names where it sits and what to do.
    """
    try:
        return gym_leaves(space), gym_leaf_paths(space)
    except ValueError:
        path, part = _unsupported_part(space, "") or ("", space)
        raise ValueError(
            f"{owner}: observation leaf obs{path} is {part}, not a Box, Discrete, "
            "MultiDiscrete or MultiBinary (nested in Dict/Tuple spaces); flatten that part "
            "(gymnasium.wrappers.FlattenObservation) or drop it."
        ) from None


def _unsupported_part(space: gymnasium.Space, path: str) -> tuple[str, gymnasium.Space] | None:
    """``(path, space)`` of the first part of a nesting that is neither a leaf nor a Dict/Tuple
    (paths as ``gym_leaf_paths`` writes them), or None."""
    if is_gym_leaf(space):
        return None
    if isinstance(space, spaces.Dict):
        items = [(repr(key), sub) for key, sub in space.spaces.items()]
    elif isinstance(space, spaces.Tuple):
        items = [(str(i), sub) for i, sub in enumerate(space.spaces)]
    else:
        return path, space
    for key, sub in items:
        found = _unsupported_part(sub, f"{path}[{key}]")
        if found is not None:
            return found
    return None


def _flatten_leaves(
    flatten: Callable[[Any], list[Any]], obs: Any, owner: str, space: gymnasium.Space
) -> list[Any]:
    """The leaves of a Dict/Tuple observation, in ``space``'s leaf order.

    Raises:
        ValueError: ``obs`` does not have ``space``'s structure; the one-line message starts
            with ``owner`` and says what to return.
    """
    try:
        return flatten(obs)
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(
            f"{owner}: the observation does not have the structure of the observation space "
            f"{space} ({exc!r}); return a dict for each Dict and a tuple for each Tuple, with "
            "every key."
        ) from None


def _unit_space(ranges: RangeMap, dtype: np.dtype) -> spaces.Box:
    """The Box after normalisation: ``[-1, 1]`` on normalised dims, the old bounds elsewhere."""
    return spaces.Box(ranges.unit_low, ranges.unit_high, dtype=dtype)


def _rebuild_space(space: gymnasium.Space, converted: Iterator[gymnasium.Space]) -> gymnasium.Space:
    """``space`` with its leaves replaced, in order, by ``converted`` (Dict keys kept in order)."""
    if is_gym_leaf(space):
        return next(converted)
    if isinstance(space, spaces.Dict):
        return spaces.Dict([(k, _rebuild_space(sub, converted)) for k, sub in space.spaces.items()])
    return spaces.Tuple([_rebuild_space(sub, converted) for sub in space.spaces])


class RangeNormalize(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """Normalises finite observation bounds to ``[-1, 1]`` and maps actions from ``[-1, 1]``.

    See the module docstring for the exact formulas. Only float ``Box`` spaces are mapped:
    integer ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` spaces pass unchanged,
    and so do dims without a finite range (an infinite bound, or a span that overflows
    float32, such as CartPole's ``±float32.max``). With ``clip_actions`` (default), actions are
    first clipped to the wrapper's action space, as Gymnasium's ``ClipAction`` outside this
    wrapper would, and the action space keeps its finite ``[-1, 1]`` bounds.

    A Dict/Tuple observation space is normalised leaf by leaf: each float ``Box`` leaf gets
    the map a flat observation space like it would get (and its space the same ``[-1, 1]``
    bounds), the other leaves pass unchanged. Dict/Tuple action spaces pass unchanged.

    The maps are ``batchppo.core.ranges.RangeMap`` arrays precomputed per dim in the space's dtype,
    so that a step costs a few NumPy calls, with results bitwise equal to the formulas.

    Args:
        env: The env to wrap.
        observations: Whether to normalise observations.
        actions: Whether to rescale actions.
        clip_actions: Whether to clip actions to ``[-1, 1]`` (on the rescaled dims) first.

    Raises:
        ValueError: (With ``observations``) a Dict/Tuple observation space holds a space
            other than those above; the message names where it sits.
    """

    def __init__(
        self,
        env: gymnasium.Env,
        observations: bool = True,
        actions: bool = True,
        clip_actions: bool = True,
    ):
        gymnasium.utils.RecordConstructorArgs.__init__(
            self, observations=observations, actions=actions, clip_actions=clip_actions
        )
        gymnasium.Wrapper.__init__(self, env)
        obs_space = env.observation_space
        self._obs_map: RangeMap | None = None
        self._leaf_maps: list[RangeMap | None] | None = None
        if observations and isinstance(obs_space, (spaces.Dict, spaces.Tuple)):
            self._init_nested(obs_space)
        elif observations:
            self._obs_map = _box_map(obs_space)
            if self._obs_map is not None:
                self.observation_space = _unit_space(self._obs_map, obs_space.dtype)
        self._act_map = _box_map(env.action_space) if actions else None
        self._clip_actions = bool(clip_actions)
        if self._act_map is not None:
            self.action_space = _unit_space(self._act_map, env.action_space.dtype)

    def _init_nested(self, obs_space: spaces.Dict | spaces.Tuple) -> None:
        """Plans the per-leaf maps of a Dict/Tuple observation space (None: no leaf mapped)."""
        leaf_spaces, _ = _nested_leaves(obs_space, "RangeNormalize")
        maps = [_box_map(leaf) for leaf in leaf_spaces]
        if not any(m is not None for m in maps):
            return
        self._leaf_maps = maps
        self._flatten = flattener(obs_space)
        unit = [
            leaf if m is None else _unit_space(m, leaf.dtype)
            for leaf, m in zip(leaf_spaces, maps, strict=True)
        ]
        self.observation_space = _rebuild_space(obs_space, iter(unit))

    @property
    def rescales_actions(self) -> bool:
        """Whether actions are rescaled (and, with ``clip_actions``, clipped) here."""
        return self._act_map is not None

    @property
    def obs_map(self) -> RangeMap | None:
        """The map of a flat observation space (None: not flat, or observations unchanged)."""
        return self._obs_map

    @property
    def leaf_maps(self) -> list[RangeMap | None] | None:
        """The map of each leaf of a Dict/Tuple observation space, in the order of ``gym_leaves``
        (None: flat, or no leaf mapped)."""
        return self._leaf_maps

    @property
    def act_map(self) -> RangeMap | None:
        """The action map (None: actions pass unchanged)."""
        return self._act_map

    @property
    def clip_actions(self) -> bool:
        """Whether actions are clipped to ``[-1, 1]`` (on the rescaled dims) first."""
        return self._clip_actions

    def observation(self, obs: Any) -> Any:
        """``2 * (obs - low) / (high - low) - 1`` on the dims with a finite range.

        Of a Dict/Tuple observation, on those of each float ``Box`` leaf (a new ``dict`` /
        ``tuple`` nesting; the other leaves are the same objects).
        """
        if self._obs_map is not None:
            return self._obs_map.normalize(obs)
        if self._leaf_maps is None:
            return obs
        values = _flatten_leaves(self._flatten, obs, "RangeNormalize", self.env.observation_space)
        mapped = [
            v if m is None else m.normalize(v) for v, m in zip(values, self._leaf_maps, strict=True)
        ]
        return unflatten(self.observation_space, mapped)

    def action(self, action: np.ndarray) -> np.ndarray:
        """``low + (a + 1) / 2 * (high - low)`` on the dims with a finite range, after clipping."""
        if self._act_map is None:
            return action
        return self._act_map.denormalize(action, clip=self._clip_actions)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps with the rescaled action; returns the normalised observation."""
        obs, reward, terminated, truncated, info = self.env.step(self.action(action))
        return self.observation(obs), reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets; returns the normalised observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), info


def non_finite_obs_message(env_id: str, step: int, obs: Any, path: str = "") -> str:
    """The message of the ``ValueError`` a non-finite observation raises
    ([`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit]).

    Args:
        env_id: The env's name.
        step: The step of the episode (0: the observation of a reset).
        obs: The observation, as checked (after range normalisation, before conversion); for
            a Dict/Tuple observation, the leaf that is not finite.
        path: Where that leaf sits in a Dict/Tuple observation (``"['pos']"``, ``"[1]"``:
            ``gym_leaf_paths``); ``""`` for a flat observation.
    """
    what = f"observation leaf obs{path}" if path else "observation"
    return (
        f"{env_id}: non-finite {what} at step {step} of the episode (0 = reset): "
        f"{obs!r}. The env diverged; check its inputs."
    )


def non_finite_reward_message(env_id: str, step: int, reward: Any) -> str:
    """The message of the ``ValueError`` a non-finite reward raises
    ([`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit]).

    Args:
        env_id: The env's name.
        step: The step of the episode.
        reward: The reward the env returned.
    """
    return (
        f"{env_id}: non-finite reward {reward!r} at step {step} of the episode. The env "
        "diverged; check its inputs."
    )


def int_overflow_message(env_id: str, step: int, obs: Any, dtype: np.dtype, path: str = "") -> str:
    """The message of the ``ValueError`` an int64 observation outside ``dtype``'s range raises
    ([`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit] converts int64 to int32 and never wraps a
    value around).

    Args:
        env_id: The env's name.
        step: The step of the episode (0: the observation of a reset).
        obs: The observation (or the Dict/Tuple leaf) that does not fit.
        dtype: The dtype it is converted to.
        path: Where that leaf sits in a Dict/Tuple observation; ``""`` for a flat one.
    """
    what = f"observation leaf obs{path}" if path else "observation"
    info = np.iinfo(dtype)
    obs = np.asarray(obs)
    value = obs.max() if obs.max() > info.max else obs.min()
    return (
        f"{env_id}: int64 {what} at step {step} of the episode (0 = reset) holds {value}, "
        f"outside {dtype.name}'s range [{info.min}, {info.max}], the dtype int64 observations "
        "are converted to; return values in that range, or a float Box."
    )


_TO_32_BIT = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}


def _leaf_conversion(space: gymnasium.Space) -> tuple[np.dtype | None, bool, spaces.Box | None]:
    """What [`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit] does to observations of one space (a
    leaf, or any flat one).

    Returns:
        ``(dtype, check, converted)``: the dtype observations become (None: left as they
        are), whether they are checked for non-finite values (float ``Box`` only: the other
        spaces hold integers, or values that are not numbers), and the space they then have
        (None: unchanged).
    """
    if not isinstance(space, spaces.Box):
        return None, False, None
    # Integer observations are always finite: skip the check.
    check = space.dtype.kind not in "iub"
    dtype = _TO_32_BIT.get(space.dtype)
    if dtype is None:
        return None, check, None
    low, high = space.low, space.high
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        low, high = np.clip(low, info.min, info.max), np.clip(high, info.min, info.max)
    return dtype, check, spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)


class ConvertTo32Bit(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """32-bit observations, rewards and actions; non-finite observations or rewards raise.

    float64 ``Box`` observations become float32 and int64 ``Box`` observations int32 (their
    bounds clipped to int32's; a value outside int32's range raises instead of wrapping
    around); float ``Box`` observations are checked for NaN and infinite values. Boxes of any
    other dtype keep it (uint8 frames stay uint8: a quarter of float32's bytes in shared
    memory and in every copy). ``Discrete``, ``MultiDiscrete`` and ``MultiBinary``
    observations hold integers, always finite: they pass unchanged, int64 included. Rewards
    become ``np.float32``; Discrete actions become int32 and float64 Box actions float32.

    Dict and Tuple observation spaces (nestings of ``Box``, ``Discrete``, ``MultiDiscrete`` and
    ``MultiBinary``) get the same per leaf, by the same rule (``_leaf_conversion``): each ``Box``
    leaf is converted and its space replaced as a flat ``Box`` observation would be, each float leaf
    is checked, with the flat observation's error naming the leaf's path (``obs['pos']``), and the
    other leaves pass unchanged.

    Args:
        env: The env to wrap.
        env_id: Name used in error messages (default: ``env.spec.id`` when there is one).

    Raises:
        ValueError: (from ``reset``/``step``) an observation or reward is NaN or infinite, or
            an int64 observation does not fit int32; the message names the env id, the step
            of the episode and the value. (At
            construction) a Dict/Tuple observation space holds a space other than those above.
    """

    def __init__(self, env: gymnasium.Env, env_id: str | None = None):
        gymnasium.utils.RecordConstructorArgs.__init__(self, env_id=env_id)
        gymnasium.Wrapper.__init__(self, env)
        if env_id is None:
            spec = getattr(env, "spec", None)
            env_id = spec.id if spec is not None else type(env.unwrapped).__name__
        self._env_id = env_id
        self._episode_step = 0
        obs_space = env.observation_space
        # Flat observations: one leaf, checked and converted without walking a tree.
        self._nested = isinstance(obs_space, (spaces.Dict, spaces.Tuple))
        if self._nested:
            self._init_nested(obs_space)
        else:
            self._obs_dtype, self._check_obs, converted = _leaf_conversion(obs_space)
            if converted is not None:
                self.observation_space = converted
        act_space = env.action_space
        self._act_dtype = None
        if isinstance(act_space, spaces.Discrete) and act_space.dtype != np.int32:
            self.action_space = spaces.Discrete(
                int(act_space.n), start=int(act_space.start), dtype=np.int32
            )
        elif isinstance(act_space, spaces.Box) and act_space.dtype == np.float64:
            self._act_dtype = act_space.dtype
            self.action_space = spaces.Box(
                act_space.low.astype(np.float32),
                act_space.high.astype(np.float32),
                dtype=np.float32,
            )

    @property
    def env_id(self) -> str:
        """The name its error messages use."""
        return self._env_id

    @property
    def act_dtype(self) -> np.dtype | None:
        """The inner env's action dtype actions are converted to (None: no conversion)."""
        return self._act_dtype

    def _init_nested(self, obs_space: spaces.Dict | spaces.Tuple) -> None:
        """Plans the per-leaf check and conversion of a Dict/Tuple observation space."""
        leaf_spaces, paths = _nested_leaves(obs_space, f"ConvertTo32Bit ({self._env_id})")
        plans = [_leaf_conversion(leaf) for leaf in leaf_spaces]
        self._flatten = flattener(obs_space)
        self._leaf_dtypes = [dtype for dtype, _, _ in plans]
        self._leaf_paths = paths
        self._checked_leaves = [(i, paths[i]) for i, (_, check, _) in enumerate(plans) if check]
        self._converts = any(dtype is not None for dtype in self._leaf_dtypes)
        if self._converts:
            converted = [
                new if new is not None else leaf
                for leaf, (_, _, new) in zip(leaf_spaces, plans, strict=True)
            ]
            self.observation_space = _rebuild_space(obs_space, iter(converted))

    def _observation(self, obs: Any) -> Any:
        if self._nested:
            return self._nested_observation(obs)
        if self._check_obs and not np.isfinite(obs).all():
            raise ValueError(non_finite_obs_message(self._env_id, self._episode_step, obs))
        if self._obs_dtype is not None:
            return self._convert(obs, self._obs_dtype)
        return obs

    def _convert(self, value: Any, dtype: np.dtype, path: str = "") -> np.ndarray:
        """``value`` in ``dtype``; an int64 value outside int32's range raises (no wrap-around)."""
        if dtype.kind == "i":
            value = np.asarray(value)
            info = np.iinfo(dtype)
            if value.size and (value.min() < info.min or value.max() > info.max):
                raise ValueError(
                    int_overflow_message(self._env_id, self._episode_step, value, dtype, path)
                )
        return np.asarray(value, dtype=dtype)

    def _nested_observation(self, obs: Any) -> Any:
        """Checks the float leaves of a Dict/Tuple observation and converts its Box leaves."""
        values = _flatten_leaves(self._flatten, obs, self._env_id, self.env.observation_space)
        for i, path in self._checked_leaves:
            if not np.isfinite(values[i]).all():
                raise ValueError(
                    non_finite_obs_message(self._env_id, self._episode_step, values[i], path)
                )
        if not self._converts:
            return obs
        converted = [
            v if dtype is None else self._convert(v, dtype, path)
            for v, dtype, path in zip(values, self._leaf_dtypes, self._leaf_paths, strict=True)
        ]
        return unflatten(self.observation_space, converted)

    def step(self, action: Any) -> tuple[Any, np.float32, bool, bool, dict[str, Any]]:
        """Steps; checks and converts observation and reward."""
        if self._act_dtype is not None:
            action = np.asarray(action, dtype=self._act_dtype)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_step += 1
        if not math.isfinite(reward):  # math: a Python float, without np.isfinite's ufunc overhead
            raise ValueError(non_finite_reward_message(self._env_id, self._episode_step, reward))
        return self._observation(obs), np.float32(reward), terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets; checks and converts the observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._episode_step = 0
        return self._observation(obs), info


class FrameHistory(gymnasium.ObservationWrapper, gymnasium.utils.RecordConstructorArgs):
    """Observations made of past frames: frame ``j`` is the obs from ``steps[j]`` steps ago.

    Built on Gymnasium's ``FrameStackObservation`` (padded with the reset observation, as in
    the original).

    Args:
        env: The env to wrap (Box observations).
        steps: How many steps ago each frame is, e.g. ``[0, 1, 3]``; 0 is the current obs.
        flatten: Concatenate the frames along the first axis instead of stacking them.
    """

    def __init__(self, env: gymnasium.Env, steps: Sequence[int], flatten: bool = False):
        steps = [int(s) for s in steps]
        if not steps or min(steps) < 0:
            raise ValueError(f"steps must be a non-empty list of ints >= 0; got {steps!r}.")
        if not isinstance(env.observation_space, spaces.Box):
            raise ValueError(
                f"FrameHistory needs a Box observation space; got {env.observation_space}."
            )
        gymnasium.utils.RecordConstructorArgs.__init__(self, steps=steps, flatten=flatten)
        size = max(steps) + 1
        gymnasium.ObservationWrapper.__init__(
            self, FrameStackObservation(env, size, padding_type="reset")
        )
        # FrameStackObservation keeps the newest frame last.
        self._index = np.array([size - 1 - s for s in steps])
        self._flatten = flatten
        inner = env.observation_space
        low = np.stack([inner.low] * len(steps))
        high = np.stack([inner.high] * len(steps))
        if flatten:
            low, high = self._flat(low), self._flat(high)
        self.observation_space = spaces.Box(low, high, dtype=inner.dtype)

    @staticmethod
    def _flat(x: np.ndarray) -> np.ndarray:
        return x.reshape((-1, *x.shape[2:]))

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """Selects (and flattens) the requested frames."""
        frames = observation[self._index]
        return self._flat(frames) if self._flatten else frames


class FrameDelta(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """Observations become the difference to the previous observation.

    ``reset`` returns the raw first observation (there is no previous one), as the original.
    The observation space covers both raw observations and differences.
    """

    def __init__(self, env: gymnasium.Env):
        if not isinstance(env.observation_space, spaces.Box):
            raise ValueError(
                f"FrameDelta needs a Box observation space; got {env.observation_space}."
            )
        gymnasium.utils.RecordConstructorArgs.__init__(self)
        gymnasium.Wrapper.__init__(self, env)
        space = env.observation_space
        with np.errstate(over="ignore", invalid="ignore"):
            low = np.minimum(space.low, space.low - space.high)
            high = np.maximum(space.high, space.high - space.low)
        self.observation_space = spaces.Box(low, high, dtype=space.dtype)
        self._last = None

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps; returns ``obs - previous_obs``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        delta = obs - self._last
        self._last = obs
        return delta, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets; returns the raw first observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._last = obs
        return obs, info


class ActionRepeat(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """Repeats each action ``amount`` times (stopping where the episode ends); sums rewards.

    Args:
        env: The env to wrap.
        amount: Repeats per agent step (>= 1).
    """

    def __init__(self, env: gymnasium.Env, amount: int):
        if int(amount) < 1:
            raise ValueError(f"amount must be >= 1; got {amount!r}.")
        gymnasium.utils.RecordConstructorArgs.__init__(self, amount=amount)
        gymnasium.Wrapper.__init__(self, env)
        self._amount = int(amount)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Steps up to ``amount`` times; returns the last obs and the summed reward."""
        total = 0.0
        for _ in range(self._amount):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


class RandomStart(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """Starts each episode with a random number (``0 .. max_steps - 1``) of random actions.

    The number and the actions come from the wrapper's own generator, seeded from the reset
    seed. If an episode ends during the random start, the env is reset again.

    Args:
        env: The env to wrap.
        max_steps: Exclusive upper bound of the number of random steps (>= 1).
    """

    def __init__(self, env: gymnasium.Env, max_steps: int):
        if int(max_steps) < 1:
            raise ValueError(f"max_steps must be >= 1; got {max_steps!r}.")
        gymnasium.utils.RecordConstructorArgs.__init__(self, max_steps=max_steps)
        gymnasium.Wrapper.__init__(self, env)
        self._max_steps = int(max_steps)
        self._rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets, then takes the random steps."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self.env.action_space.seed(int(self._rng.integers(2**31)))
        for _ in range(100):
            obs, info = self.env.reset(seed=seed, options=options)
            seed = None
            ended = False
            for _ in range(int(self._rng.integers(0, self._max_steps))):
                obs, _, terminated, truncated, info = self.env.step(self.env.action_space.sample())
                if terminated or truncated:
                    ended = True
                    break
            if not ended:
                return obs, info
        raise RuntimeError(
            f"RandomStart: 100 episodes in a row ended within {self._max_steps} random steps; "
            "lower max_steps."
        )

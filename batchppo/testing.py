"""Fixtures for tests and examples: mock envs with fixed episode durations, a random agent and
tiny cue tasks.

Nothing of the package imports this module: the tests, the docs' examples and a user's own tests
do. It lives outside [`batchppo.core`][batchppo.core], which imports no Gymnasium, because its
``MockGymEnv`` is a Gymnasium env.

For exact tests of simulation, the env of batch index ``i`` ends every episode after
``durations[i]`` steps, either as *terminated* or as *truncated* (``terminate``, per env). Its
observations encode where it is: every element equals ``encode_obs(i, t) = 1000 * i + t`` with
``t`` the number of steps taken in the current episode (0 right after a reset), and the reward of a
step is the new ``t``. An episode of length ``d`` therefore scores ``d * (d + 1) / 2``.

``MockEnv`` is the pure-JAX version (the [`Env`][batchppo.core.Env] API); ``MockGymEnv`` is the
Gymnasium version with the same behaviour, for host-env tests, plus switches to inject failures and
non-finite values; ``make_mock_vector_env`` batches it in a same-step auto-resetting
``SyncVectorEnv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from batchppo.core import spaces
from batchppo.core.env import EnvSpec, StepResult
from batchppo.core.types import PolicyFn, PyTree

#: Multiplier of the env index in mock observations (durations must stay below it).
OBS_INDEX_SCALE = 1000


def encode_obs(index: Any, t: Any) -> Any:
    """The value every element of a mock observation takes for env ``index`` at step ``t``."""
    return OBS_INDEX_SCALE * index + t


def _check_durations(durations: Sequence[int]) -> tuple[int, ...]:
    durations = tuple(int(d) for d in durations)
    if not durations:
        raise ValueError("durations must name at least one env, got an empty sequence.")
    bad = [d for d in durations if not 1 <= d < OBS_INDEX_SCALE]
    if bad:
        raise ValueError(
            f"durations must be integers in [1, {OBS_INDEX_SCALE}), got {durations} "
            f"(offending: {bad})."
        )
    return durations


def _check_terminate(terminate: bool | Sequence[bool], num_envs: int) -> tuple[bool, ...]:
    if isinstance(terminate, (bool, np.bool_)):
        return (bool(terminate),) * num_envs
    terminate = tuple(bool(x) for x in terminate)
    if len(terminate) != num_envs:
        raise ValueError(
            f"terminate must be one bool or one bool per env ({num_envs}), got {len(terminate)}."
        )
    return terminate


def _mock_spec(obs_shape: tuple[int, ...], discrete: bool, num_actions: int) -> EnvSpec:
    if discrete:
        return EnvSpec(
            obs_shape=obs_shape,
            obs_dtype=jnp.float32,
            action_shape=(),
            action_dtype=jnp.int32,
            discrete=True,
            num_actions=num_actions,
        )
    return EnvSpec(
        obs_shape=obs_shape,
        obs_dtype=jnp.float32,
        action_shape=(1,),
        action_dtype=jnp.float32,
        discrete=False,
        action_low=-np.ones((1,), np.float32),
        action_high=np.ones((1,), np.float32),
    )


@struct.dataclass
class MockState:
    """State of ``MockEnv``: steps taken in the current episode, per env."""

    t: jax.Array


class MockEnv:
    """Pure-JAX batched env whose env ``i`` ends each episode after ``durations[i]`` steps.

    Args:
        durations: Episode length of each env; the batch size is ``len(durations)``.
        terminate: Whether episode ends are terminations (True) or truncations (False); one
            bool for all envs or one per env.
        obs_shape: Shape of one observation (any shape, ``()`` included).
        discrete: Discrete actions in ``[0, num_actions)`` instead of a ``(1,)`` Box in [-1, 1].
        num_actions: Number of discrete actions.
    """

    def __init__(
        self,
        durations: Sequence[int],
        terminate: bool | Sequence[bool] = True,
        obs_shape: tuple[int, ...] = (2,),
        *,
        discrete: bool = False,
        num_actions: int = 3,
    ) -> None:
        self._durations = _check_durations(durations)
        self._terminate = _check_terminate(terminate, len(self._durations))
        self._obs_shape = tuple(int(s) for s in obs_shape)
        self._spec = _mock_spec(self._obs_shape, discrete, num_actions)

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one env."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return len(self._durations)

    def close(self) -> None:
        """Nothing to release."""

    def _obs(self, t: jax.Array) -> jax.Array:
        index = jnp.arange(self.num_envs, dtype=jnp.float32)
        value = encode_obs(index, t.astype(jnp.float32))
        return jnp.broadcast_to(
            value.reshape((-1,) + (1,) * len(self._obs_shape)),
            (self.num_envs, *self._obs_shape),
        )

    def reset(self, key: jax.Array) -> tuple[MockState, jax.Array]:
        """Starts every env at step 0 (the key is unused: the mock is deterministic)."""
        del key
        t = jnp.zeros((self.num_envs,), jnp.int32)
        return MockState(t=t), self._obs(t)

    def step(self, state: MockState, action: jax.Array, key: jax.Array) -> StepResult:
        """Advances every env one step and resets those whose episode ended."""
        del action, key
        t = state.t + 1
        done = t >= jnp.asarray(self._durations, jnp.int32)
        terminate = jnp.asarray(self._terminate)
        final_obs = self._obs(t)
        t_next = jnp.where(done, 0, t)
        return StepResult(
            state=MockState(t=t_next),
            obs=self._obs(t_next),
            reward=t.astype(jnp.float32),
            terminated=done & terminate,
            truncated=done & ~terminate,
            final_obs=final_obs,
        )


class MockGymEnv(gym.Env):
    """Gymnasium twin of one env of ``MockEnv``, with optional injected faults.

    Args:
        duration: Episode length.
        index: The batch index encoded in observations.
        terminate: End episodes as terminated (True) or truncated (False).
        obs_shape: Shape of one observation.
        discrete: Discrete actions instead of a ``(1,)`` Box in [-1, 1].
        num_actions: Number of discrete actions.
        fail_at_step: Raise ``RuntimeError`` on this call of ``step`` (1-based, counted over
            the env's lifetime); None never fails.
        nan_obs_at_step: Return a NaN observation on this call of ``step``.
        nan_reward_at_step: Return a NaN reward on this call of ``step``.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium convention)

    def __init__(
        self,
        duration: int,
        index: int = 0,
        terminate: bool = True,
        obs_shape: tuple[int, ...] = (2,),
        *,
        discrete: bool = False,
        num_actions: int = 3,
        fail_at_step: int | None = None,
        nan_obs_at_step: int | None = None,
        nan_reward_at_step: int | None = None,
    ) -> None:
        (self._duration,) = _check_durations((duration,))
        self._index = int(index)
        self._terminate = bool(terminate)
        self._obs_shape = tuple(int(s) for s in obs_shape)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self._obs_shape, np.float32)
        if discrete:
            self.action_space = gym.spaces.Discrete(num_actions)
        else:
            self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._fail_at_step = fail_at_step
        self._nan_obs_at_step = nan_obs_at_step
        self._nan_reward_at_step = nan_reward_at_step
        self._t = 0
        self._calls = 0

    def _obs(self) -> np.ndarray:
        return np.full(self._obs_shape, encode_obs(self._index, self._t), np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts an episode at step 0."""
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Advances one step; the episode ends after ``duration`` steps."""
        self._calls += 1
        if self._fail_at_step is not None and self._calls == self._fail_at_step:
            raise RuntimeError(f"MockGymEnv {self._index}: injected failure at step {self._calls}")
        self._t += 1
        obs = self._obs()
        reward = float(self._t)
        if self._nan_obs_at_step == self._calls:
            obs[...] = np.nan
        if self._nan_reward_at_step == self._calls:
            reward = float("nan")
        done = self._t >= self._duration
        return obs, reward, done and self._terminate, done and not self._terminate, {}


def make_mock_vector_env(
    durations: Sequence[int],
    terminate: bool | Sequence[bool] = True,
    obs_shape: tuple[int, ...] = (2,),
    **kwargs: Any,
) -> SyncVectorEnv:
    """A same-step auto-resetting ``SyncVectorEnv`` of ``MockGymEnv`` (index ``i`` per env).

    Args:
        durations: Episode length of each env.
        terminate: One bool or one per env, as in ``MockEnv``.
        obs_shape: Shape of one observation.
        **kwargs: Passed to every ``MockGymEnv`` (``discrete``, ``fail_at_step``, ...). A value that
            is a dict ``{env_index: value}`` applies to those envs only.
    """
    durations = _check_durations(durations)
    terminate = _check_terminate(terminate, len(durations))

    def factory(i: int) -> Any:
        own = {k: (v.get(i) if isinstance(v, dict) else v) for k, v in kwargs.items()}
        return lambda: MockGymEnv(durations[i], i, terminate[i], obs_shape, **own)

    return SyncVectorEnv(
        [factory(i) for i in range(len(durations))], autoreset_mode=AutoresetMode.SAME_STEP
    )


def random_policy(spec: EnvSpec) -> PolicyFn:
    """A feed-forward [`PolicyFn`][batchppo.core.PolicyFn] acting uniformly at random.

    Discrete actions are uniform over ``[0, num_actions)``; continuous actions uniform over
    ``[action_low, action_high]`` (``[-1, 1]`` where a bound is missing or infinite). The carry
    passes through unchanged and ``extras`` is empty.

    Args:
        spec: The env's spec.

    Returns:
        ``policy_fn(params, carry, obs, first, key) -> (action, {}, carry)``.
    """
    if spec.discrete:
        if spec.num_actions < 1:
            raise ValueError(f"a discrete spec needs num_actions >= 1, got {spec.num_actions}.")

        def discrete_policy(
            params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
        ) -> tuple[jax.Array, PyTree, PyTree]:
            del params
            shape = (obs.shape[0], *spec.action_shape)
            action = jax.random.randint(key, shape, 0, spec.num_actions, dtype=jnp.int32)
            return action, {}, carry

        return discrete_policy

    low = np.broadcast_to(
        -1.0 if spec.action_low is None else spec.action_low, spec.action_shape
    ).astype(np.float32)
    high = np.broadcast_to(
        1.0 if spec.action_high is None else spec.action_high, spec.action_shape
    ).astype(np.float32)
    finite = np.isfinite(low) & np.isfinite(high)
    low = np.where(finite, low, -1.0).astype(np.float32)
    high = np.where(finite, high, 1.0).astype(np.float32)

    def continuous_policy(
        params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, PyTree, PyTree]:
        del params
        shape = (obs.shape[0], *spec.action_shape)
        action = jax.random.uniform(key, shape, jnp.float32, low, high)
        return action, {}, carry

    return continuous_policy


# ---------------------------------------------------------------------------------------------
# Cue envs: tiny pure-JAX tasks over composite spaces, for learning and dtype tests
# ---------------------------------------------------------------------------------------------


@struct.dataclass
class CueState:
    """State of a cue env: the cue the agent sees, and steps taken in the episode, per env."""

    cue: jax.Array
    t: jax.Array


class _CueEnv:
    """A batched pure-JAX task: each step shows a random cue and rewards the action that
    matches it (a contextual bandit); episodes are cut after ``length`` steps (truncated).

    Subclasses set ``_spec`` and ``cue_shape``/``cue_high`` and define ``_obs`` and
    ``_reward``; the best return is ``length`` (reward 1 per step).
    """

    _spec: EnvSpec
    cue_high: tuple[int, ...]

    def __init__(self, num_envs: int, length: int = 8) -> None:
        self._num_envs = int(num_envs)
        self._length = int(length)

    @property
    def spec(self) -> EnvSpec:
        """The env's spaces."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return self._num_envs

    def close(self) -> None:
        """Nothing to release."""

    def _cue(self, key: jax.Array) -> jax.Array:
        keys = jax.random.split(key, len(self.cue_high))
        return jnp.stack(
            [
                jax.random.randint(k, (self._num_envs,), 0, high, jnp.int32)
                for k, high in zip(keys, self.cue_high, strict=True)
            ],
            axis=-1,
        )

    def _obs(self, cue: jax.Array) -> PyTree:
        raise NotImplementedError

    def _reward(self, cue: jax.Array, action: PyTree) -> jax.Array:
        raise NotImplementedError

    def reset(self, key: jax.Array) -> tuple[CueState, PyTree]:
        """Fresh episodes with random cues."""
        cue = self._cue(key)
        return CueState(cue=cue, t=jnp.zeros((self._num_envs,), jnp.int32)), self._obs(cue)

    def step(self, state: CueState, action: PyTree, key: jax.Array) -> StepResult:
        """Rewards the action against the cue shown, then shows a new cue."""
        reward = self._reward(state.cue, action).astype(jnp.float32)
        t = state.t + 1
        truncated = t >= self._length
        cue = self._cue(key)
        obs = self._obs(cue)
        return StepResult(
            state=CueState(cue=cue, t=jnp.where(truncated, 0, t)),
            obs=obs,
            reward=reward,
            terminated=jnp.zeros((self._num_envs,), jnp.bool_),
            truncated=truncated,
            final_obs=obs,
        )


class DictCueEnv(_CueEnv):
    """Dict observation ``{"bit": Discrete(2), "x": Box((2,), float32)}``, Discrete(2) actions.

    The rewarded action is ``bit XOR (x[0] > 0)``: neither leaf alone tells it, so a policy
    that gets more than half the reward reads both. ``x[0]`` is ±1 and ``x[1]`` is 0.
    """

    cue_high = (2, 2)

    def __init__(self, num_envs: int, length: int = 8) -> None:
        super().__init__(num_envs, length)
        obs_space = {
            "bit": spaces.Discrete(2),
            "x": spaces.box((2,), np.float32, -1.0, 1.0),
        }
        self._spec = EnvSpec.from_spaces(obs_space, spaces.Discrete(2))

    def _obs(self, cue: jax.Array) -> PyTree:
        sign = 2.0 * cue[:, 1].astype(jnp.float32) - 1.0
        x = jnp.stack([sign, jnp.zeros_like(sign)], axis=-1)
        return {"bit": cue[:, 0], "x": x}

    def _reward(self, cue: jax.Array, action: PyTree) -> jax.Array:
        return action == jnp.bitwise_xor(cue[:, 0], cue[:, 1])


class MultiDiscreteCueEnv(_CueEnv):
    """One-hot cues ``Box((5,), float32)`` (2 + 3 entries), ``MultiDiscrete([2, 3])`` actions.

    Each entry of the action that equals its cue earns half a point; a uniform policy earns
    ``0.5 / 2 + 0.5 / 3`` per step.
    """

    cue_high = (2, 3)

    def __init__(self, num_envs: int, length: int = 8) -> None:
        super().__init__(num_envs, length)
        obs_space = spaces.box((5,), np.float32, 0.0, 1.0)
        self._spec = EnvSpec.from_spaces(obs_space, spaces.MultiDiscrete((2, 3)))

    def _obs(self, cue: jax.Array) -> jax.Array:
        return jnp.concatenate(
            [jax.nn.one_hot(cue[:, 0], 2), jax.nn.one_hot(cue[:, 1], 3)], axis=-1
        )

    def _reward(self, cue: jax.Array, action: jax.Array) -> jax.Array:
        return 0.5 * (action[:, 0] == cue[:, 0]) + 0.5 * (action[:, 1] == cue[:, 1])


class ImageCueEnv(_CueEnv):
    """uint8 image observations ``Box((6, 6, 2), uint8)`` showing the cue as a bright left or
    right half of channel 0 (255 against 0), ``Discrete(2)`` actions: the cue's side earns 1.
    For the tests that frames reach the network as uint8."""

    cue_high = (2,)

    def __init__(self, num_envs: int, length: int = 8) -> None:
        super().__init__(num_envs, length)
        obs_space = spaces.box((6, 6, 2), np.uint8, 0, 255)
        self._spec = EnvSpec.from_spaces(obs_space, spaces.Discrete(2))

    def _obs(self, cue: jax.Array) -> jax.Array:
        left = jnp.arange(6) < 3
        side = jnp.where(cue[:, :1] == 0, left[None, :], ~left[None, :])  # (B, 6) columns
        bright = jnp.broadcast_to(side[:, None, :], (cue.shape[0], 6, 6))
        frame = jnp.stack([bright, jnp.zeros_like(bright)], axis=-1)
        return (frame * 255).astype(jnp.uint8)

    def _reward(self, cue: jax.Array, action: jax.Array) -> jax.Array:
        return action == cue[:, 0]

"""The ``gymnax`` backend's env: [`GymnaxEnv`][batchppo.backends.GymnaxEnv], a gymnax env as a
batched [`Env`][batchppo.core.Env], ``vmap``-ed over the batch, with our own step counter for the
time limit (so ``truncated`` and ``terminated`` stay separate) and same-step auto-reset inside the
compiled step. It carries one Box observation and a Box or Discrete action, which is what gymnax's
envs have.

Range normalisation (``normalize_ranges``) applies the maps of ``batchppo.core.ranges``, which the
host wrapper ``RangeNormalize`` uses too, so presets transfer between backends: each observation
dimension with a finite range (in float32) is mapped by ``2 * (obs - low) / (high - low) - 1``; Box
actions are clipped to ``[-1, 1]`` and mapped by ``low + (a + 1) / 2 * (high - low)``.

The backend's record and id check live in ``batchppo.backends.gymnax``, which imports this module
when it builds an env.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchppo.backends.factories import call_factory, expect_api, is_factory_id
from batchppo.backends.gymnax import check_gymnax_id, import_gymnax
from batchppo.core.env import EnvSpec, StepResult
from batchppo.core.pure_env import (
    DEFAULT_RESET_RATIO,
    PureJaxEnv,
    TimedState,
    check_autoreset,
    check_max_length,
    check_num_envs,
    check_reset_ratio,
)
from batchppo.core.ranges import (
    denormalize_action,
    maps_dtype,
    normalized_bounds,
    range_normalize_obs,
)

__all__ = ["GymnaxEnv"]

# gymnax's time limit is switched off (we count steps ourselves) by a limit never reached.
_NO_LIMIT = 2**30


class GymnaxEnv(PureJaxEnv):
    """A gymnax environment as a batched [`Env`][batchppo.core.Env].

    gymnax's own ``step`` folds the time limit into ``done``; this adapter calls
    ``step_env``/``reset_env`` with the gymnax time limit disabled and counts steps itself:
    ``truncated`` is set when the count reaches ``max_length`` and the env did not terminate
    by its own condition at that step.

    Args:
        env_id: A gymnax id (tested: Pendulum-v1, CartPole-v1, MountainCarContinuous-v0,
            Acrobot-v1), or ``module:factory`` returning an env with gymnax's API (or gymnax's
            ``(env, params)``), called with ``param_changes`` as keywords
            (``batchppo.backends.factories``).
        num_envs: Batch size.
        max_length: Time limit in steps; None uses the env's ``max_steps_in_episode``.
        normalize_ranges: Rescale bounded observation dims and Box actions to [-1, 1].
        env_params: gymnax ``EnvParams`` to use instead of the env's defaults.
        param_changes: Fields of the ``EnvParams`` to change (by name); for a factory, the
            keywords it is called with.
        autoreset: How finished envs restart (`AUTORESET_MODES`):
            ``select`` (the default: gymnax resets are cheap, and a GPU does not wait for the
            host at each step), ``cond`` (the reset only at steps where an episode ended; the
            same values), ``first`` (each env from its first reset's state, as Brax does) or
            ``optimistic`` (``reset_ratio`` envs share each step's fresh resets, for envs
            whose reset is expensive, as Craftax's baselines do).
        reset_ratio: Envs per fresh reset with ``autoreset="optimistic"``.

    Raises:
        ValueError: Unknown env id, or a name in ``param_changes`` that is not a field of the
            env's ``EnvParams``.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        max_length: int | None = None,
        normalize_ranges: bool = True,
        env_params: Any = None,
        param_changes: Mapping[str, Any] | None = None,
        autoreset: str = "select",
        reset_ratio: int = DEFAULT_RESET_RATIO,
    ) -> None:
        gymnax = import_gymnax()
        if is_factory_id(env_id):
            product = call_factory(env_id, param_changes)
            expect_api(env_id, product, "gymnax")
            env, default_params = product if isinstance(product, tuple) else (product, None)
            params = env.default_params if default_params is None else default_params
            params = params if env_params is None else env_params
        else:
            check_gymnax_id(env_id)
            env, default_params = gymnax.make(env_id)
            params = default_params if env_params is None else env_params
            if param_changes:
                params = _replace_params(env_id, params, param_changes)
        self._env = env
        self._env_id = env_id
        self._num_envs = check_num_envs(num_envs)
        max_length = check_max_length(max_length)
        if max_length is None:
            max_length = getattr(params, "max_steps_in_episode", None)
            if max_length is None:
                raise ValueError(f"{env_id} has no max_steps_in_episode; pass max_length.")
        self._max_length = int(max_length)
        if hasattr(params, "max_steps_in_episode"):
            params = params.replace(max_steps_in_episode=_NO_LIMIT)
        self._params = params
        self._normalize = bool(normalize_ranges)
        self._autoreset = check_autoreset(autoreset)
        self._reset_ratio = check_reset_ratio(reset_ratio)

        obs_space = env.observation_space(params)
        # Float Boxes only, as on the host (batchppo.core.ranges.maps_dtype): Catch-bsuite's
        # int32 board passes unchanged.
        self._normalize_obs = self._normalize and maps_dtype(obs_space.dtype)
        obs_shape = tuple(int(s) for s in obs_space.shape)
        obs_low = np.broadcast_to(np.asarray(obs_space.low, np.float32), obs_shape).copy()
        obs_high = np.broadcast_to(np.asarray(obs_space.high, np.float32), obs_shape).copy()
        self._raw_obs_bounds = (obs_low, obs_high)
        if self._normalize_obs:
            obs_low, obs_high = normalized_bounds(obs_low, obs_high)

        act_space = env.action_space(params)
        # By kind, not class: libraries with gymnax's API (Craftax) carry copies of its spaces.
        if _space_kind(act_space) == "Discrete":
            self._raw_action_bounds = None
            self._spec = EnvSpec(
                obs_shape=obs_shape,
                obs_dtype=jnp.float32,
                action_shape=(),
                action_dtype=jnp.int32,
                discrete=True,
                num_actions=int(act_space.n),
                obs_low=obs_low,
                obs_high=obs_high,
            )
        elif _space_kind(act_space) == "Box":
            act_shape = tuple(int(s) for s in act_space.shape)
            act_low = np.broadcast_to(np.asarray(act_space.low, np.float32), act_shape).copy()
            act_high = np.broadcast_to(np.asarray(act_space.high, np.float32), act_shape).copy()
            self._raw_action_bounds = (act_low, act_high)
            if self._normalize:
                act_low, act_high = normalized_bounds(act_low, act_high)
            self._spec = EnvSpec(
                obs_shape=obs_shape,
                obs_dtype=jnp.float32,
                action_shape=act_shape,
                action_dtype=jnp.float32,
                discrete=False,
                action_low=act_low,
                action_high=act_high,
                obs_low=obs_low,
                obs_high=obs_high,
            )
        else:
            raise ValueError(
                f"{env_id}: action space {act_space!r} is not supported (Discrete or Box only)."
            )

    @property
    def raw_bounds(self) -> tuple[tuple[np.ndarray, np.ndarray] | None, ...]:
        """What range normalisation maps here: ``(obs_bounds, action_bounds)``, each the env's own
        float32 ``(low, high)`` where this adapter maps that side, else None (a ``Discrete`` action,
        a non-float observation, or ``normalize_ranges`` off). The ONNX export
        ([`batchppo.experiment.artifacts.export`][batchppo.experiment.artifacts.export]) folds the
        same maps into its model."""
        obs = self._raw_obs_bounds if self._normalize_obs else None
        act = self._raw_action_bounds if self._normalize else None
        return obs, act

    def __repr__(self) -> str:
        return (
            f"GymnaxEnv({self._env_id!r}, num_envs={self._num_envs}, "
            f"max_length={self._max_length}, normalize_ranges={self._normalize})"
        )

    def _observe(self, obs: jax.Array) -> jax.Array:
        obs = jnp.asarray(obs, jnp.float32).reshape((-1, *self._spec.obs_shape))
        if self._normalize_obs:
            obs = range_normalize_obs(obs, *self._raw_obs_bounds)
        return obs

    def _env_action(self, action: jax.Array) -> jax.Array:
        if self._spec.discrete:
            return jnp.asarray(action, jnp.int32)
        action = jnp.asarray(action, jnp.float32)
        if self._normalize:
            action = denormalize_action(action, *self._raw_action_bounds)
        return action

    def _reset_all(self, key: jax.Array, count: int | None = None) -> tuple[Any, jax.Array]:
        """Fresh resets of ``count`` envs (every env by default): ``(env_state, obs)``."""
        keys = jax.random.split(key, self._num_envs if count is None else count)
        obs, env_state = jax.vmap(self._env.reset_env, in_axes=(0, None))(keys, self._params)
        return env_state, obs

    def reset(self, key: jax.Array) -> tuple[TimedState, jax.Array]:
        """Resets every env; returns ``(state, obs)``."""
        env_state, obs = self._reset_all(key)
        obs = self._observe(obs)
        return self._fresh_state(env_state, (env_state, obs)), obs

    def step(self, state: TimedState, action: jax.Array, key: jax.Array) -> StepResult:
        """Steps every env; finished episodes restart in the same step."""
        key_step, key_reset = jax.random.split(key)
        keys = jax.random.split(key_step, self._num_envs)
        obs, env_state, reward, terminated, _ = jax.vmap(
            self._env.step_env, in_axes=(0, 0, 0, None)
        )(keys, state.env_state, self._env_action(action), self._params)
        terminated = jnp.asarray(terminated, jnp.bool_).reshape(self._num_envs)
        time, truncated, done = self._time_limit(state.time, terminated)
        final_obs = self._observe(obs)

        def reset_all(count: int) -> tuple[Any, jax.Array]:
            new_state, new_obs = self._reset_all(key_reset, count)
            return new_state, self._observe(new_obs)

        env_state, next_obs = self._restart(done, state, reset_all, (env_state, final_obs))
        return StepResult(
            state=state.replace(env_state=env_state, time=jnp.where(done, 0, time)),
            obs=next_obs,
            reward=jnp.asarray(reward, jnp.float32).reshape(self._num_envs),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


def _space_kind(space: Any) -> str | None:
    """``Discrete`` or ``Box`` for a space of gymnax's kinds (or a library's copy of them)."""
    kinds = {cls.__name__ for cls in type(space).__mro__}
    if "Discrete" in kinds and hasattr(space, "n"):
        return "Discrete"
    if "Box" in kinds and all(hasattr(space, a) for a in ("low", "high", "shape")):
        return "Box"
    return None


def _replace_params(env_id: str, params: Any, changes: Mapping[str, Any]) -> Any:
    """``params`` (a gymnax ``EnvParams`` dataclass) with the fields in ``changes`` replaced."""
    fields = [f.name for f in dataclasses.fields(params)]
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise ValueError(
            f"env_kwargs {unknown} are not EnvParams fields of gymnax {env_id!r}; "
            f"its fields are {fields}"
        )
    return params.replace(**changes)

"""Adapters from concrete environments to the functional batched :class:`~batchppo.core.env.Env`.

* :class:`GymnaxEnv`: a gymnax env, ``vmap``-ed over the batch, with our own step counter
  for the time limit (so ``truncated`` and ``terminated`` stay separate) and same-step
  auto-reset inside the compiled step.
* :class:`BraxEnv`: a Brax (or MuJoCo-MJX through Brax) env, the same way. Needs the optional
  ``brax`` package.
* :class:`HostEnv`: a Gymnasium ``VectorEnv`` in same-step auto-reset mode (such as
  ``batchppo.envs.BatchEnv``) called through ``jax.experimental.io_callback`` so that it runs
  inside ``jit`` and ``lax.scan``: the ``InGraphBatchEnv`` of the original Batch PPO.
* :func:`make_env`: the one factory the trainer uses, by backend name: it looks the backend up
  in the registry of :mod:`batchppo.core.backends`, whose records point at the builders here
  (:func:`make_gymnax_env`, :func:`make_brax_env`, :func:`make_host_env`).

Range normalisation (``normalize_ranges``) applies the maps of :mod:`batchppo.core.ranges`,
which the host wrapper ``RangeNormalize`` uses too, so presets transfer between backends: each
observation dimension with a finite range (in float32) is mapped by
``2 * (obs - low) / (high - low) - 1``; Box actions are clipped to ``[-1, 1]`` and mapped by
``low + (a + 1) / 2 * (high - low)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import operator
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.experimental import io_callback

from batchppo.core import spaces
from batchppo.core.backends import (
    BACKENDS,
    check_gymnax_id,
    check_restarts,
    get_backend,
    prose,
    unknown_id_message,
)
from batchppo.core.env import Env, EnvSpec, StepResult
from batchppo.core.ranges import (
    denormalize_action,
    maps_dtype,
    normalized_bounds,
    range_normalize_obs,
)
from batchppo.envs import make as make_host_envs
from batchppo.envs.episode_metrics import EpisodeInfoRecorder
from batchppo.envs.final_obs import final_obs_from_infos

# gymnax's time limit is switched off (we count steps ourselves) by a limit never reached.
_NO_LIMIT = 2**30


def _batched_where(done: jax.Array, new: Any, old: Any) -> Any:
    """Per-env select over a pytree whose leaves have a leading batch axis."""

    def select(a: jax.Array, b: jax.Array) -> jax.Array:
        mask = done.reshape(done.shape + (1,) * (jnp.ndim(a) - 1))
        return jnp.where(mask, a, b)

    return jax.tree.map(select, new, old)


def _check_num_envs(num_envs: Any) -> int:
    try:
        num_envs = operator.index(num_envs)
    except TypeError:
        raise ValueError(f"num_envs must be an int, got {num_envs!r}.") from None
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
    return num_envs


def _check_max_length(max_length: Any) -> int | None:
    if max_length is None:
        return None
    try:
        max_length = operator.index(max_length)
    except TypeError:
        raise ValueError(f"max_length must be an int or None, got {max_length!r}.") from None
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1 (or None for the env's own), got {max_length}.")
    return max_length


@struct.dataclass
class TimedState:
    """State of the pure-JAX adapters: the batched inner env state and our step count per env."""

    env_state: Any
    time: jax.Array


def _autoreset(done: jax.Array, reset_fn: Callable[[], Any], current: Any) -> Any:
    """Replaces ``current`` by ``reset_fn()`` where ``done``, per env.

    The reset runs under ``lax.cond`` so that steps where no episode ended (most steps, with
    time limits) skip its cost.
    """
    return jax.lax.cond(
        jnp.any(done),
        lambda _: _batched_where(done, reset_fn(), current),
        lambda _: current,
        None,
    )


class _PureJaxEnv:
    """What the pure-JAX adapters share: batch size, spec, and our own time-limit bookkeeping.

    Subclasses set ``_spec``, ``_num_envs`` and ``_max_length`` in ``__init__``.
    """

    _spec: EnvSpec
    _num_envs: int
    _max_length: int

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one env (after normalisation, if on)."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return self._num_envs

    @property
    def max_length(self) -> int:
        """The time limit in steps."""
        return self._max_length

    def close(self) -> None:
        """Nothing to release (pure JAX)."""

    def _time_limit(
        self, time: jax.Array, terminated: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Advances the step count; returns ``(time, truncated, done)``.

        Truncation needs the limit reached without the env terminating at that step: when both
        happen, terminated wins (no bootstrap).
        """
        time = time + 1
        truncated = (time >= self._max_length) & ~terminated
        return time, truncated, terminated | truncated


# ---------------------------------------------------------------------------------------------
# gymnax
# ---------------------------------------------------------------------------------------------


class GymnaxEnv(_PureJaxEnv):
    """A gymnax environment as a batched :class:`~batchppo.core.env.Env`.

    gymnax's own ``step`` folds the time limit into ``done``; this adapter calls
    ``step_env``/``reset_env`` with the gymnax time limit disabled and counts steps itself:
    ``truncated`` is set when the count reaches ``max_length`` and the env did not terminate
    by its own condition at that step.

    Args:
        env_id: A gymnax id (tested: Pendulum-v1, CartPole-v1, MountainCarContinuous-v0,
            Acrobot-v1).
        num_envs: Batch size.
        max_length: Time limit in steps; None uses the env's ``max_steps_in_episode``.
        normalize_ranges: Rescale bounded observation dims and Box actions to [-1, 1].
        env_params: gymnax ``EnvParams`` to use instead of the env's defaults.
        param_changes: Fields of the ``EnvParams`` to change (by name).

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
    ) -> None:
        from batchppo.core.lazy import import_gymnax

        gymnax = import_gymnax()
        from gymnax.environments import spaces

        check_gymnax_id(env_id)
        env, default_params = gymnax.make(env_id)
        params = default_params if env_params is None else env_params
        if param_changes:
            params = _replace_params(env_id, params, param_changes)
        self._env = env
        self._env_id = env_id
        self._num_envs = _check_num_envs(num_envs)
        max_length = _check_max_length(max_length)
        if max_length is None:
            max_length = getattr(params, "max_steps_in_episode", None)
            if max_length is None:
                raise ValueError(f"{env_id} has no max_steps_in_episode; pass max_length.")
        self._max_length = int(max_length)
        if hasattr(params, "max_steps_in_episode"):
            params = params.replace(max_steps_in_episode=_NO_LIMIT)
        self._params = params
        self._normalize = bool(normalize_ranges)

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
        if isinstance(act_space, spaces.Discrete):
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
        elif isinstance(act_space, spaces.Box):
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
        """What range normalisation maps here: ``(obs_bounds, action_bounds)``, each the env's
        own float32 ``(low, high)`` where this adapter maps that side, else None (a
        ``Discrete`` action, a non-float observation, or ``normalize_ranges`` off). The
        ONNX export (:mod:`batchppo.experiment.export`) folds the same maps into its model."""
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

    def _reset_all(self, key: jax.Array) -> tuple[Any, jax.Array]:
        keys = jax.random.split(key, self._num_envs)
        obs, env_state = jax.vmap(self._env.reset_env, in_axes=(0, None))(keys, self._params)
        return env_state, obs

    def reset(self, key: jax.Array) -> tuple[TimedState, jax.Array]:
        """Resets every env; returns ``(state, obs)``."""
        env_state, obs = self._reset_all(key)
        time = jnp.zeros((self._num_envs,), jnp.int32)
        return TimedState(env_state=env_state, time=time), self._observe(obs)

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

        def reset_all() -> tuple[Any, jax.Array]:
            new_state, new_obs = self._reset_all(key_reset)
            return new_state, self._observe(new_obs)

        env_state, next_obs = _autoreset(done, reset_all, (env_state, final_obs))
        return StepResult(
            state=TimedState(env_state=env_state, time=jnp.where(done, 0, time)),
            obs=next_obs,
            reward=jnp.asarray(reward, jnp.float32).reshape(self._num_envs),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


# ---------------------------------------------------------------------------------------------
# Brax / MuJoCo-MJX
# ---------------------------------------------------------------------------------------------


class BraxEnv(_PureJaxEnv):
    """A Brax environment (any Brax backend, ``mjx`` included) as a batched Env.

    Brax marks time-limit ends with ``info['truncation']`` in its ``EpisodeWrapper``; this
    adapter does the same bookkeeping itself on the raw env: ``truncated`` when the step count
    reaches ``max_length`` and the env's own ``done`` is not set, ``terminated`` when Brax's
    ``done`` is set. Finished envs restart in the same step with a fresh random reset.
    Brax actions are already in [-1, 1]; they are clipped there, as range normalisation does.

    Args:
        env_name: A Brax env name (``ant``, ``halfcheetah``, ``hopper``, ``inverted_pendulum``...).
        num_envs: Batch size.
        max_length: Time limit in steps.
        backend: Brax physics backend (``generalized``, ``positional``, ``spring``, ``mjx``);
            None uses the env's default.
        **env_kwargs: Passed to ``brax.envs.get_environment``.
    """

    def __init__(
        self,
        env_name: str,
        num_envs: int,
        *,
        max_length: int = 1000,
        backend: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        try:
            from brax import envs as brax_envs
        except ImportError as error:
            raise ImportError(
                "BraxEnv needs the optional 'brax' package (pip install brax); it is not "
                f"importable here ({error})."
            ) from error
        if backend is not None:
            env_kwargs["backend"] = backend
        try:
            self._env = brax_envs.get_environment(env_name, **env_kwargs)
        except KeyError:
            known = sorted(getattr(brax_envs, "_envs", {}))
            raise ValueError(
                unknown_id_message("Brax env", env_name, known, f"Valid envs: {', '.join(known)}")
            ) from None
        self._env_name = env_name
        self._num_envs = _check_num_envs(num_envs)
        max_length = _check_max_length(max_length)
        self._max_length = 1000 if max_length is None else max_length
        obs_size = self._env.observation_size
        obs_shape = (obs_size,) if isinstance(obs_size, int) else tuple(obs_size)
        act_shape = (int(self._env.action_size),)
        self._spec = EnvSpec(
            obs_shape=obs_shape,
            obs_dtype=jnp.float32,
            action_shape=act_shape,
            action_dtype=jnp.float32,
            discrete=False,
            action_low=-np.ones(act_shape, np.float32),
            action_high=np.ones(act_shape, np.float32),
        )

    def __repr__(self) -> str:
        return (
            f"BraxEnv({self._env_name!r}, num_envs={self._num_envs}, max_length={self._max_length})"
        )

    def _reset_all(self, key: jax.Array) -> Any:
        return jax.vmap(self._env.reset)(jax.random.split(key, self._num_envs))

    def reset(self, key: jax.Array) -> tuple[TimedState, jax.Array]:
        """Resets every env; returns ``(state, obs)``."""
        env_state = self._reset_all(key)
        time = jnp.zeros((self._num_envs,), jnp.int32)
        return TimedState(env_state=env_state, time=time), env_state.obs.astype(jnp.float32)

    def step(self, state: TimedState, action: jax.Array, key: jax.Array) -> StepResult:
        """Steps every env; finished episodes restart in the same step."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        env_state = jax.vmap(self._env.step)(state.env_state, action)
        terminated = env_state.done.astype(jnp.bool_)
        time, truncated, _ = self._time_limit(state.time, terminated)
        if "truncation" in env_state.info:
            # A wrapped env may cut episodes itself; its truncation is not a termination.
            own_cut = env_state.info["truncation"].astype(jnp.bool_)
            truncated = truncated | own_cut
            terminated = terminated & ~own_cut
        done = terminated | truncated
        final_obs = env_state.obs.astype(jnp.float32)

        next_state = _autoreset(done, lambda: self._reset_all(key), env_state)
        return StepResult(
            state=TimedState(env_state=next_state, time=jnp.where(done, 0, time)),
            obs=next_state.obs.astype(jnp.float32),
            reward=env_state.reward.astype(jnp.float32),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


# ---------------------------------------------------------------------------------------------
# Host envs through io_callback
# ---------------------------------------------------------------------------------------------


def _spec_from_spaces(obs_space: Any, act_space: Any) -> EnvSpec:
    """EnvSpec of one env of a Gymnasium vector env (any space of :mod:`batchppo.core.spaces`).

    Raises:
        UnsupportedSpaceError: A space the env API does not carry (one line naming it).
    """
    return EnvSpec.from_spaces(
        spaces.from_gymnasium(obs_space, "HostEnv observation space"),
        spaces.from_gymnasium(act_space, "HostEnv action space"),
    )


def _final_obs_tree(space: Any, obs: Any, infos: Mapping[str, Any]) -> Any:
    """The dense final obs of a Dict/Tuple observation from Gymnasium's same-step infos.

    :func:`~batchppo.envs.final_obs.final_obs_from_infos` per leaf: ``obs`` where no episode
    ended, else a copy whose ended rows hold the leaf of ``infos["final_obs"][i]``.
    """
    if spaces.is_leaf(space):
        return final_obs_from_infos(obs, infos, space.dtype)
    mask = infos.get("_final_obs")
    if mask is None or not np.any(mask):
        return obs
    rows = np.flatnonzero(mask)

    def fill(sub: Any, batch: Any, finals: list[Any]) -> Any:
        if spaces.is_leaf(sub):
            out = np.array(batch, sub.dtype)
            out[rows] = np.stack([np.asarray(f, sub.dtype) for f in finals])
            return out
        keys = sub.keys() if isinstance(sub, dict) else range(len(sub))
        filled = {k: fill(sub[k], batch[k], [f[k] for f in finals]) for k in keys}
        return filled if isinstance(sub, dict) else tuple(filled[k] for k in keys)

    return fill(space, obs, [infos["final_obs"][i] for i in rows])


def _host_action_dtypes(space: Any) -> Any:
    """The tree of a Gymnasium action space with each leaf replaced by a dtype-only spec."""
    from gymnasium import spaces as gs

    if isinstance(space, gs.Dict):
        return {k: _host_action_dtypes(s) for k, s in space.spaces.items()}
    if isinstance(space, gs.Tuple):
        return tuple(_host_action_dtypes(s) for s in space.spaces)
    return spaces.DtypeOnly(np.dtype(space.dtype))


def _check_same_step(vector_env: Any) -> None:
    from gymnasium.vector import AutoresetMode

    mode = getattr(vector_env, "metadata", {}).get("autoreset_mode")
    if mode is not None and mode != AutoresetMode.SAME_STEP and str(mode) != "same-step":
        raise ValueError(
            f"HostEnv needs a vector env in same-step auto-reset mode, got {mode!r}; create it "
            "with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP."
        )


_ENV_ERROR = "batchppo_env_error"  # the attribute that marks an env's exception
_JAX_CALLBACK_LOGGER = "jax._src.callback"  # logs each failed io_callback with its traceback


def mark_env_error(error: BaseException) -> BaseException:
    """Marks ``error`` as raised by a host env's reset or step (see :func:`is_env_error`)."""
    with contextlib.suppress(AttributeError, TypeError):  # an exception without a __dict__
        setattr(error, _ENV_ERROR, True)
    return error


def is_env_error(error: BaseException) -> bool:
    """Whether ``error`` was raised by a host env's reset or step, through a
    :class:`HostEnv` (the env's own exception, ``WorkerDiedError``, a non-finite value)."""
    return bool(getattr(error, _ENV_ERROR, False))


def raise_env_error(error: BaseException, *envs: Any) -> None:
    """Raises the exception a :class:`HostEnv` of ``envs`` kept, if one did; else returns.

    Call it where a compiled program over host envs raised ``error``: an exception in an
    ``io_callback`` reaches the caller as JAX's ``JaxRuntimeError``, its type lost, and this
    raises the original (type, message and, for ``BatchEnv``, the worker's traceback) in its
    place. The JAX error, whose text repeats the traceback, stays as its hidden
    ``__context__``. Envs that are not HostEnvs (or None) are skipped.

    Example:
        >>> try:
        ...     state = compiled_rollout(state)
        ... except Exception as error:
        ...     raise_env_error(error, env)
        ...     raise
    """
    kept = None
    for env in envs:
        take = getattr(env, "take_error", None)
        found = take() if take is not None else None
        kept = kept or found
    if kept is None or kept is error:
        return
    kept.__suppress_context__ = True
    raise kept


class _EnvErrorLogFilter(logging.Filter):
    """Drops JAX's log of an ``io_callback`` that failed with a host env's exception.

    JAX logs every callback exception with its traceback before the compiled call fails;
    :func:`raise_env_error` raises that exception, traceback included, to the caller, and
    its ``JaxRuntimeError`` repeats the traceback too, so the log would only print it twice.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not is_env_error(error)


def _quiet_jax_callback_log() -> None:
    logger = logging.getLogger(_JAX_CALLBACK_LOGGER)
    if not any(isinstance(f, _EnvErrorLogFilter) for f in logger.filters):
        logger.addFilter(_EnvErrorLogFilter())


class HostEnv:
    """A Gymnasium ``VectorEnv`` (same-step auto-reset) as a functional Env usable under jit.

    ``reset`` and ``step`` call the vector env through ``jax.experimental.io_callback`` with
    ``ordered=True`` (one callback per step moving obs, reward, flags and final obs together),
    so a whole ``rollout`` over host envs compiles into one XLA program, as the original's
    ``InGraphBatchEnv`` put host envs into the TensorFlow graph. The env state is a step
    counter that only threads the data dependency; the real state lives on the host.

    Observation and action spaces are trees (:mod:`batchppo.core.spaces`): every observation
    leaf keeps its dtype (64-bit narrowed to 32-bit), so a uint8 frame crosses the
    ``io_callback`` as uint8; rewards become float32, actions each leaf's dtype. Non-finite
    float observations or rewards raise ``ValueError`` naming the env index and the field.
    An exception raised in ``host_reset`` or ``host_step`` (the env's own, re-raised by
    ``BatchEnv`` with the worker's traceback, or ``WorkerDiedError``) is marked
    (:func:`is_env_error`) and kept: a compiled call reports it as JAX's ``JaxRuntimeError``,
    and :func:`raise_env_error` raises the kept original in its place. A ``BatchEnv`` with
    ``max_restarts`` restarts the env instead (its episode ends truncated; :attr:`restarts`
    counts the restarts).

    ``reset(key)`` reseeds the vector env with a seed drawn from ``key``
    (:meth:`seed_from_key`), so runs are reproducible from the key alone.

    When the vector env has a ``step_arrays(actions) -> (obs, reward, terminated, truncated,
    final_obs)`` method (``batchppo.envs.BatchEnv``) it is used; otherwise ``step`` and the
    ``final_obs`` / ``_final_obs`` infos of Gymnasium's same-step mode.

    Args:
        vector_env: The vector env; HostEnv does not own it unless ``close`` is called.
        check_finite: Reject non-finite observations and rewards.
    """

    def __init__(self, vector_env: Any, *, check_finite: bool = True) -> None:
        _check_same_step(vector_env)
        _quiet_jax_callback_log()
        self._env = vector_env
        self._num_envs = _check_num_envs(vector_env.num_envs)
        self._spec = _spec_from_spaces(
            vector_env.single_observation_space, vector_env.single_action_space
        )
        self._check_finite = bool(check_finite)
        self._error: Exception | None = None  # the last exception of a host call, untaken
        self._obs_space = self._spec.obs_space
        self._nested_obs = not spaces.is_leaf(self._obs_space)
        self._float_leaves = [
            (i, path)
            for i, (leaf, path) in enumerate(
                zip(spaces.leaves(self._obs_space), spaces.leaf_paths(self._obs_space), strict=True)
            )
            if np.issubdtype(leaf.dtype, np.floating)
        ]
        # The vector env's own action dtypes (int64 Discrete, say), leaf by leaf.
        self._action_dtypes = _host_action_dtypes(vector_env.single_action_space)
        step_arrays = getattr(vector_env, "step_arrays", None)
        self._step_arrays = step_arrays if callable(step_arrays) else None
        self._recorder: EpisodeInfoRecorder | None = None
        n = self._num_envs
        self._obs_struct = spaces.structs(self._obs_space, (n,))
        self._step_structs = (
            self._obs_struct,
            jax.ShapeDtypeStruct((n,), jnp.float32),
            jax.ShapeDtypeStruct((n,), jnp.bool_),
            jax.ShapeDtypeStruct((n,), jnp.bool_),
            self._obs_struct,
        )

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one env."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return self._num_envs

    @property
    def vector_env(self) -> Any:
        """The wrapped vector env."""
        return self._env

    @property
    def restarts(self) -> int:
        """Envs the vector env restarted so far (``BatchEnv.restarts``; 0 if it has none)."""
        return int(getattr(self._env, "restarts", 0))

    def close(self) -> None:
        """Closes the wrapped vector env."""
        self._env.close()

    def record_infos(self, recorder: EpisodeInfoRecorder | None) -> None:
        """Feeds the vector env's infos to ``recorder`` from the next reset on; None stops.

        While a recorder is set, steps go through the vector env's ``step`` (infos included)
        instead of its ``step_arrays`` fast path.
        """
        self._recorder = recorder

    def take_error(self) -> Exception | None:
        """The exception the last failed ``host_reset`` / ``host_step`` raised, if not taken yet.

        Inside a compiled program such an exception reaches the caller only as JAX's
        ``JaxRuntimeError``; this is the original (see :func:`raise_env_error`).
        """
        error, self._error = self._error, None
        return error

    def _keep_error(self, error: Exception) -> None:
        mark_env_error(error)
        self._error = error

    def __repr__(self) -> str:
        return f"HostEnv({self._env!r}, num_envs={self._num_envs})"

    @staticmethod
    def seed_from_key(key: jax.Array) -> jax.Array:
        """The int32 seed that ``reset(key)`` passes to ``vector_env.reset(seed=...)``."""
        return jax.random.randint(key, (), 0, np.iinfo(np.int32).max, dtype=jnp.int32)

    # -- host side ---------------------------------------------------------------------------

    def _finite(self, name: str, value: np.ndarray) -> None:
        if np.isfinite(value).all():
            return
        bad = ~np.isfinite(value.reshape(self._num_envs, -1)).all(axis=1)
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"HostEnv: non-finite {name} from env {index} of {self._num_envs} "
            f"(value {value[index]!r}); fix the env or wrap it to keep {name} finite."
        )

    def host_reset(self, seed: np.ndarray | int) -> np.ndarray:
        """Resets the vector env on the host with ``seed``; returns float32 observations.

        An exception it raises is marked and kept (see :meth:`take_error`).
        """
        try:
            return self._host_reset(seed)
        except Exception as error:
            self._keep_error(error)
            raise

    def _observations(self, obs: Any) -> Any:
        """``obs`` in the observation space's structure and leaf dtypes."""
        return spaces.cast(self._obs_space, obs)

    def _finite_obs(self, name: str, obs: Any) -> None:
        if not self._nested_obs:
            if self._float_leaves:
                self._finite(name, obs)
            return
        flat = spaces.flatten(self._obs_space, obs)
        for i, path in self._float_leaves:
            self._finite(f"{name}{path}", flat[i])

    def _host_reset(self, seed: np.ndarray | int) -> Any:
        obs, infos = self._env.reset(seed=int(seed))
        if self._recorder is not None:
            self._recorder.reset(infos)
        obs = self._observations(obs)
        if self._check_finite:
            self._finite_obs("observation", obs)
        return obs

    def host_step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Steps the vector env on the host (what ``step`` calls back into).

        Returns:
            ``(obs, reward, terminated, truncated, final_obs)`` NumPy arrays; float32
            observations and rewards, checked finite unless ``check_finite=False``.

        Raises:
            Exception: What the vector env raised (marked and kept, see :meth:`take_error`),
                or ``ValueError`` for non-finite values.
        """
        try:
            return self._host_step(action)
        except Exception as error:
            self._keep_error(error)
            raise

    def _host_step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        action = spaces.cast(self._action_dtypes, action)
        if self._step_arrays is not None and self._recorder is None:
            obs, reward, terminated, truncated, final_obs = self._step_arrays(action)
        else:
            obs, reward, terminated, truncated, infos = self._env.step(action)
            final_obs = _final_obs_tree(self._obs_space, obs, infos)
            if self._recorder is not None:
                self._recorder.step(infos, terminated, truncated)
        obs = self._observations(obs)
        reward = np.asarray(reward, np.float32)
        final_obs = self._observations(final_obs)
        if self._check_finite:
            self._finite_obs("observation", obs)
            self._finite_obs("final observation", final_obs)
            self._finite("reward", reward)
        return (
            obs,
            reward,
            np.asarray(terminated, np.bool_),
            np.asarray(truncated, np.bool_),
            final_obs,
        )

    # -- traced side ---------------------------------------------------------------------------

    def reset(self, key: jax.Array) -> tuple[jax.Array, Any]:
        """Resets the vector env with a seed drawn from ``key``; returns ``(state, obs)``."""
        obs = io_callback(self.host_reset, self._obs_struct, self.seed_from_key(key), ordered=True)
        return jnp.zeros((), jnp.int32), obs

    def step(self, state: jax.Array, action: Any, key: jax.Array) -> StepResult:
        """Steps the vector env on the host (the key is unused: host envs own their RNG)."""
        del key
        action = spaces.cast_actions(self._spec.action_space, action, self._num_envs, "HostEnv")
        host_result = io_callback(self.host_step, self._step_structs, action, ordered=True)
        return self.step_result(state, host_result)

    @staticmethod
    def step_result(state: jax.Array, host_result: tuple[Any, ...]) -> StepResult:
        """The :class:`StepResult` of a step that ``host_step`` made from ``state``.

        The one home of the env state's meaning (a step counter), for :meth:`step` and for
        drivers that call ``host_step`` themselves (:class:`~batchppo.core.host_loop.HostLoop`).

        Args:
            state: The env state before the step.
            host_result: What ``host_step`` returned, ``(obs, reward, terminated, truncated,
                final_obs)``.
        """
        obs, reward, terminated, truncated, final_obs = host_result
        return StepResult(
            state=state + 1,
            obs=obs,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


# ---------------------------------------------------------------------------------------------
# Factory
# ---------------------------------------------------------------------------------------------


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


def make_env(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    seed: int = 0,
    num_workers: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    max_restarts: int = 0,
) -> Env:
    """Builds a batched Env by backend name: the one factory the trainer uses.

    The backend is looked up in the registry (:mod:`batchppo.core.backends`), whose record
    builds the env.

    Args:
        env_id: Env id: a gymnax id (``gymnax``), a Brax env name (``brax``) or a Gymnasium id
            (``process``, ``sync``, ``ray``).
        num_envs: Batch size.
        backend: A registered backend: ``process``, ``sync``, ``ray``, ``gymnax``, ``brax``.
        max_length: Time limit in steps; None keeps the env's own (1000 for Brax).
        normalize_ranges: Rescale finite observation bounds and action bounds to [-1, 1]
            (Brax actions are in [-1, 1] already; its observations are unbounded).
        seed: Seed of the host envs (pure-JAX envs draw from the key given to ``reset``).
        num_workers: Worker processes for the ``process`` backend; None means one per core.
        env_kwargs: Env options: ``gymnasium.make`` keywords (host backends),
            ``brax.envs.get_environment`` keywords (``brax``) or ``EnvParams`` fields
            (``gymnax``).
        options: The backend's own settings, for a backend that takes some
            (:attr:`Backend.config_options <batchppo.core.backends.Backend.config_options>`):
            ``step_timeout`` for ``process`` and ``ray``, and for ``ray`` the other keyword
            arguments of :class:`~batchppo.envs.ray_env.RayBatchEnv` (``address``,
            ``num_cpus``, ``startup_timeout``).
        max_restarts: For backends that support restarts (``process``, ``sync``): the
            ``BatchEnv``'s restart budget (envs whose step raised or whose worker died are
            rebuilt, their episodes truncated, up to this many times;
            :attr:`HostEnv.restarts` counts them); 0 fails fast.

    Returns:
        An :class:`~batchppo.core.env.Env` (with a ``close()`` method).

    Raises:
        ValueError: An unknown backend, ``options`` for a backend that takes none, or
            ``max_restarts`` for one without restarts.
    """
    record = get_backend(backend)
    options = dict(options or {})
    if options and record.config_options is None:
        takers = prose(b.name for b in BACKENDS.values() if b.config_options is not None)
        raise ValueError(
            f"options {sorted(options)}: backend {backend!r} takes none (backends with options:"
            f" {takers})."
        )
    check_restarts(backend, max_restarts)
    return record.make(
        env_id,
        num_envs,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        seed=seed,
        num_workers=num_workers,
        env_kwargs=dict(env_kwargs or {}),
        max_restarts=max_restarts,
        options=options,
    )


def make_gymnax_env(
    env_id: str,
    num_envs: int,
    *,
    max_length: int | None,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    **_: Any,
) -> GymnaxEnv:
    """The ``gymnax`` backend's builder (:class:`~batchppo.core.backends.MakeEnv`).

    ``env_kwargs`` are ``EnvParams`` fields; the host-side arguments are ignored.
    """
    return GymnaxEnv(
        env_id,
        num_envs,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        param_changes=env_kwargs,
    )


def make_brax_env(
    env_id: str,
    num_envs: int,
    *,
    max_length: int | None,
    env_kwargs: Mapping[str, Any],
    **_: Any,
) -> BraxEnv:
    """The ``brax`` backend's builder (:class:`~batchppo.core.backends.MakeEnv`).

    ``max_length`` None is Brax's 1000 steps; ``env_kwargs`` go to
    ``brax.envs.get_environment``; the host-side arguments are ignored (Brax observations
    are unbounded and its actions in [-1, 1] already, so ``normalize_ranges`` changes nothing).
    """
    return BraxEnv(
        env_id, num_envs, max_length=1000 if max_length is None else max_length, **env_kwargs
    )


def make_host_env(
    env_id: str,
    num_envs: int,
    *,
    backend: str,
    max_length: int | None,
    normalize_ranges: bool,
    seed: int,
    num_workers: int | None,
    env_kwargs: Mapping[str, Any],
    max_restarts: int,
    options: Mapping[str, Any],
) -> HostEnv:
    """The host backends' builder: ``batchppo.envs.make(backend=backend)`` in a HostEnv.

    Args:
        env_id: Gymnasium id.
        num_envs: Batch size.
        backend: The host backend, the ``backend`` of :func:`batchppo.envs.make`:
            ``process``, ``sync`` or ``ray``.
        max_length: Time limit in steps; None keeps the registry's.
        normalize_ranges: Rescale finite bounds to [-1, 1].
        seed: The envs are reset with ``seed`` (env ``i`` with ``seed + i``).
        num_workers: Worker processes (or actors).
        env_kwargs: ``gymnasium.make`` keywords.
        max_restarts: ``BatchEnv``'s restart budget.
        options: The backend's settings (:attr:`Backend.config_options
            <batchppo.core.backends.Backend.config_options>`): ``step_timeout`` and, for
            ``ray``, the ``ray_options`` of :func:`batchppo.envs.make`.

    Returns:
        The :class:`HostEnv` (it closes the batch env on ``close()``).
    """
    options = dict(options)
    step_timeout = options.pop("step_timeout", None)
    vector_env = make_host_envs(
        env_id,
        num_envs,
        seed=seed,
        backend=backend,
        num_workers=num_workers,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        ray_options=options or None,
        max_restarts=max_restarts,
        step_timeout=step_timeout,
        **env_kwargs,
    )
    # make()'s stack (ConvertTo32Bit, per env or applied to the batch in the workers) already
    # rejects every non-finite observation and reward, naming the env: no second check here.
    return wrap_host_env(vector_env, check_finite=False)


def wrap_host_env(vector_env: Any, *, check_finite: bool = True) -> HostEnv:
    """``HostEnv(vector_env, check_finite=...)``, closing ``vector_env`` when that fails (a
    host backend's builder owns the batch env it starts)."""
    try:
        return HostEnv(vector_env, check_finite=check_finite)
    except Exception:
        vector_env.close()
        raise

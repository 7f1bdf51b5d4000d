"""The functional, batched environment API that every algorithm in batchppo runs against.

An environment here is a pair of pure functions over pytrees, already batched over
``num_envs`` environments:

* ``reset(key) -> (state, obs)``
* ``step(state, action, key) -> StepResult``

``step`` auto-resets finished environments *in the same step* (Gymnasium's
``AutoresetMode.SAME_STEP``): ``StepResult.obs`` is the observation the agent acts on next
(the first observation of a new episode where one ended), and ``StepResult.final_obs`` is the
observation the finished episode ended in. Where no episode ended, ``final_obs == obs``.
Learners bootstrap truncated episodes from ``V(final_obs)``; terminated ones from zero.

Terminated and truncated are separate booleans everywhere: ``terminated`` means the MDP
reached a terminal state, ``truncated`` means the episode was cut (time limit) and the state
still has value. If both are set, terminated wins (no bootstrap).

Pure-JAX envs (gymnax, Brax/MJX) implement this API directly through adapters; host envs (Gymnasium
in processes) implement it through ``io_callback`` (see ``batchppo.backends.host_env.HostEnv``). The
adapters live in [`batchppo.backends`][batchppo.backends].

Env errors. An exception a host env's step or reset raises inside a compiled program reaches
the caller as JAX's ``JaxRuntimeError``, its type lost. Such an env keeps the original
(``mark_env_error``) and hands it over through ``take_error``
([`KeepsErrors`][batchppo.core.env.KeepsErrors], the optional part of the protocol); a learner
calls [`raise_env_error`][batchppo.core.env.raise_env_error] with its envs where a compiled call
failed, and the env's own exception is raised in place of JAX's.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np
from flax import struct

from batchppo.core import spaces

PyTree = Any


@struct.dataclass
class EnvSpec:
    """Static description of one environment of a batch (shapes exclude the batch axis).

    The spaces are trees (``batchppo.core.spaces``): ``obs_space`` and ``action_space`` are a leaf
    spec (``Box`` of any dtype and rank, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``) or a
    dict/tuple nesting of them, and observations and actions are pytrees of that structure. The flat
    fields describe the common case of one observation leaf and one Box or Discrete action; they are
    derived from the spaces (build a spec with [`from_spaces`][batchppo.core.EnvSpec.from_spaces]),
    or the spaces from them (the positional constructor, for a flat float observation). Where the
    spaces are not flat they are None (``obs_shape``, ``obs_dtype``, ``action_shape``,
    ``action_dtype``) or False/0 (``discrete``, ``num_actions``).

    Attributes:
        obs_shape: Shape of one observation (a single leaf), else None.
        obs_dtype: Dtype of observations (a single leaf), else None.
        action_shape: Shape of one action (a single leaf); ``()`` for discrete actions.
        action_dtype: Dtype of actions (a single leaf): ``float32`` Box, ``int32`` Discrete.
        discrete: Whether the action is one integer in ``[0, num_actions)``.
        num_actions: Number of discrete actions (0 for other action spaces).
        action_low: Lower action bounds (a single Box action), or None.
        action_high: Upper action bounds (a single Box action), or None.
        obs_low: Lower observation bounds (a single Box observation) or None when unknown.
        obs_high: Upper observation bounds (a single Box observation) or None when unknown.
        obs_space: The observation space tree.
        action_space: The action space tree.
    """

    obs_shape: tuple[int, ...] | None = struct.field(pytree_node=False, default=None)
    obs_dtype: Any = struct.field(pytree_node=False, default=None)
    action_shape: tuple[int, ...] | None = struct.field(pytree_node=False, default=None)
    action_dtype: Any = struct.field(pytree_node=False, default=None)
    discrete: bool = struct.field(pytree_node=False, default=False)
    num_actions: int = struct.field(pytree_node=False, default=0)
    action_low: np.ndarray | None = struct.field(pytree_node=False, default=None)
    action_high: np.ndarray | None = struct.field(pytree_node=False, default=None)
    obs_low: np.ndarray | None = struct.field(pytree_node=False, default=None)
    obs_high: np.ndarray | None = struct.field(pytree_node=False, default=None)
    obs_space: Any = struct.field(pytree_node=False, default=None)
    action_space: Any = struct.field(pytree_node=False, default=None)

    def __post_init__(self) -> None:
        if self.obs_space is None:
            if self.obs_shape is None or self.obs_dtype is None:
                raise ValueError("EnvSpec needs obs_space, or obs_shape and obs_dtype")
            object.__setattr__(
                self,
                "obs_space",
                spaces.box(
                    self.obs_shape,
                    self.obs_dtype,
                    -np.inf if self.obs_low is None else self.obs_low,
                    np.inf if self.obs_high is None else self.obs_high,
                ),
            )
        if self.action_space is None:
            if self.discrete:
                action_space: Any = spaces.Discrete(int(self.num_actions))
            elif self.action_shape is not None and self.action_dtype is not None:
                action_space = spaces.box(
                    self.action_shape,
                    self.action_dtype,
                    -np.inf if self.action_low is None else self.action_low,
                    np.inf if self.action_high is None else self.action_high,
                )
            else:
                raise ValueError("EnvSpec needs action_space, or action_shape and action_dtype")
            object.__setattr__(self, "action_space", action_space)

    @classmethod
    def from_spaces(cls, obs_space: Any, action_space: Any) -> EnvSpec:
        """The spec of an env with these space trees; the flat fields are derived.

        Args:
            obs_space: The observation space tree (``batchppo.core.spaces``).
            action_space: The action space tree.
        """
        fields: dict[str, Any] = {}
        obs = spaces.single(obs_space)
        if obs is not None:
            fields.update(obs_shape=tuple(obs.shape), obs_dtype=obs.dtype)
            if isinstance(obs, spaces.Box):
                fields.update(obs_low=obs.low, obs_high=obs.high)
        act = spaces.single(action_space)
        if isinstance(act, spaces.Discrete):
            fields.update(action_shape=(), action_dtype=act.dtype, discrete=True, num_actions=act.n)
        elif act is not None:
            fields.update(action_shape=tuple(act.shape), action_dtype=act.dtype)
            if isinstance(act, spaces.Box):
                fields.update(action_low=act.low, action_high=act.high)
        return cls(obs_space=obs_space, action_space=action_space, **fields)


@struct.dataclass
class StepResult:
    """What one batched ``step`` returns. Every leaf has leading axis ``num_envs``.

    Attributes:
        state: The env state after the step (and after auto-reset where an episode ended).
        obs: The observation to act on next (a pytree of the observation space's structure).
        reward: float32 rewards of the step.
        terminated: bool, the episode reached a terminal state (no bootstrap).
        truncated: bool, the episode was cut, e.g. by a time limit (bootstrap from final_obs).
        final_obs: The last observation of the episode where one ended, else equal to ``obs``.
    """

    state: PyTree
    obs: PyTree
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: PyTree


@runtime_checkable
class Env(Protocol):
    """A batched functional environment (see module docstring for the semantics)."""

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one environment."""
        ...

    @property
    def num_envs(self) -> int:
        """Size of the batch axis."""
        ...

    def reset(self, key: jax.Array) -> tuple[PyTree, jax.Array]:
        """Resets all envs; ``obs`` has shape ``(num_envs, *obs_shape)``."""
        ...

    def step(self, state: PyTree, action: jax.Array, key: jax.Array) -> StepResult:
        """Steps all envs with ``action`` of shape ``(num_envs, *action_shape)``; auto-resets."""
        ...


@runtime_checkable
class KeepsErrors(Protocol):
    """The optional part of the [`Env`][batchppo.core.Env] protocol for envs whose step or reset
    runs outside the compiled program (``io_callback``): they keep the exception it raised,
    since the compiled call reports only JAX's ``JaxRuntimeError`` (the host backends'
    ``HostEnv``). ``raise_env_error`` reads it."""

    def take_error(self) -> BaseException | None:
        """The exception the last failed step or reset raised (marked by
        ``mark_env_error``), if not taken yet; taking it clears it."""
        ...


_ENV_ERROR = "batchppo_env_error"  # the attribute that marks an env's exception


def mark_env_error(error: BaseException) -> BaseException:
    """Marks ``error`` as raised by an env's reset or step (see ``is_env_error``); returns it."""
    with contextlib.suppress(AttributeError, TypeError):  # an exception without a __dict__
        setattr(error, _ENV_ERROR, True)
    return error


def is_env_error(error: BaseException) -> bool:
    """Whether ``error`` was raised by an env's reset or step and marked by the env that kept
    it (``mark_env_error``: the env's own exception, ``WorkerDiedError``, a non-finite
    value)."""
    return bool(getattr(error, _ENV_ERROR, False))


def raise_env_error(error: BaseException, *envs: Any) -> None:
    """Raises the exception one of ``envs`` kept (``KeepsErrors.take_error``), if one did;
    else returns.

    Call it where a compiled program over ``envs`` raised ``error``: an exception in an
    ``io_callback`` reaches the caller as JAX's ``JaxRuntimeError``, its type lost, and this
    raises the original (type, message and, for ``BatchEnv``, the worker's traceback) in its
    place. The JAX error, whose text repeats the traceback, stays as its hidden
    ``__context__``. Every env's kept error is taken; envs that keep none (pure-JAX envs, or
    None) are skipped.

    Examples:
        >>> try:
        ...     state = compiled_rollout(state)  # doctest: +SKIP
        ... except Exception as error:
        ...     raise_env_error(error, env)
        ...     raise
    """
    kept = None
    for env in envs:
        found = env.take_error() if isinstance(env, KeepsErrors) else None
        kept = kept or found
    if kept is None or kept is error:
        return
    kept.__suppress_context__ = True
    raise kept

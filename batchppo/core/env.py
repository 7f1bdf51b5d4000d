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

Pure-JAX envs (gymnax, Brax/MJX) implement this API directly through adapters; host envs
(Gymnasium in processes) implement it through ``io_callback`` (see ``adapters.HostEnv``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np
from flax import struct

PyTree = Any


@struct.dataclass
class EnvSpec:
    """Static description of one environment of a batch (shapes exclude the batch axis).

    Attributes:
        obs_shape: Shape of one observation.
        obs_dtype: Dtype of observations (float32 after conversion).
        action_shape: Shape of one action; ``()`` for discrete actions.
        action_dtype: ``float32`` for continuous, ``int32`` for discrete actions.
        discrete: Whether actions are integers in ``[0, num_actions)``.
        num_actions: Number of discrete actions (0 for continuous spaces).
        action_low: Lower action bounds (continuous only), shape ``action_shape``, or None.
        action_high: Upper action bounds (continuous only), shape ``action_shape``, or None.
        obs_low: Lower observation bounds or None when unknown.
        obs_high: Upper observation bounds or None when unknown.
    """

    obs_shape: tuple[int, ...] = struct.field(pytree_node=False)
    obs_dtype: Any = struct.field(pytree_node=False)
    action_shape: tuple[int, ...] = struct.field(pytree_node=False)
    action_dtype: Any = struct.field(pytree_node=False)
    discrete: bool = struct.field(pytree_node=False)
    num_actions: int = struct.field(pytree_node=False, default=0)
    action_low: np.ndarray | None = struct.field(pytree_node=False, default=None)
    action_high: np.ndarray | None = struct.field(pytree_node=False, default=None)
    obs_low: np.ndarray | None = struct.field(pytree_node=False, default=None)
    obs_high: np.ndarray | None = struct.field(pytree_node=False, default=None)


@struct.dataclass
class StepResult:
    """What one batched ``step`` returns. Every leaf has leading axis ``num_envs``.

    Attributes:
        state: The env state after the step (and after auto-reset where an episode ended).
        obs: The observation to act on next.
        reward: float32 rewards of the step.
        terminated: bool, the episode reached a terminal state (no bootstrap).
        truncated: bool, the episode was cut, e.g. by a time limit (bootstrap from final_obs).
        final_obs: The last observation of the episode where one ended, else equal to ``obs``.
    """

    state: PyTree
    obs: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array


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

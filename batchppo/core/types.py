"""Pytrees and the policy signature shared by ``simulate`` and the algorithms.

``simulate`` knows nothing about which algorithm runs. An agent enters it as one pure function, the
[`PolicyFn`][batchppo.core.PolicyFn]:

    policy_fn(params, carry, obs, first, key) -> (action, extras, carry)

* ``params``: anything the policy needs (network params, normaliser statistics), constant
  over a rollout.
* ``carry``: per-env recurrent state (``()`` for feed-forward policies).
* ``obs``: ``(num_envs, *obs_shape)`` observations.
* ``first``: bool ``(num_envs,)``, True where ``obs`` is the first observation of an episode;
  recurrent policies reset their carry there.
* ``extras``: a pytree of per-env arrays the agent wants kept in the
  [`Transition`][batchppo.core.Transition] (log-probs, values, the carry before the step, ...).
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
from flax import struct

PyTree = Any


class PolicyFn(Protocol):
    """Signature of the agent as ``simulate`` sees it (see module docstring)."""

    def __call__(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, PyTree, PyTree]: ...


@struct.dataclass
class Transition:
    """One batched step of experience; ``rollout`` stacks these to ``(T, num_envs, ...)``.

    Attributes:
        obs: Observation the action was taken on.
        action: The action taken.
        reward: Reward received.
        terminated: The episode reached a terminal state at this step.
        truncated: The episode was cut (time limit) at this step.
        first: ``obs`` was the first observation of its episode.
        final_obs: The next observation of the *same* episode: the true last observation where
            the episode ended here, the next observation otherwise. Bootstrapping on
            truncation uses ``V(final_obs)``.
        extras: Whatever the policy asked to keep (log-probs, values, recurrent state).
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    first: jax.Array
    final_obs: jax.Array
    extras: PyTree = struct.field(default_factory=dict)


@struct.dataclass
class EpisodeStats:
    """Per-step episode bookkeeping emitted by ``simulate`` (leading axis ``num_envs``).

    Attributes:
        done: An episode ended at this step (terminated or truncated).
        score: The undiscounted return of the episode that ended (0 where ``done`` is False).
        length: The length of the episode that ended (0 where ``done`` is False).
        terminated: The episode ended in a terminal state at this step.
        truncated: The episode was cut at this step (a time limit); an env may report both.
    """

    done: jax.Array
    score: jax.Array
    length: jax.Array
    terminated: jax.Array
    truncated: jax.Array


@struct.dataclass
class SimState:
    """The carry of ``simulate``/``rollout``: everything needed to continue simulating.

    Attributes:
        env_state: The env's own state pytree.
        obs: Current observations (what the agent acts on next).
        first: True where ``obs`` starts an episode.
        policy_carry: The policy's recurrent state.
        score: Running undiscounted return of the current episode, per env.
        length: Running length of the current episode, per env.
        key: PRNG key consumed by env and policy steps.
    """

    env_state: PyTree
    obs: jax.Array
    first: jax.Array
    policy_carry: PyTree
    score: jax.Array
    length: jax.Array
    key: jax.Array

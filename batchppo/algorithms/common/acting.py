"""How an actor-critic agent acts: what PPO and A2C share of the ``Agent`` protocol.

:class:`ActorCriticActing` gives an agent whose policy is a shared network
(:mod:`~batchppo.algorithms.common.networks`) over streaming-normalised observations the
acting half of :class:`~batchppo.algorithms.common.trainer.Agent`: ``init_sim``,
``acting_params``, ``initial_carry``, ``normalize_obs`` and the deterministic policy
``mode_fn``. The agent writes its own sampling policy ``policy_fn`` (what it keeps of each
step differs: PPO the log-prob, the distribution and the recurrent state, A2C the value),
which starts the same way: ``net_params, obs_norm = params`` and
``nobs = self.normalize_obs(obs_norm, obs)``.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp

from batchppo.algorithms.common.networks import Network
from batchppo.algorithms.common.trainer import strong
from batchppo.core import normalize as norm
from batchppo.core.env import Env, EnvSpec
from batchppo.core.simulate import init_sim_state
from batchppo.core.types import SimState

PyTree = Any


class ActingConfig(Protocol):
    """The fields of a config that :class:`ActorCriticActing` reads, and no others."""

    @property
    def normalize_observations(self) -> bool:
        """Streaming centre-and-scale of observations (statistics fixed during a rollout)."""
        ...

    @property
    def obs_clip(self) -> float:
        """Clip normalised observations to ``[-obs_clip, obs_clip]``."""
        ...


class ActorCriticActing:
    """The acting functions of an agent with a shared network and observation statistics.

    A base class: the agent sets the attributes below in its ``__init__`` and writes
    ``policy_fn``. Its train state must have ``params`` (the network's) and ``obs_norm`` (a
    :class:`~batchppo.core.normalize.NormState`); the policies act with
    ``params = (net_params, obs_norm)`` (:meth:`acting_params`).

    Attributes:
        config: The run's config (:class:`ActingConfig`'s fields are read).
        network: The policy and value network.
        env: The batched training env.
        spec: The training env's spec.
    """

    config: ActingConfig
    network: Network
    env: Env
    spec: EnvSpec

    def init_sim(self, key: jax.Array, env: Env | None = None) -> SimState:
        """Fresh episodes in ``env`` (the training env by default) with a zero policy carry."""
        env = env or self.env
        ss = init_sim_state(env, self.initial_carry(env.num_envs), key)
        # Some envs reset to weakly typed arrays and step to strong ones; make the types
        # stable so that the compiled iteration is not compiled a second time.
        return jax.tree.map(strong, ss)

    def acting_params(self, ts: Any) -> PyTree:
        """What the policies act with: ``(params, obs_norm)`` of the train state ``ts``."""
        return (ts.params, ts.obs_norm)

    def initial_carry(self, batch: int) -> PyTree:
        """The policy's recurrent state at episode starts (``()`` for feed-forward ones)."""
        return self.network.initial_carry(batch)

    def normalize_obs(self, obs_norm: norm.NormState, obs: jax.Array) -> jax.Array:
        """Observation normalisation as the policy and value networks see it.

        Args:
            obs_norm: The streaming observation statistics.
            obs: Observations of any batch shape.

        Returns:
            ``obs`` centred, scaled and clipped to ``obs_clip`` with ``normalize_observations``,
            else ``obs`` as float32.
        """
        if not self.config.normalize_observations:
            return obs.astype(jnp.float32)
        return norm.normalize(obs_norm, obs, clip=self.config.obs_clip)

    def mode_fn(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, Any], PyTree]:
        """The deterministic policy (mean or argmax action) for evaluation.

        Args:
            params: ``(net_params, obs_norm)`` (:meth:`acting_params`).
            carry: The policy's recurrent state (the network resets it where ``first``).
            obs: Observations ``(B, ...)``.
            first: Whether each observation starts an episode ``(B,)``.
            key: Unused (``simulate``'s policy signature).

        Returns:
            ``(action, {}, new_carry)``.
        """
        del key
        net_params, obs_norm = params
        nobs = self.normalize_obs(obs_norm, obs)
        dist_params, new_carry = self.network.policy_step(net_params, carry, nobs, first)
        return self.network.mode(dist_params).astype(self.spec.action_dtype), {}, new_carry

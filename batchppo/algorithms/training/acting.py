"""How an actor-critic agent acts: what PPO and A2C share of the ``Agent`` protocol.

``ActorCriticActing`` gives an agent whose policy is a shared network (``networks``) over
streaming-normalised observations the acting half of
[`Agent`][batchppo.algorithms.training.trainer.Agent]: ``init_sim``, ``acting_params``,
``initial_carry``, ``normalize_obs`` and the deterministic policy ``mode_fn``. The agent writes its
own sampling policy ``policy_fn`` (what it keeps of each step differs: PPO the log-prob, the
distribution and the recurrent state, A2C the value), which starts the same way: ``net_params,
obs_norm = params`` and ``nobs = self.normalize_obs(obs_norm, obs)``.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp

from batchppo.algorithms.networks.networks import Network
from batchppo.algorithms.training.trainer import strong
from batchppo.core import normalize as norm
from batchppo.core import spaces
from batchppo.core.env import Env, EnvSpec
from batchppo.core.simulation import init_sim_state
from batchppo.core.types import SimState

PyTree = Any


class ActingConfig(Protocol):
    """The fields of a config that ``ActorCriticActing`` reads, and no others."""

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

    A base class: the agent sets the attributes below in its ``__init__`` and writes ``policy_fn``.
    Its train state must have ``params`` (the network's) and ``obs_norm`` (a
    ``batchppo.core.normalize.NormState``); the policies act with ``params = (net_params,
    obs_norm)`` (``acting_params``).

    Attributes:
        config: The run's config (``ActingConfig``'s fields are read).
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

    def init_obs_norm(self) -> PyTree:
        """Empty observation statistics: a ``batchppo.core.normalize.NormState`` when the
        observation is one float vector leaf, else a tuple with one per leaf in tree order (None for
        leaves that are not float vectors: images, integer leaves).

        Only float vector leaves (``batchppo.core.spaces.is_float_vector``) are
        normalised: uint8 images are scaled by 1/255 inside the network and integer leaves
        are one-hot encoded or cast there.
        """
        space = self.spec.obs_space
        if spaces.is_leaf(space) and spaces.is_float_vector(space):
            return norm.init(space.shape)
        return tuple(
            norm.init(leaf.shape) if spaces.is_float_vector(leaf) else None
            for leaf in spaces.leaves(space)
        )

    def _per_leaf(self, fn: Any, obs_norm: PyTree, obs: PyTree) -> PyTree:
        """``fn(state, leaf)`` on each float vector leaf of ``obs``; other leaves unchanged."""
        if isinstance(obs_norm, norm.NormState):
            return fn(obs_norm, obs)
        flat, treedef = jax.tree.flatten(obs)
        out = [
            x if state is None else fn(state, x) for state, x in zip(obs_norm, flat, strict=True)
        ]
        return jax.tree.unflatten(treedef, out)

    def normalize_obs(self, obs_norm: PyTree, obs: PyTree) -> PyTree:
        """Observation normalisation as the policy and value networks see it.

        Args:
            obs_norm: The streaming observation statistics (``init_obs_norm``).
            obs: Observations of any batch shape (a pytree of the observation space).

        Returns:
            ``obs`` with each float vector leaf centred, scaled and clipped to ``obs_clip``
            with ``normalize_observations`` (else as float32); other leaves unchanged, in
            their own dtype (the network converts them).
        """
        if not self.config.normalize_observations:
            return self._per_leaf(lambda _, x: x.astype(jnp.float32), obs_norm, obs)
        clip = self.config.obs_clip
        return self._per_leaf(lambda s, x: norm.normalize(s, x, clip=clip), obs_norm, obs)

    def update_obs_norm(self, obs_norm: PyTree, obs: PyTree) -> PyTree:
        """The statistics after absorbing ``obs`` (unchanged without ``normalize_observations``)."""
        if not self.config.normalize_observations:
            return obs_norm
        if isinstance(obs_norm, norm.NormState):
            return norm.update(obs_norm, obs)
        flat = jax.tree.leaves(obs)
        return tuple(
            None if state is None else norm.update(state, x)
            for state, x in zip(obs_norm, flat, strict=True)
        )

    @staticmethod
    def obs_norm_summary(obs_norm: PyTree) -> tuple[jax.Array, jax.Array]:
        """``(mean, std)`` averaged over every normalised dim (0 and 1 where none is)."""
        states = [obs_norm] if isinstance(obs_norm, norm.NormState) else obs_norm
        states = [s for s in states if s is not None]
        if not states:
            return jnp.zeros((), jnp.float32), jnp.ones((), jnp.float32)
        if len(states) == 1:
            return states[0].mean.mean(), norm.std(states[0]).mean()
        means = jnp.concatenate([s.mean.reshape(-1) for s in states])
        stds = jnp.concatenate([norm.std(s).reshape(-1) for s in states])
        return means.mean(), stds.mean()

    def mode_fn(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, Any], PyTree]:
        """The deterministic policy (mean or argmax action) for evaluation.

        Args:
            params: ``(net_params, obs_norm)`` (``acting_params``).
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
        return self.cast_action(self.network.mode(dist_params)), {}, new_carry

    def cast_action(self, action: PyTree) -> PyTree:
        """``action`` with each leaf in its action-space leaf's dtype."""
        return jax.tree.map(lambda a, leaf: a.astype(leaf.dtype), action, self.spec.action_space)

"""A2C: synchronous advantage actor-critic (Mnih et al. 2016; SB3's ``A2C``).

Each iteration collects ``rollout_length`` steps from every env with the sampling policy and takes
one gradient step on the whole rollout: the policy gradient ``-A log pi(a|s)``, plus ``value_coef``
times the squared error of ``V(s)`` against the (GAE-)returns, minus ``entropy_coef`` times the
entropy. No importance ratio, no clipping, no epochs. Advantages bootstrap from ``V(final_obs)``
where an episode was truncated, and from the last observation of the rollout, as PPO's do. The
networks are the shared ones (``batchppo.algorithms.networks.networks``), as is the trainer
([`Trainer`][batchppo.algorithms.training.trainer.Trainer]).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.networks.networks import NetworkFactory, build_network
from batchppo.algorithms.training import stacked_seeds
from batchppo.algorithms.training import trainer as common
from batchppo.algorithms.training.acting import ActorCriticActing
from batchppo.algorithms.training.trainer import episode_metrics
from batchppo.core import returns as returns_lib
from batchppo.core.env import Env
from batchppo.core.simulation import rollout
from batchppo.core.types import EpisodeStats, SimState, Transition

PyTree = Any


@struct.dataclass
class TrainState:
    """What an A2C checkpoint carries: params, optimiser state, observation statistics and
    the counters (env steps, updates)."""

    params: PyTree
    opt_state: PyTree
    obs_norm: PyTree
    step: jax.Array
    updates: jax.Array


class A2C(ActorCriticActing):
    """The pure functions of A2C for one config and env (an
    [`Agent`][batchppo.algorithms.training.trainer.Agent]); its acting functions besides
    ``policy_fn`` are the shared ones of
    ``batchppo.algorithms.training.acting.ActorCriticActing``."""

    config: A2CConfig

    def __init__(
        self, config: A2CConfig, env: Env, network_factory: NetworkFactory | None = None
    ) -> None:
        self.config = config
        self.env = env
        self.spec = env.spec
        self.network = build_network(config, self.spec, network_factory)
        self.T = config.rollout_length
        self.num_iterations = math.ceil(config.steps / (self.T * config.num_agents))
        self.minibatch_sharding: jax.sharding.Sharding | None = None  # one batch: unused
        lr = config.learning_rate
        # Over the updates of anneal_lr_steps (None: steps), then held at its end.
        span = math.ceil((config.anneal_lr_steps or config.steps) / (self.T * config.num_agents))
        self.schedule = (
            optax.linear_schedule(lr, lr * config.anneal_lr_end, max(span, 1))
            if config.anneal_lr
            else optax.constant_schedule(lr)
        )
        if config.optimizer == "rmsprop":
            step = optax.rmsprop(self.schedule, decay=0.99, eps=config.optimizer_eps)
        else:
            step = optax.adam(self.schedule, eps=config.optimizer_eps)
        clip = (
            []
            if config.max_grad_norm is None
            else [optax.clip_by_global_norm(config.max_grad_norm)]
        )
        self.optimizer = optax.chain(*clip, step)

    def init(self, key: jax.Array) -> TrainState:
        """Fresh parameters and optimiser state, empty statistics, zero counters."""
        params = self.network.init(key)
        return TrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            obs_norm=self.init_obs_norm(),
            step=jnp.zeros((), jnp.int32),
            updates=jnp.zeros((), jnp.int32),
        )

    def policy_fn(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, Any], PyTree]:
        """The sampling policy; keeps ``V(obs)`` for the returns."""
        net_params, obs_norm = params
        nobs = self.normalize_obs(obs_norm, obs)
        dist_params, carry, value = self.network.policy_step_and_value(
            net_params, carry, nobs, first
        )
        action = self.network.distribution(dist_params).sample(seed=key)
        extras = {"value": value}
        return self.cast_action(action), extras, carry

    def iteration(self, ts: TrainState, ss: SimState) -> tuple[TrainState, SimState, dict]:
        """One rollout and one gradient step; pure and jittable."""
        ss, traj, stats = rollout(self.env, self.policy_fn, self.acting_params(ts), ss, self.T)
        ts, metrics = self.learn(ts, traj, stats)
        return ts, ss, metrics

    def returns(self, ts: TrainState, traj: Transition) -> tuple[jax.Array, jax.Array]:
        """``(advantages, targets)`` of a rollout ``(T, B)``, from the values it kept."""
        config = self.config
        next_values = self.network.value(ts.params, self.normalize_obs(ts.obs_norm, traj.final_obs))
        advantages, targets = returns_lib.gae(
            traj.reward * config.reward_factor,
            traj.extras["value"],
            next_values,
            traj.terminated,
            traj.truncated,
            config.discount,
            config.gae_lambda,
        )
        if config.normalize_advantages:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        return advantages, targets

    def loss(
        self, params: PyTree, obs: jax.Array, traj: Transition, advantages: jax.Array,
        targets: jax.Array,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:  # fmt: skip
        """The A2C loss of one rollout and its parts."""
        config = self.config
        dist_params, value = self.network.policy_sequence_and_value(params, (), obs, traj.first)
        dist = self.network.distribution(dist_params)
        policy_loss = -(advantages * dist.log_prob(traj.action)).mean()
        value_loss = jnp.square(targets - value).mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}

    def learn(
        self, ts: TrainState, traj: Transition, stats: EpisodeStats
    ) -> tuple[TrainState, dict]:
        """One gradient step on a rollout; then the statistics absorb its observations."""
        obs = self.normalize_obs(ts.obs_norm, traj.obs)
        advantages, targets = self.returns(ts, traj)
        grad_fn = jax.value_and_grad(self.loss, has_aux=True)
        (loss, metrics), grads = grad_fn(ts.params, obs, traj, advantages, targets)
        updates, opt_state = self.optimizer.update(grads, ts.opt_state, ts.params)
        obs_norm = ts.obs_norm
        obs_norm = self.update_obs_norm(obs_norm, traj.obs)
        env_steps = self.T * self.env.num_envs
        metrics = {
            **metrics,
            **episode_metrics(stats),
            "loss": loss,
            "grad_norm": optax.global_norm(grads),
            "value_mean": traj.extras["value"].mean(),
            "return_mean": targets.mean(),
            "learning_rate": jnp.asarray(self.schedule(ts.updates), jnp.float32),
            "env_steps": jnp.asarray(env_steps, jnp.float32),
        }
        ts = ts.replace(
            params=optax.apply_updates(ts.params, updates),
            opt_state=opt_state,
            obs_norm=obs_norm,
            step=ts.step + env_steps,
            updates=ts.updates + 1,
        )
        return ts, metrics


class Trainer(common.Trainer):
    """The object API of an A2C run: the shared trainer over [`A2C`][batchppo.algorithms.a2c.A2C].

    Args:
        config: The run's config.
        env: Optional prebuilt training env (tests); built from the config otherwise.
        network_factory: ``(config, spec) -> Network`` that builds the network
            ([`NetworkFactory`][batchppo.algorithms.networks.networks.NetworkFactory]); None:
            ``make_network``, from the config's network fields.
    """

    def __init__(
        self,
        config: A2CConfig,
        env: Env | None = None,
        network_factory: NetworkFactory | None = None,
    ) -> None:
        super().__init__(config, functools.partial(A2C, network_factory=network_factory), env)


class SeedsTrainer(stacked_seeds.SeedsTrainer):
    """Several seeds of one A2C config in one program (``--seeds``); ``network_factory`` as
    ``Trainer``'s."""

    def __init__(
        self, config: A2CConfig, num_seeds: int, network_factory: NetworkFactory | None = None
    ) -> None:
        super().__init__(config, num_seeds, functools.partial(A2C, network_factory=network_factory))

"""BatchPPO: the training state and the pure functions of one training iteration (``PPO``).

The agent is a set of pure functions over a [`TrainState`][batchppo.algorithms.ppo.TrainState]
(``PPO``); these run them:

* [`Trainer`][batchppo.algorithms.ppo.Trainer]: the object API the experiment's driver iterates,
  the shared trainer ([`Trainer`][batchppo.algorithms.training.trainer.Trainer]: compiled programs,
  host envs, devices, evaluation and deployment) over ``PPO``.
* ``SeedsTrainer``: ``num_seeds`` seeds of one config in one program (``--seeds``), the shared
  ``batchppo.algorithms.training.stacked_seeds.SeedsTrainer`` over ``PPO``.
* [`make_train`][batchppo.algorithms.ppo.make_train]: ``config -> train_fn(key) -> (TrainState,
  metrics)``, a pure function of the whole run for pure-JAX envs; ``jax.vmap(train_fn)(keys)``
  trains several seeds in one program.

Schedule: each iteration collects ``rollout_length`` steps from each of the ``num_agents`` envs
(or, when ``rollout_length`` is None, ``ceil(update_every / num_agents) * max_length`` steps,
the original's ``update_every`` episodes of ``max_length`` steps); observations are normalised
with the statistics of the start of the iteration (the statistics the policy acted with, so
the stored log-probs stay exact); the reward scale includes the new rewards (as the original);
both normalisers absorb the iteration's data after the update.

Training data are cut into sequences of ``chunk_length`` steps (or the whole rollout) that keep
the recurrent state at their start; feed-forward networks with the ``clip`` objective and no
``chunk_length`` train on individually shuffled transitions (sequences of length 1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct
from jax import lax

from batchppo.algorithms.networks.networks import (
    Network,
    NetworkFactory,
    build_network,
    effective_rank,
)
from batchppo.algorithms.ppo import losses
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.hparams import HParams
from batchppo.algorithms.training import shuffle as shuffle_lib
from batchppo.algorithms.training import stacked_seeds
from batchppo.algorithms.training import trainer as common
from batchppo.algorithms.training.acting import ActorCriticActing
from batchppo.algorithms.training.trainer import episode_metrics, make_run_env, scan_iterations
from batchppo.backends import get_backend, names
from batchppo.core import normalize as norm
from batchppo.core import returns as returns_lib
from batchppo.core import spaces
from batchppo.core.env import Env, EnvSpec
from batchppo.core.simulation import rollout
from batchppo.core.types import EpisodeStats, SimState, Transition

PyTree = Any


@struct.dataclass
class TrainState:
    """Everything a checkpoint must carry; a pytree of arrays.

    Attributes:
        params: Network parameters ``{"policy": ..., "value": ...}``.
        opt_state: Optax state.
        obs_norm: Streaming observation statistics (``ActorCriticActing.init_obs_norm``: one
            ``NormState`` for a float vector observation, else one per leaf or None).
        reward_norm: Streaming reward statistics.
        beta: KL penalty coefficient (float32 scalar).
        key: PRNG key of the learner (minibatch shuffling).
        step: Training env steps so far (summed over envs), int32 scalar.
        updates: Training iterations so far, int32 scalar.
        reward_return: Running discounted return of each env's current episode, float32
            ``(num_envs,)``; feeds ``reward_norm`` when ``reward_scale="return"``. A checkpoint
            written before it existed restores it as zeros
            ([`RESTORE_DEFAULTS`][batchppo.algorithms.ppo.TrainState.RESTORE_DEFAULTS]).
        lr_scale: Factor on the scheduled learning rate kept by ``lr_kl_cap`` (float32 scalar,
            1 without it). A checkpoint written before it existed restores it as 1.
        hparams: None: the config's values (a run's state). Over members of one program
            (``batchppo tune --batch``): each member's values of ``MEMBER_FIELDS``
            ([`HParams`][batchppo.algorithms.ppo.hparams.HParams] of float32 scalars), which
            PPO reads in place of the config's (``batchppo.algorithms.ppo.hparams``).
    """

    RESTORE_DEFAULTS: ClassVar[tuple[str, ...]] = ("reward_return", "lr_scale", "hparams")
    """Fields a checkpoint may lack; restoring takes them from the fresh state. Resumed runs
    start fresh episodes, so a zero running return is exact; checkpoints without ``lr_scale``
    come from runs that never scaled the learning rate, those without ``hparams`` from runs
    that read their config's values."""

    params: PyTree
    opt_state: PyTree
    obs_norm: PyTree
    reward_norm: norm.NormState
    beta: jax.Array
    key: jax.Array
    step: jax.Array
    updates: jax.Array
    reward_return: jax.Array
    lr_scale: jax.Array
    hparams: HParams | None = None


class GaeInputs(NamedTuple):
    """What a rollout's advantages are computed from, in rollout layout ``(T, B, ...)``.

    Attributes:
        obs: Observations as the network takes them (normalised).
        final_obs: Each step's next observation, the final one where an episode ended.
        reward: Rewards as the learner sees them (scaled).
        terminated: True where the episode ended in a terminal state (no bootstrap).
        truncated: True where it was cut off (bootstrap from ``V(final_obs)``).
    """

    obs: PyTree
    final_obs: PyTree
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array


def rollout_length(config: PPOConfig) -> int:
    """Steps per env per iteration.

    ``rollout_length`` when set, else ``ceil(update_every / num_agents) * max_length``.
    """
    if config.rollout_length is not None:
        return int(config.rollout_length)
    assert config.max_length is not None  # PPOConfig validates this combination.
    return math.ceil(config.update_every / config.num_agents) * int(config.max_length)


def sequence_length(config: PPOConfig, recurrent: bool) -> int:
    """Length of the training sequences (see module docstring)."""
    if config.chunk_length is not None:
        return int(config.chunk_length)
    if not recurrent and config.objective == "clip":
        return 1
    return rollout_length(config)


def num_iterations(config: PPOConfig, steps: int | None = None) -> int:
    """Training iterations needed to reach ``steps`` env steps (None: ``config.steps``)."""
    return math.ceil((steps or config.steps) / (rollout_length(config) * config.num_agents))


def check_layout(config: PPOConfig, recurrent: bool) -> tuple[int, int, int]:
    """Validates and returns ``(T, L, num_sequences)`` of the training batch.

    Raises:
        ValueError: if the chunks or minibatches do not divide the batch.
    """
    T = rollout_length(config)
    L = sequence_length(config, recurrent)
    if L < 1 or T % L:
        raise ValueError(
            f"chunk_length={config.chunk_length} must divide the rollout length {T} "
            "(rollout_length, or ceil(update_every / num_agents) * max_length)"
        )
    n = (T // L) * config.num_agents
    if n % config.num_minibatches:
        raise ValueError(
            f"num_minibatches={config.num_minibatches} must divide the {n} training sequences "
            f"(num_agents={config.num_agents} x {T // L} sequences of {L} steps); pick a divisor"
        )
    return T, L, n


def resolve_unroll_update(
    unroll_update: bool | None, spec: EnvSpec, image_encoding: str = "auto"
) -> bool:
    """``unroll_update`` as set, or where None: whether an observation leaf is an image (a
    CNN torso) and JAX's default backend is the CPU (see ``PPOConfig.unroll_update``)."""
    if unroll_update is not None:
        return bool(unroll_update)
    return spaces.has_cnn_image(spec.obs_space, image_encoding) and jax.default_backend() == "cpu"


class PPO(ActorCriticActing):
    """The pure functions of BatchPPO for one config, env and network (no state of its own).

    The acting functions besides ``policy_fn`` (``init_sim``, ``acting_params``, ``initial_carry``,
    ``normalize_obs``, ``mode_fn``) are the shared ones of
    ``batchppo.algorithms.training.acting.ActorCriticActing``.
    """

    config: PPOConfig

    def __init__(
        self,
        config: PPOConfig,
        env: Env,
        network: Network | None = None,
        network_factory: NetworkFactory | None = None,
    ) -> None:
        """Builds the optimiser and the batch layout.

        Args:
            config: The run's config.
            env: The batched training env (``config.num_agents`` envs).
            network: Optional prebuilt network; built from the config otherwise.
            network_factory: ``(config, spec) -> Network`` that builds it; None:
                ``make_network``, from the config's network fields.
        """
        self.config = config
        self.env = env
        self.spec: EnvSpec = env.spec
        self.network = network or build_network(config, self.spec, network_factory)
        self.T, self.L, self.num_sequences = check_layout(config, self.network.recurrent)
        self.unroll_update = resolve_unroll_update(
            config.unroll_update, self.spec, config.image_encoding
        )
        self.num_iterations = num_iterations(config)
        if config.representation_diagnostics and self.network.representation is None:
            raise ValueError(
                "representation_diagnostics=True with a network without "
                "Network.representation: build it as networks.make_network does, or set "
                "representation_diagnostics=False"
            )
        self.config_hparams = HParams.of(config)
        """The config's values of ``MEMBER_FIELDS`` (Python constants): what ``hparams``
        reads for a state without its own."""
        self.schedule: optax.Schedule = self.schedule_of(self.config_hparams)
        self.optimizer = self.make_optimizer(1.0)
        self.minibatch_sharding: jax.sharding.Sharding | None = None
        """Over a device mesh (``Trainer`` sets it): the layout of each epoch's shuffled
        minibatches ``(M, sequences / M, ...)``, their sequences split over the devices, so
        that each device takes the gradient of its share; None on one device."""

    def hparams(self, ts: TrainState) -> HParams:
        """The values of ``MEMBER_FIELDS`` that an update of ``ts`` uses: the state's own
        (a member's), else the config's."""
        return self.config_hparams if ts.hparams is None else ts.hparams

    def schedule_of(self, hp: HParams) -> optax.Schedule:
        """The learning rate by optimiser step, from ``hp``'s ``learning_rate`` (annealed to
        ``anneal_lr_end`` times it with ``anneal_lr``)."""
        config = self.config
        if config.anneal_lr:
            # Over the optimiser steps of anneal_lr_steps (None: steps), then held at its end.
            span = num_iterations(config, config.anneal_lr_steps)
            opt_steps = span * config.update_epochs * config.num_minibatches
            return optax.linear_schedule(
                hp.learning_rate, hp.learning_rate * hp.anneal_lr_end, max(opt_steps, 1)
            )
        return optax.constant_schedule(hp.learning_rate)

    def make_optimizer(
        self, lr_scale: float | jax.Array, hp: HParams | None = None
    ) -> optax.GradientTransformation:
        """The L2 penalty's gradient (``weight_decay``), gradient clipping and Adam
        (``adam_b1``, ``adam_b2``) at the schedule's learning rate times ``lr_scale``.

        The scale enters the scalar step size, so the transformation (and its state) is the
        same for every scale and a scale of 1 computes exactly what the schedule alone does.
        A zero ``weight_decay`` adds no transformation, so the state keeps its structure.
        ``hp`` (None: the config's) gives the rate, the clip norm and Adam's decays, which
        leave the state's structure as it is.
        """
        config = self.config
        hp = self.config_hparams if hp is None else hp
        schedule = self.schedule_of(hp)
        chain = []
        if config.weight_decay > 0:
            chain.append(optax.add_decayed_weights(config.weight_decay))
        if hp.max_grad_norm is not None:
            chain.append(optax.clip_by_global_norm(hp.max_grad_norm))
        chain.append(
            optax.adam(
                lambda count: schedule(count) * lr_scale,
                b1=hp.adam_b1,
                b2=hp.adam_b2,
                eps=1e-5,
            )
        )
        return optax.chain(*chain)

    # --- state ------------------------------------------------------------------------------

    def init(self, key: jax.Array) -> TrainState:
        """Fresh training state: params, optimiser, empty normalisers, beta, counters."""
        k_params, k_state = jax.random.split(key)
        params = self.network.init(k_params)
        return TrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            obs_norm=self.init_obs_norm(),
            reward_norm=norm.init(()),
            beta=jnp.asarray(self.config.kl_init_penalty, jnp.float32),
            key=k_state,
            step=jnp.zeros((), jnp.int32),
            updates=jnp.zeros((), jnp.int32),
            reward_return=jnp.zeros((self.env.num_envs,), jnp.float32),
            lr_scale=jnp.ones((), jnp.float32),
        )

    # --- acting (the rest is ActorCriticActing's) -------------------------------------------

    def policy_fn(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, Any], PyTree]:
        """The training policy for ``simulate``: ``params = (net_params, obs_norm)``; samples."""
        net_params, obs_norm = params
        nobs = self.normalize_obs(obs_norm, obs)
        if self.network.recurrent:
            carry = jnp.where(first[:, None], 0.0, carry)
        dist_params, new_carry, value = self.network.policy_step_and_value(
            net_params, carry, nobs, first
        )
        action, log_prob = self.network.distribution(dist_params).sample_and_log_prob(seed=key)
        extras = {"log_prob": log_prob, "value": value, "dist": dist_params}
        if self.network.recurrent:
            extras["carry"] = carry
        return self.cast_action(action), extras, new_carry

    # --- learning ---------------------------------------------------------------------------

    def _to_sequences(self, x: jax.Array) -> jax.Array:
        # (T, B, ...) -> (B, T, ...) -> (B * T / L, L, ...): each env's steps stay in order.
        x = jnp.swapaxes(x, 0, 1)
        return x.reshape((self.num_sequences, self.L, *x.shape[2:]))

    def next_values(
        self, params: PyTree, values: jax.Array, final_obs: PyTree, truncated: jax.Array
    ) -> jax.Array:
        """``V(final_obs_t)`` for every step, without a value pass over the whole rollout.

        Where the episode goes on, ``final_obs_t`` is ``obs_{t+1}`` whose value the rollout
        already computed; where it terminated the value is never read. So only the last step
        needs a new value pass, and the truncated steps, which are rare: their pass runs only
        in rollouts that contain one.
        """
        last = self.network.value(params, jax.tree.map(lambda x: x[-1], final_obs))
        shifted = jnp.concatenate([values[1:], last[None]], axis=0)
        return lax.cond(
            jnp.any(truncated[:-1]),
            lambda: jnp.where(truncated, self.network.value(params, final_obs), shifted),
            lambda: shifted,
        )

    def scale_rewards(
        self, ts: TrainState, traj: Transition
    ) -> tuple[jax.Array, norm.NormState, jax.Array]:
        """The rollout's rewards as the learner sees them (``normalize_rewards``).

        The scale's statistics absorb the rollout first (as the original): its rewards, or
        its running discounted returns with ``reward_scale="return"``.

        Returns:
            ``(rewards, new_reward_norm, new_reward_return)``.
        """
        config = self.config
        if not config.normalize_rewards:
            return traj.reward, ts.reward_norm, ts.reward_return
        samples, reward_return = traj.reward, ts.reward_return
        if config.reward_scale == "return":
            done = jnp.logical_or(traj.terminated, traj.truncated)
            samples, reward_return = returns_lib.running_returns(
                traj.reward, done, ts.reward_return, self.hparams(ts).discount
            )
        reward_norm = norm.update(ts.reward_norm, samples)
        reward = norm.normalize(reward_norm, traj.reward, center=False, clip=config.reward_clip)
        return reward, reward_norm, reward_return

    def advantages(
        self,
        params: PyTree,
        inputs: GaeInputs,
        values: jax.Array | None = None,
        hp: HParams | None = None,
    ) -> tuple[jax.Array, jax.Array]:
        """GAE advantages and value targets ``(T, B)`` of a rollout under ``params``.

        Args:
            params: Network params whose value function the estimates use.
            inputs: The rollout's normalised observations, scaled rewards and episode ends.
            values: ``V(obs)`` if already known (the rollout's own); computed otherwise.
            hp: The discount and lambda (``hparams``); None: the config's.
        """
        hp = self.config_hparams if hp is None else hp
        if values is None:
            values = self.network.value(params, inputs.obs)
        next_values = self.next_values(params, values, inputs.final_obs, inputs.truncated)
        return returns_lib.gae(
            inputs.reward,
            values,
            next_values,
            inputs.terminated,
            inputs.truncated,
            hp.discount,
            hp.gae_lambda,
        )

    def make_batch(
        self, ts: TrainState, traj: Transition
    ) -> tuple[losses.Batch, GaeInputs, TrainState, dict[str, jax.Array]]:
        """Normalises a rollout, computes GAE and lays it out as training sequences.

        Returns:
            ``(batch, inputs, ts, metrics)``: ``inputs`` what GAE was computed from (for
            ``recompute_advantages``), ``ts`` with the reward statistics of the rollout.
        """
        reward, reward_norm, reward_return = self.scale_rewards(ts, traj)
        ts = ts.replace(reward_norm=reward_norm, reward_return=reward_return)
        inputs = GaeInputs(
            obs=self.normalize_obs(ts.obs_norm, traj.obs),
            final_obs=self.normalize_obs(ts.obs_norm, traj.final_obs),
            reward=reward,
            terminated=traj.terminated,
            truncated=traj.truncated,
        )
        values = traj.extras["value"]
        advantages, targets = self.advantages(ts.params, inputs, values, self.hparams(ts))
        if self.network.recurrent:
            # The carry each sequence starts from: every L-th step of each env.
            carry = jnp.swapaxes(traj.extras["carry"], 0, 1)
            carry0 = carry[:, :: self.L].reshape((self.num_sequences, *carry.shape[2:]))
        else:
            carry0 = ()
        seq = self._to_sequences
        batch = losses.Batch(
            obs=jax.tree.map(seq, inputs.obs),
            action=jax.tree.map(seq, traj.action),
            first=seq(traj.first),
            old_dist=jax.tree.map(seq, traj.extras["dist"]),
            old_log_prob=seq(traj.extras["log_prob"]),
            old_value=seq(values),
            advantage=seq(advantages),
            target=seq(targets),
            mask=None,  # every step is real: plain means (losses.Batch)
            carry0=carry0,
        )
        metrics = {"value_mean": values.mean(), "return_mean": targets.mean()}
        return batch, inputs, ts, metrics

    def representation_metrics(self, params: PyTree, obs: PyTree) -> dict[str, jax.Array]:
        """``representation_diagnostics``: the effective rank of each network's features and
        the mean L2 norm of each hidden layer's pre-activations on the observations ``obs``
        (any batch axes) under ``params``."""
        metrics = {}
        for name, x in self.network.representation(params, obs).items():
            if name.endswith("_features"):
                rank = effective_rank(x.reshape((x.shape[0], -1)))
                metrics[f"{name[: -len('_features')]}_feature_rank"] = rank.astype(jnp.float32)
            else:
                norms = jnp.linalg.norm(x.reshape((x.shape[0], -1)), axis=-1)
                metrics[name.replace("_preact_", "_preact_norm_")] = jnp.mean(norms)
        return metrics

    def update(
        self, ts: TrainState, batch: losses.Batch, inputs: GaeInputs | None = None
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """``update_epochs`` passes of shuffled minibatches, then the beta adaptation.

        With ``inputs`` each epoch first recomputes the batch's advantages and value targets
        under the params it starts from (``recompute_advantages``).
        """
        config = self.config
        hp = self.hparams(ts)
        M = config.num_minibatches
        key, k_epochs = jax.random.split(ts.key)
        grad_fn = jax.value_and_grad(losses.ppo_loss, has_aux=True)
        optimizer = self.make_optimizer(ts.lr_scale, hp)
        names: list[str] = []  # the metrics' order in the vector a minibatch step returns

        kl_limit = None
        if hp.target_kl is not None and config.objective == "clip":
            kl_limit = 1.5 * hp.target_kl

        def minibatch_step(
            carry: tuple[PyTree, PyTree, jax.Array], mb: losses.Batch
        ) -> tuple[tuple[PyTree, PyTree, jax.Array], jax.Array]:
            params, opt_state, stopped = carry
            (loss, metrics), grads = grad_fn(params, mb, ts.beta, self.network, config, hp)
            updates, new_opt_state = optimizer.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
            if kl_limit is not None:
                # The KL is measured at the params before this step, as SB3's early stop.
                stopped = stopped | (metrics["kl"] > kl_limit)
                keep = functools.partial(jnp.where, stopped)
                new_params = jax.tree.map(keep, params, new_params)
                new_opt_state = jax.tree.map(keep, opt_state, new_opt_state)
            metrics = {**metrics, "loss": loss, "steps_taken": 1.0 - stopped.astype(jnp.float32)}
            if config.minibatch_diagnostics:
                metrics["grad_norm"] = optax.global_norm(grads)
            # One vector a step, not one output per metric: each stacked output of a scan
            # is a write of its own at every step (a kernel each on a GPU).
            names[:] = sorted(metrics)
            return (new_params, new_opt_state, stopped), jnp.stack([metrics[k] for k in names])

        def epoch(
            carry: tuple[PyTree, PyTree, jax.Array], k: jax.Array
        ) -> tuple[tuple[PyTree, PyTree, jax.Array], jax.Array]:
            perm = shuffle_lib.permutation(k, self.num_sequences, config.minibatch_shuffle)

            def shuffle(x: jax.Array) -> jax.Array:
                x = jnp.take(x, perm, axis=0)
                return x.reshape((M, self.num_sequences // M, *x.shape[1:]))

            epoch_batch = batch
            if inputs is not None:
                advantages, targets = self.advantages(carry[0], inputs, hp=hp)
                seq = self._to_sequences
                epoch_batch = batch._replace(advantage=seq(advantages), target=seq(targets))
            minibatches = jax.tree.map(shuffle, epoch_batch)
            if self.minibatch_sharding is not None:
                minibatches = lax.with_sharding_constraint(minibatches, self.minibatch_sharding)
            return lax.scan(minibatch_step, carry, minibatches, unroll=self.unroll_update)

        (params, opt_state, _), metrics = lax.scan(
            epoch,
            (ts.params, ts.opt_state, jnp.zeros((), bool)),
            jax.random.split(k_epochs, config.update_epochs),
            unroll=self.unroll_update,
        )
        metrics = {k: jnp.mean(metrics[..., i]) for i, k in enumerate(names)}
        beta = ts.beta
        if config.objective == "kl_penalty":
            # The original adapts beta to the KL of the whole batch after all epochs.
            new_dist = self.network.policy_sequence(params, batch.carry0, batch.obs, batch.first)
            kl = self.network.distribution(batch.old_dist).kl_divergence(
                self.network.distribution(new_dist)
            )
            metrics["kl"] = losses._masked_mean(kl, batch.mask)
            beta = losses.adapt_beta(beta, metrics["kl"], hp.kl_target)
        lr_scale = ts.lr_scale
        if hp.lr_kl_cap is not None:
            lr_scale = losses.adapt_lr_scale(lr_scale, metrics["kl"], hp.lr_kl_cap)
        ts = ts.replace(params=params, opt_state=opt_state, beta=beta, key=key, lr_scale=lr_scale)
        return ts, metrics

    def iteration(self, ts: TrainState, ss: SimState) -> tuple[TrainState, SimState, dict]:
        """One collection + update; pure and jittable. Metrics are scalar arrays."""
        ss, traj, stats = rollout(self.env, self.policy_fn, (ts.params, ts.obs_norm), ss, self.T)
        ts, metrics = self.learn(ts, traj, stats)
        return ts, ss, metrics

    def learn(
        self, ts: TrainState, traj: Transition, stats: EpisodeStats
    ) -> tuple[TrainState, dict]:
        """The update from one rollout of ``T`` steps; pure and jittable.

        Returns:
            The new state (normalisers absorb the rollout after the update) and scalar metrics.
        """
        config = self.config
        schedule = self.schedule_of(self.hparams(ts))
        lr = schedule(ts.updates * config.update_epochs * config.num_minibatches) * ts.lr_scale
        batch, inputs, ts, data_metrics = self.make_batch(ts, traj)
        if config.representation_diagnostics:
            # Under the params that collected the batch, before the update changes them.
            data_metrics.update(self.representation_metrics(ts.params, batch.obs))
        ts, metrics = self.update(ts, batch, inputs if config.recompute_advantages else None)
        obs_norm = ts.obs_norm
        obs_norm = self.update_obs_norm(obs_norm, traj.obs)
        env_steps = self.T * self.env.num_envs
        obs_mean, obs_std = self.obs_norm_summary(obs_norm)
        ts = ts.replace(
            obs_norm=obs_norm,
            step=ts.step + env_steps,
            updates=ts.updates + 1,
        )
        metrics = {
            **metrics,
            **data_metrics,
            **episode_metrics(stats),
            "env_steps": jnp.asarray(env_steps, jnp.float32),
            "beta": ts.beta,
            "learning_rate": jnp.asarray(lr, jnp.float32),
            "obs_mean": obs_mean,
            "obs_std": obs_std,
            "reward_std": norm.std(ts.reward_norm).mean(),
        }
        if "clip_fraction" not in metrics and config.minibatch_diagnostics:
            metrics["clip_fraction"] = jnp.zeros((), jnp.float32)
        return ts, metrics


def make_train(
    config: PPOConfig, network_factory: NetworkFactory | None = None
) -> Callable[[jax.Array], tuple[TrainState, dict]]:
    """The whole training run as one pure function, for pure-JAX backends (gymnax, Brax, Jumanji).

    Examples:
        Four seeds of a whole run in one compiled program (a run's worth of training: the docs
        test skips it):

        >>> train_fn = jax.jit(jax.vmap(make_train(config)))  # doctest: +SKIP
        >>> states, metrics = train_fn(jax.random.split(jax.random.key(0), 4))  # doctest: +SKIP

    Args:
        config: The run's config; its ``backend`` must be a pure-JAX one (``gymnax``, ``brax``,
            ``jumanji``).
        network_factory: ``(config, spec) -> Network`` that builds the network (as Brax's
            ``network_factory``); None: ``make_network``, from the config's network fields.

    Returns:
        ``train_fn(key) -> (TrainState, metrics)`` where each metric has a leading axis of
        ``num_iterations(config)`` (one entry per training iteration).

    Raises:
        ValueError: for host backends, which cannot run inside a pure function.
    """
    if not get_backend(config.backend).fused:
        raise ValueError(
            f"make_train needs a pure-JAX backend {names(host=False)}, got "
            f"backend={config.backend!r}; use Trainer for host envs"
        )
    env = make_run_env(config, config.num_agents)
    ppo = PPO(config, env, network_factory=network_factory)

    def train_fn(key: jax.Array) -> tuple[TrainState, dict]:
        k_init, k_sim = jax.random.split(key)
        ts = ppo.init(k_init)
        ss = ppo.init_sim(k_sim)
        ts, _, metrics = scan_iterations(ppo, ppo.num_iterations, keep_ended=False)(ts, ss)
        return ts, metrics

    return train_fn


class Trainer(common.Trainer):
    """The object API of a BatchPPO run: the shared trainer over
    [`PPO`][batchppo.algorithms.ppo.PPO].

    Examples:
        One iteration and an evaluation of a run's ``config`` (each compiles a program: the docs
        test skips them):

        >>> trainer = Trainer(config)  # doctest: +SKIP
        >>> ts = trainer.init(jax.random.key(config.seed))  # doctest: +SKIP
        >>> ss = trainer.init_sim(ts, jax.random.key(1))  # doctest: +SKIP
        >>> ts, ss, metrics = trainer.iteration(ts, ss)  # doctest: +SKIP
        >>> trainer.evaluate(ts, 10, jax.random.key(2))["score"]  # doctest: +SKIP

        A network of one's own, ``my_network(config, spec) -> Network`` (as Brax's
        ``network_factory``):

        >>> trainer = Trainer(config, network_factory=my_network)  # doctest: +SKIP

    See [`Trainer`][batchppo.algorithms.training.trainer.Trainer] for donation, devices and env
    errors.

    Args:
        config: The run's config.
        env: Optional prebuilt training env (tests); built from the config otherwise.
        network_factory: ``(config, spec) -> Network`` that builds the network
            ([`NetworkFactory`][batchppo.algorithms.networks.networks.NetworkFactory]); None:
            ``make_network``, from the config's network fields.
    """

    def __init__(
        self,
        config: PPOConfig,
        env: Env | None = None,
        network_factory: NetworkFactory | None = None,
    ) -> None:
        super().__init__(config, functools.partial(PPO, network_factory=network_factory), env)
        self.ppo: PPO = self.agent
        self.network = self.ppo.network


class SeedsTrainer(stacked_seeds.SeedsTrainer):
    """The PPO trainer of ``num_seeds`` seeds at once (``config.seed + i``).

    One compiled program and one set of envs for every seed, each seed computing what a
    separate run of its seed computes (``batchppo train --seeds N``).

    Args:
        config: The config shared by the seeds.
        num_seeds: Number of seeds (>= 1).
        network_factory: ``(config, spec) -> Network`` that builds the network; None:
            ``make_network``.
    """

    def __init__(
        self, config: PPOConfig, num_seeds: int, network_factory: NetworkFactory | None = None
    ) -> None:
        super().__init__(config, num_seeds, functools.partial(PPO, network_factory=network_factory))
        self.ppo: PPO = self.agent

"""BatchPPO: the training state, one compiled training iteration, and the drivers.

The agent is a set of pure functions over a :class:`TrainState` (``PPO``); the drivers run them:

* :class:`Trainer`: the object API the experiment loop uses. ``iteration`` is one compiled call
  (rollout + returns + all update epochs) for every backend: pure-JAX envs fuse with the
  learner, host envs (Gymnasium in processes) enter the same compiled rollout through
  ``io_callback`` (:class:`~batchppo.core.adapters.HostEnv`). ``iterations(n)`` runs ``n`` of
  them in one ``lax.scan``. With ``host_loop`` the host envs are stepped instead from a Python
  loop around the compiled policy (:class:`~batchppo.core.host_loop.HostLoop`), and the
  update (``PPO.learn``) is one compiled call. ``precompile`` compiles a run's programs side
  by side in the background, which halves a cold start on CPU. With several JAX devices and a
  pure-JAX backend, its programs run data-parallel over all of them (``config.devices``;
  :mod:`batchppo.algorithms.ppo.sharding`).
* :func:`make_train`: ``config -> train_fn(key) -> (TrainState, metrics)``, a pure function of
  the whole run for pure-JAX envs; ``jax.vmap(train_fn)(keys)`` trains several seeds in one
  program.

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
import os
import warnings
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax import lax

from batchppo.algorithms.ppo import losses
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.networks import Network, make_network
from batchppo.algorithms.ppo.sharding import Sharding, learner_devices
from batchppo.core import normalize as norm
from batchppo.core import returns as returns_lib
from batchppo.core.backends import get_backend, names
from batchppo.core.env import Env, EnvSpec
from batchppo.core.keys import key_data_aval, raw_key
from batchppo.core.simulate import init_sim_state, rollout
from batchppo.core.types import EpisodeStats, SimState, Transition

if TYPE_CHECKING:
    from batchppo.core.host_loop import HostLoop

PyTree = Any
_EVAL_SEED_OFFSET = 10_007
# Steps per compiled eval call when episodes have no time limit of ours (max_length None):
# few calls (each syncs with the host), and little overshoot past the last episode needed.
_EVAL_CHUNK = 500
# LLVM optimisation level 1 instead of 2: measured 20 % less XLA CPU compile time for the
# training iteration at unchanged run time (the matmuls are library calls either way).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}
# The programs that run once or rarely (init, env resets, evaluation) compile on CPU without
# LLVM optimisation and with XLA's older, quicker fusion emitters: their compilation at
# start-up takes CPU from the training iteration compiling beside them, and they run too
# rarely for their slower code to matter (bench/train.py measures start-up).
COLD_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


def _cold_compiler_options() -> dict[str, Any]:
    """XLA options of the programs that run rarely: compiled fast on CPU, as usual elsewhere."""
    return COLD_COMPILER_OPTIONS if jax.default_backend() == "cpu" else COMPILER_OPTIONS


def enable_compilation_cache(path: str | None = None) -> str:
    """Turns on JAX's persistent compilation cache for this process.

    Later runs of the same config then skip XLA compilation (seconds on CPU).

    Args:
        path: Cache directory; default ``$BATCHPPO_CACHE_DIR`` or ``~/.cache/batchppo/jax``.

    Returns:
        The directory used.
    """
    path = (
        path or os.environ.get("BATCHPPO_CACHE_DIR") or os.path.expanduser("~/.cache/batchppo/jax")
    )
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


@struct.dataclass
class TrainState:
    """Everything a checkpoint must carry; a pytree of arrays.

    Attributes:
        params: Network parameters ``{"policy": ..., "value": ...}``.
        opt_state: Optax state.
        obs_norm: Streaming observation statistics.
        reward_norm: Streaming reward statistics.
        beta: KL penalty coefficient (float32 scalar).
        key: PRNG key of the learner (minibatch shuffling).
        step: Training env steps so far (summed over envs), int32 scalar.
        updates: Training iterations so far, int32 scalar.
        reward_return: Running discounted return of each env's current episode, float32
            ``(num_envs,)``; feeds ``reward_norm`` when ``reward_scale="return"``. A checkpoint
            written before it existed restores it as zeros (:data:`RESTORE_DEFAULTS`).
        lr_scale: Factor on the scheduled learning rate kept by ``lr_kl_cap`` (float32 scalar,
            1 without it). A checkpoint written before it existed restores it as 1.
    """

    RESTORE_DEFAULTS: ClassVar[tuple[str, ...]] = ("reward_return", "lr_scale")
    """Fields a checkpoint may lack; restoring takes them from the fresh state. Resumed runs
    start fresh episodes, so a zero running return is exact; checkpoints without ``lr_scale``
    come from runs that never scaled the learning rate."""

    params: PyTree
    opt_state: PyTree
    obs_norm: norm.NormState
    reward_norm: norm.NormState
    beta: jax.Array
    key: jax.Array
    step: jax.Array
    updates: jax.Array
    reward_return: jax.Array
    lr_scale: jax.Array


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


def num_iterations(config: PPOConfig) -> int:
    """Training iterations needed to reach ``config.steps`` env steps."""
    return math.ceil(config.steps / (rollout_length(config) * config.num_agents))


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


def _strong(x: Any) -> Any:
    if isinstance(x, jax.Array) and getattr(x, "weak_type", False):
        return x.astype(x.dtype)
    return x


def _mean_where(x: jax.Array, w: jax.Array) -> jax.Array:
    n = w.sum()
    return jnp.where(n > 0, (x * w).sum() / jnp.maximum(n, 1), jnp.nan)


class PPO:
    """The pure functions of BatchPPO for one config, env and network (no state of its own)."""

    def __init__(self, config: PPOConfig, env: Env, network: Network | None = None) -> None:
        """Builds the optimiser and the batch layout.

        Args:
            config: The run's config.
            env: The batched training env (``config.num_agents`` envs).
            network: Optional prebuilt network; built from the config otherwise.
        """
        self.config = config
        self.env = env
        self.spec: EnvSpec = env.spec
        self.network = network or make_network(config, self.spec)
        self.T, self.L, self.num_sequences = check_layout(config, self.network.recurrent)
        self.num_iterations = num_iterations(config)
        opt_steps = self.num_iterations * config.update_epochs * config.num_minibatches
        if config.anneal_lr:
            self.schedule: optax.Schedule = optax.linear_schedule(
                config.learning_rate, 0.0, max(opt_steps, 1)
            )
        else:
            self.schedule = optax.constant_schedule(config.learning_rate)
        self.optimizer = self.make_optimizer(1.0)
        self.minibatch_sharding: jax.sharding.Sharding | None = None
        """Over a device mesh (``Trainer`` sets it): the layout of each epoch's shuffled
        minibatches ``(M, sequences / M, ...)``, their sequences split over the devices, so
        that each device takes the gradient of its share; None on one device."""

    def make_optimizer(self, lr_scale: float | jax.Array) -> optax.GradientTransformation:
        """Gradient clipping and Adam at the schedule's learning rate times ``lr_scale``.

        The scale enters the scalar step size, so the transformation (and its state) is the
        same for every scale and a scale of 1 computes exactly what the schedule alone does.
        """
        config = self.config
        chain = []
        if config.max_grad_norm is not None:
            chain.append(optax.clip_by_global_norm(config.max_grad_norm))
        chain.append(optax.adam(lambda count: self.schedule(count) * lr_scale, eps=1e-5))
        return optax.chain(*chain)

    # --- state ------------------------------------------------------------------------------

    def init(self, key: jax.Array) -> TrainState:
        """Fresh training state: params, optimiser, empty normalisers, beta, counters."""
        k_params, k_state = jax.random.split(key)
        params = self.network.init(k_params)
        return TrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            obs_norm=norm.init(self.spec.obs_shape),
            reward_norm=norm.init(()),
            beta=jnp.asarray(self.config.kl_init_penalty, jnp.float32),
            key=k_state,
            step=jnp.zeros((), jnp.int32),
            updates=jnp.zeros((), jnp.int32),
            reward_return=jnp.zeros((self.env.num_envs,), jnp.float32),
            lr_scale=jnp.ones((), jnp.float32),
        )

    def init_sim(self, key: jax.Array, env: Env | None = None) -> SimState:
        """Fresh episodes in ``env`` (the training env by default) with a zero policy carry."""
        env = env or self.env
        ss = init_sim_state(env, self.network.initial_carry(env.num_envs), key)
        # Some envs reset to weakly typed arrays and step to strong ones; make the types
        # stable so that the compiled iteration is not compiled a second time.
        return jax.tree.map(_strong, ss)

    # --- acting -----------------------------------------------------------------------------

    def normalize_obs(self, obs_norm: norm.NormState, obs: jax.Array) -> jax.Array:
        """Observation normalisation as the policy and value networks see it."""
        if not self.config.normalize_observations:
            return obs.astype(jnp.float32)
        return norm.normalize(obs_norm, obs, clip=self.config.obs_clip)

    def policy_fn(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, Any], PyTree]:
        """The training policy for ``simulate``: ``params = (net_params, obs_norm)``; samples."""
        net_params, obs_norm = params
        nobs = self.normalize_obs(obs_norm, obs)
        if self.network.recurrent:
            carry = jnp.where(first[:, None], 0.0, carry)
        dist_params, new_carry = self.network.policy_step(net_params, carry, nobs, first)
        action, log_prob = self.network.distribution(dist_params).sample_and_log_prob(seed=key)
        extras = {
            "log_prob": log_prob,
            "value": self.network.value(net_params, nobs),
            "dist": dist_params,
        }
        if self.network.recurrent:
            extras["carry"] = carry
        return action.astype(self.spec.action_dtype), extras, new_carry

    def mode_fn(
        self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, Any], PyTree]:
        """The deterministic policy (mean / argmax action) for evaluation; same signature."""
        del key
        net_params, obs_norm = params
        nobs = self.normalize_obs(obs_norm, obs)
        dist_params, new_carry = self.network.policy_step(net_params, carry, nobs, first)
        return self.network.mode(dist_params).astype(self.spec.action_dtype), {}, new_carry

    # --- learning ---------------------------------------------------------------------------

    def _to_sequences(self, x: jax.Array) -> jax.Array:
        # (T, B, ...) -> (B, T, ...) -> (B * T / L, L, ...): each env's steps stay in order.
        x = jnp.swapaxes(x, 0, 1)
        return x.reshape((self.num_sequences, self.L, *x.shape[2:]))

    def next_values(
        self, params: PyTree, values: jax.Array, final_obs: jax.Array, truncated: jax.Array
    ) -> jax.Array:
        """``V(final_obs_t)`` for every step, without a value pass over the whole rollout.

        Where the episode goes on, ``final_obs_t`` is ``obs_{t+1}`` whose value the rollout
        already computed; where it terminated the value is never read. So only the last step
        needs a new value pass, and the truncated steps, which are rare: their pass runs only
        in rollouts that contain one.
        """
        last = self.network.value(params, final_obs[-1])
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
                traj.reward, done, ts.reward_return, config.discount
            )
        reward_norm = norm.update(ts.reward_norm, samples)
        reward = norm.normalize(reward_norm, traj.reward, center=False, clip=config.reward_clip)
        return reward, reward_norm, reward_return

    def make_batch(
        self, ts: TrainState, traj: Transition
    ) -> tuple[losses.Batch, TrainState, dict[str, jax.Array]]:
        """Normalises a rollout, computes GAE and lays it out as training sequences.

        Returns:
            ``(batch, ts, metrics)``, ``ts`` with the reward statistics of the rollout.
        """
        config = self.config
        obs = self.normalize_obs(ts.obs_norm, traj.obs)
        final_obs = self.normalize_obs(ts.obs_norm, traj.final_obs)
        reward, reward_norm, reward_return = self.scale_rewards(ts, traj)
        ts = ts.replace(reward_norm=reward_norm, reward_return=reward_return)
        values = traj.extras["value"]
        next_values = self.next_values(ts.params, values, final_obs, traj.truncated)
        advantages, targets = returns_lib.gae(
            reward,
            values,
            next_values,
            traj.terminated,
            traj.truncated,
            config.discount,
            config.gae_lambda,
        )
        if self.network.recurrent:
            # The carry each sequence starts from: every L-th step of each env.
            carry = jnp.swapaxes(traj.extras["carry"], 0, 1)
            carry0 = carry[:, :: self.L].reshape((self.num_sequences, *carry.shape[2:]))
        else:
            carry0 = ()
        seq = self._to_sequences
        batch = losses.Batch(
            obs=seq(obs),
            action=seq(traj.action),
            first=seq(traj.first),
            old_dist=jax.tree.map(seq, traj.extras["dist"]),
            old_log_prob=seq(traj.extras["log_prob"]),
            old_value=seq(values),
            advantage=seq(advantages),
            target=seq(targets),
            mask=jnp.ones((self.num_sequences, self.L), jnp.float32),
            carry0=carry0,
        )
        metrics = {"value_mean": values.mean(), "return_mean": targets.mean()}
        return batch, ts, metrics

    def update(
        self, ts: TrainState, batch: losses.Batch
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """``update_epochs`` passes of shuffled minibatches, then the beta adaptation."""
        config = self.config
        M = config.num_minibatches
        key, k_epochs = jax.random.split(ts.key)
        grad_fn = jax.value_and_grad(losses.ppo_loss, has_aux=True)
        optimizer = self.make_optimizer(ts.lr_scale)

        kl_limit = None
        if config.target_kl is not None and config.objective == "clip":
            kl_limit = 1.5 * config.target_kl

        def minibatch_step(
            carry: tuple[PyTree, PyTree, jax.Array], mb: losses.Batch
        ) -> tuple[tuple[PyTree, PyTree, jax.Array], dict[str, jax.Array]]:
            params, opt_state, stopped = carry
            (loss, metrics), grads = grad_fn(params, mb, ts.beta, self.network, config)
            updates, new_opt_state = optimizer.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
            if kl_limit is not None:
                # The KL is measured at the params before this step, as SB3's early stop.
                stopped = stopped | (metrics["kl"] > kl_limit)
                keep = functools.partial(jnp.where, stopped)
                new_params = jax.tree.map(keep, params, new_params)
                new_opt_state = jax.tree.map(keep, opt_state, new_opt_state)
            metrics = {
                **metrics,
                "loss": loss,
                "grad_norm": optax.global_norm(grads),
                "steps_taken": 1.0 - stopped.astype(jnp.float32),
            }
            return (new_params, new_opt_state, stopped), metrics

        def epoch(
            carry: tuple[PyTree, PyTree, jax.Array], k: jax.Array
        ) -> tuple[tuple[PyTree, PyTree, jax.Array], dict[str, jax.Array]]:
            perm = jax.random.permutation(k, self.num_sequences)

            def shuffle(x: jax.Array) -> jax.Array:
                x = jnp.take(x, perm, axis=0)
                return x.reshape((M, self.num_sequences // M, *x.shape[1:]))

            minibatches = jax.tree.map(shuffle, batch)
            if self.minibatch_sharding is not None:
                minibatches = lax.with_sharding_constraint(minibatches, self.minibatch_sharding)
            return lax.scan(minibatch_step, carry, minibatches)

        (params, opt_state, _), metrics = lax.scan(
            epoch,
            (ts.params, ts.opt_state, jnp.zeros((), bool)),
            jax.random.split(k_epochs, config.update_epochs),
        )
        metrics = jax.tree.map(jnp.mean, metrics)
        beta = ts.beta
        if config.objective == "kl_penalty":
            # The original adapts beta to the KL of the whole batch after all epochs.
            new_dist = self.network.policy_sequence(params, batch.carry0, batch.obs, batch.first)
            kl = self.network.distribution(batch.old_dist).kl_divergence(
                self.network.distribution(new_dist)
            )
            metrics["kl"] = losses._masked_mean(kl, batch.mask)
            beta = losses.adapt_beta(beta, metrics["kl"], config.kl_target)
        lr_scale = ts.lr_scale
        if config.lr_kl_cap is not None:
            lr_scale = losses.adapt_lr_scale(lr_scale, metrics["kl"], config.lr_kl_cap)
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
        lr = self.schedule(ts.updates * config.update_epochs * config.num_minibatches) * ts.lr_scale
        batch, ts, data_metrics = self.make_batch(ts, traj)
        ts, metrics = self.update(ts, batch)
        obs_norm = ts.obs_norm
        if config.normalize_observations:
            obs_norm = norm.update(obs_norm, traj.obs)
        env_steps = self.T * self.env.num_envs
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
            "obs_mean": obs_norm.mean.mean(),
            "obs_std": norm.std(obs_norm).mean(),
            "reward_std": norm.std(ts.reward_norm).mean(),
        }
        if "clip_fraction" not in metrics:
            metrics["clip_fraction"] = jnp.zeros((), jnp.float32)
        return ts, metrics


def episode_metrics(stats: EpisodeStats) -> dict[str, jax.Array]:
    """Count and means of the episodes that ended in a rollout (nan means when none did)."""
    done = stats.done.astype(jnp.float32)
    return {
        "episodes": done.sum(),
        "score": _mean_where(stats.score, done),
        "length": _mean_where(stats.length.astype(jnp.float32), done),
    }


def _make_env(config: PPOConfig, num_envs: int, seed: int) -> Env:
    from batchppo.core.adapters import make_env  # imported late: adapters pull in host envs

    return make_env(
        config.env,
        num_envs,
        config.backend,
        max_length=config.max_length,
        normalize_ranges=config.normalize_ranges,
        seed=seed,
        num_workers=config.num_workers,
        max_restarts=config.max_env_restarts,
        env_kwargs=config.env_kwargs,
        options=get_backend(config.backend).options(config),
    )


def make_train(config: PPOConfig) -> Callable[[jax.Array], tuple[TrainState, dict]]:
    """The whole training run as one pure function, for pure-JAX backends (gymnax, brax).

    Example:
        >>> train_fn = jax.jit(jax.vmap(make_train(config)))
        >>> states, metrics = train_fn(jax.random.split(jax.random.key(0), 4))  # 4 seeds

    Args:
        config: The run's config; ``backend`` must be ``gymnax`` or ``brax``.

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
    ppo = PPO(config, _make_env(config, config.num_agents, config.seed))

    def train_fn(key: jax.Array) -> tuple[TrainState, dict]:
        k_init, k_sim = jax.random.split(key)
        ts = ppo.init(k_init)
        ss = ppo.init_sim(k_sim)
        ts, _, metrics = _scan_iterations(ppo, ppo.num_iterations)(ts, ss)
        return ts, metrics

    return train_fn


def _scan_iterations(ppo: PPO, n: int) -> Callable:
    """``n`` training iterations under one ``lax.scan``; metrics stacked per iteration."""

    def many(ts: TrainState, ss: SimState) -> tuple[TrainState, SimState, dict]:
        def body(carry: tuple[TrainState, SimState], _: None) -> tuple[Any, dict]:
            ts, ss, metrics = ppo.iteration(*carry)
            return (ts, ss), metrics

        (ts, ss), metrics = lax.scan(body, (ts, ss), None, length=n)
        return ts, ss, metrics

    return many


def _iteration_donation(fused: bool) -> tuple[int, ...]:
    """The arguments of a compiled ``iteration(train_state, sim_state)`` that it donates.

    Over pure-JAX envs both. Host envs can fail mid-rollout, and the train state they were
    given must survive the failed call (the experiment loop checkpoints it): the sim state
    only.
    """
    return (0, 1) if fused else (1,)


def _warn_recompile(name: Hashable, why: str) -> None:
    """Warns that precompiled program ``name`` is compiled again in the foreground."""
    warnings.warn(
        f"Trainer: the precompiled program {name!r} is compiled again on first use: {why}",
        RuntimeWarning,
        stacklevel=4,
    )


def _to_python(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in jax.device_get(metrics).items()}


class Trainer:
    """The object API of a BatchPPO run (used by ``batchppo.train`` and the experiment loop).

    Example:
        >>> trainer = Trainer(config)
        >>> ts = trainer.init(jax.random.key(config.seed))
        >>> ss = trainer.init_sim(ts, jax.random.key(1))
        >>> ts, ss, metrics = trainer.iteration(ts, ss)
        >>> trainer.evaluate(ts, 10, jax.random.key(2))["score"]

    Note: ``iteration``/``iterations`` donate their input states (the arrays are reused in
    place); keep using the returned states, not the ones passed in. Over host envs they
    donate the sim state only, so the train state passed to an iteration that an env error
    stopped stays valid (the experiment loop checkpoints it).

    With several devices (``config.devices``, default all, pure-JAX backends) the init, env
    reset and training programs run over a 1-D mesh: the sim state's envs sharded, the train
    state replicated (``sharding``; :mod:`batchppo.algorithms.ppo.sharding`). Evaluation and
    ``policy`` run on one device.

    An exception of a host env (its own, re-raised by ``BatchEnv`` with the worker's
    traceback, or ``WorkerDiedError``) reaches the caller of ``init_sim``, ``iteration``,
    ``iterations`` and ``evaluate`` as itself, not as the ``JaxRuntimeError`` of the compiled
    call it happened in (:func:`~batchppo.core.adapters.raise_env_error`).
    """

    def __init__(self, config: PPOConfig, env: Env | None = None) -> None:
        """Builds the training env (through ``make_env``), the network and the optimiser.

        Args:
            config: The run's config.
            env: Optional prebuilt training env (tests); built from the config otherwise.
        """
        self.config = config
        self.env = env if env is not None else _make_env(config, config.num_agents, config.seed)
        self.spec: EnvSpec = self.env.spec
        self.ppo = PPO(config, self.env)
        self.network = self.ppo.network
        self.fused = get_backend(config.backend).fused
        self._host_loop: HostLoop | None = None
        if config.host_loop:
            from batchppo.core.host_loop import HostLoop

            self._host_loop = HostLoop(self.env, self.ppo.policy_fn)
        self._eval_env: Env | None = None
        # Compiled programs by name: a jitted function, or a Future of an AOT-compiled one
        # while ``precompile`` builds it in the background.
        self._programs: dict[Hashable, Callable | Future] = {}
        self._compiler: ThreadPoolExecutor | None = None
        self._key_aval = key_data_aval()
        # Several devices: the programs run data-parallel over a 1-D mesh (sharding.py);
        # one device: no mesh, the unsharded programs.
        devices = learner_devices(config)
        self.sharding: Sharding | None = None
        self._ts_sharding: PyTree = None
        self._ss_sharding: PyTree = None
        if len(devices) > 1:
            self.sharding = Sharding(devices, self.env.num_envs)
            self.ppo.minibatch_sharding = self.sharding.minibatches
            self._ts_sharding = self.sharding.train_state(
                jax.eval_shape(self.ppo.init, self._key_aval)
            )
            self._ss_sharding = self.sharding.sim_state(
                jax.eval_shape(lambda key: self.ppo.init_sim(key), self._key_aval)
            )

    @property
    def num_devices(self) -> int:
        """Devices the training iteration runs on (data-parallel when more than one)."""
        return 1 if self.sharding is None else self.sharding.num_devices

    def _place(self, train_state: TrainState, sim_state: SimState) -> tuple[TrainState, SimState]:
        """The states laid out over the mesh (a restored checkpoint comes on one device); a
        no-op without a mesh or where they are laid out already."""
        if self.sharding is None:
            return train_state, sim_state
        return (
            self.sharding.put(train_state, self._ts_sharding),
            self.sharding.put(sim_state, self._ss_sharding),
        )

    def _one_device(self, tree: PyTree) -> PyTree:
        """A replicated pytree as one local device's copy: evaluation and deployment run
        unsharded on one device."""
        if self.sharding is None:
            return tree
        return jax.tree.map(
            lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x, tree
        )

    @property
    def steps_per_iteration(self) -> int:
        """Env steps (summed over envs) collected by one iteration."""
        return self.ppo.T * self.env.num_envs

    @property
    def num_iterations(self) -> int:
        """Iterations needed for ``config.steps``."""
        return self.ppo.num_iterations

    # --- compiled programs ------------------------------------------------------------------

    def _function(self, name: Hashable) -> Callable:
        """The jitted function of program ``name`` (see :meth:`precompile`)."""
        ppo = self.ppo
        # Over a mesh, programs that make states lay them out; on one device, no shardings.
        if name == "init":
            placed = {} if self.sharding is None else {"out_shardings": self._ts_sharding}
            return jax.jit(ppo.init, compiler_options=_cold_compiler_options(), **placed)
        if name == "init_sim":
            placed = {} if self.sharding is None else {"out_shardings": self._ss_sharding}
            return jax.jit(
                lambda key: ppo.init_sim(key), compiler_options=_cold_compiler_options(), **placed
            )
        kind, *args = name  # type: ignore[misc]
        if kind == "learn":
            return jax.jit(ppo.learn, donate_argnums=(0,), compiler_options=COMPILER_OPTIONS)
        if kind == "iterations":
            (n,) = args
            fn = ppo.iteration if n == 1 else _scan_iterations(ppo, n)
            donate = _iteration_donation(self.fused)
            if self.sharding is not None:
                states = (self._ts_sharding, self._ss_sharding)
                return jax.jit(
                    fn,
                    in_shardings=states,
                    out_shardings=(*states, self.sharding.replicated),
                    donate_argnums=donate,
                    compiler_options=COMPILER_OPTIONS,
                )
            return jax.jit(fn, donate_argnums=donate, compiler_options=COMPILER_OPTIONS)
        if kind in ("eval_start", "eval_more"):
            num_envs, chunk = args
            env = self._get_eval_env(num_envs)

            def start(params: PyTree, key: jax.Array) -> tuple[SimState, EpisodeStats]:
                return more(params, ppo.init_sim(key, env))

            def more(params: PyTree, ss: SimState) -> tuple[SimState, EpisodeStats]:
                ss, _, stats = rollout(env, ppo.mode_fn, params, ss, chunk)
                return ss, stats

            return jax.jit(
                start if kind == "eval_start" else more, compiler_options=_cold_compiler_options()
            )
        raise KeyError(name)

    def _call(self, name: Hashable, *args: Any) -> Any:
        """Runs program ``name``: precompiled when ``precompile`` built it, else jitted.

        A precompiled program that cannot be used (its background compilation failed, or it
        does not take these inputs) is replaced by the jitted function, which compiles again
        in the foreground; a ``RuntimeWarning`` says so, as the compilation it was to save is
        then paid on the critical path.
        """
        program = self._programs.get(name)
        if isinstance(program, Future):
            try:
                program = program.result()
            except Exception as error:  # compiled again below, in the foreground
                _warn_recompile(name, f"its background compilation failed: {error!r}")
                program = None
            self._programs[name] = program = program or self._function(name)
        elif program is None:
            self._programs[name] = program = self._function(name)
        try:
            return program(*args)
        except TypeError as error:
            # An AOT program only takes the exact input types it was compiled for (a state
            # restored with other dtypes, say): the jitted function takes anything.
            if not isinstance(program, jax.stages.Compiled):
                raise
            _warn_recompile(name, f"it does not take these inputs: {error}")
            self._programs[name] = program = self._function(name)
            return program(*args)

    def precompile(
        self, iterations: Sequence[int] = (1,), eval_episodes: int | None = None
    ) -> None:
        """Starts compiling the run's programs in background threads and returns at once.

        Start-up of a fresh process is mostly XLA compilation (seconds on CPU). Tracing runs
        here, in order; the XLA compilations then run side by side, and overlap with whatever
        the caller does next. Each program waits for its own compilation when first called.
        Calling programs that were not precompiled compiles them on first use, as usual.

        Args:
            iterations: The ``n`` of the ``iterations(n)`` calls to come (1: ``iteration``).
            eval_episodes: The ``num_episodes`` of the ``evaluate`` calls to come; None skips.
        """
        counts = sorted({int(n) for n in iterations}, reverse=True)
        if counts and counts[-1] < 1:
            raise ValueError(f"precompile: iterations={counts[-1]} must be >= 1")
        if self._compiler is None:
            self._compiler = ThreadPoolExecutor(thread_name_prefix="batchppo-compile")
        key = self._key_aval

        def submit(name: Hashable, *args: Any) -> Any:
            lowered = self._function(name).lower(*args)
            if name not in self._programs:
                self._programs[name] = self._compiler.submit(lowered.compile)
            return lowered.out_info

        # Lowering runs here, on one core; each compilation starts as soon as its program is
        # lowered, so the small ones fill the other core while the training iteration (the
        # longest compilation by far) is lowered.
        ts = submit("init", key)
        ss = submit("init_sim", key)
        if eval_episodes:
            layout = self._eval_layout(eval_episodes)
            params = (ts.params, ts.obs_norm)
            if self.sharding is not None:  # evaluation runs on one device
                params = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), params)
            submit(("eval_start", *layout), params, key)
        if self._host_loop is not None:  # the loop's own steps compile on first use
            traj, stats = jax.eval_shape(self._rollout_shapes, ts, ss)
            submit(("learn",), ts, traj, stats)
        else:
            for n in counts:
                submit(("iterations", n), ts, ss)

    # --- training -----------------------------------------------------------------------------

    def init(self, key: jax.Array) -> TrainState:
        """A fresh :class:`TrainState` (parameters from ``key``)."""
        return self._call("init", raw_key(key))

    def init_sim(self, train_state: TrainState, key: jax.Array) -> SimState:
        """Fresh episodes in the training env (start of a run and after resume)."""
        del train_state
        try:
            return self._call("init_sim", raw_key(key))
        except Exception as error:
            self._raise_env_error(error)
            raise

    def _raise_env_error(self, error: Exception) -> None:
        """Raises the host env exception that ``error`` (JAX's runtime error) carries, if any."""
        from batchppo.core.adapters import raise_env_error  # imported late, as in _make_env

        raise_env_error(error, self.env, self._eval_env)

    def iteration(
        self, train_state: TrainState, sim_state: SimState
    ) -> tuple[TrainState, SimState, dict[str, float]]:
        """One collection + update, one compiled call. Returns Python-float metrics.

        With ``host_loop``, the collection is a Python loop (:class:`HostLoop`) and the update
        one compiled call.

        Raises:
            Exception: A host env's own exception (see the class docstring); ``train_state``
                is then still valid.
        """
        try:
            if self._host_loop is None:
                train_state, sim_state = self._place(train_state, sim_state)
                ts, ss, metrics = self._call(("iterations", 1), train_state, sim_state)
                return ts, ss, self._with_env_restarts(_to_python(metrics))
            params = (train_state.params, train_state.obs_norm)
            ss, traj, stats = self._host_loop.rollout(params, sim_state, self.ppo.T)
            ts, metrics = self._call(("learn",), train_state, traj, stats)
            return ts, ss, self._with_env_restarts(_to_python(metrics))
        except Exception as error:
            self._raise_env_error(error)
            raise

    @property
    def env_restarts(self) -> int | None:
        """Env restarts so far in the training and eval envs (``max_env_restarts``); None
        for backends that cannot restart envs (pure-JAX ones)."""
        counts = [getattr(env, "restarts", None) for env in (self.env, self._eval_env)]
        counts = [count for count in counts if count is not None]
        return sum(counts) if counts else None

    def _with_env_restarts(self, metrics: dict[str, float]) -> dict[str, float]:
        """``metrics`` with ``env_restarts`` (a running total) where the envs count them."""
        restarts = self.env_restarts
        if restarts is not None:
            metrics["env_restarts"] = float(restarts)
        return metrics

    def _rollout_shapes(self, ts: TrainState, ss: SimState) -> tuple[Transition, EpisodeStats]:
        params = (ts.params, ts.obs_norm)
        _, traj, stats = rollout(self.env, self.ppo.policy_fn, params, ss, self.ppo.T)
        return traj, stats

    def iterations(
        self, train_state: TrainState, sim_state: SimState, n: int
    ) -> tuple[TrainState, SimState, list[dict[str, float]]]:
        """``n`` iterations in one compiled ``lax.scan`` (one host sync for all of them).

        Returns:
            ``(train_state, sim_state, metrics)`` with one metrics dict per iteration.
        """
        n = int(n)
        if n < 1:
            raise ValueError(f"iterations: n={n} must be >= 1")
        if n == 1 or self._host_loop is not None:
            metrics = []
            for _ in range(n):
                train_state, sim_state, m = self.iteration(train_state, sim_state)
                metrics.append(m)
            return train_state, sim_state, metrics
        try:
            train_state, sim_state = self._place(train_state, sim_state)
            ts, ss, metrics = self._call(("iterations", n), train_state, sim_state)
            metrics = jax.device_get(metrics)
        except Exception as error:
            self._raise_env_error(error)
            raise
        per_iteration = [{k: float(v[i]) for k, v in metrics.items()} for i in range(n)]
        return ts, ss, [self._with_env_restarts(m) for m in per_iteration]

    # --- evaluation and deployment ----------------------------------------------------------

    def _get_eval_env(self, num_envs: int) -> Env:
        if self._eval_env is None or self._eval_env.num_envs != num_envs:
            if self._eval_env is not None and hasattr(self._eval_env, "close"):
                self._eval_env.close()
            self._eval_env = _make_env(self.config, num_envs, self.config.seed + _EVAL_SEED_OFFSET)
            # The eval programs were compiled over the old env: drop them.
            self._programs = {
                k: v
                for k, v in self._programs.items()
                if not (isinstance(k, tuple) and k[0] in ("eval_start", "eval_more"))
            }
        return self._eval_env

    def _eval_layout(self, num_episodes: int) -> tuple[int, int]:
        """``(num_envs, chunk)``: envs of the eval env and steps per compiled eval call
        (``max_length``, else ``_EVAL_CHUNK``; at most ``eval_max_steps``)."""
        if num_episodes < 1:
            raise ValueError(f"evaluate: num_episodes={num_episodes} must be >= 1")
        chunk = min(self.config.max_length or _EVAL_CHUNK, self.config.eval_max_steps)
        return min(num_episodes, self.config.num_agents), int(chunk)

    def evaluate(self, train_state: TrainState, num_episodes: int, key: jax.Array) -> dict:
        """Runs the mean-action policy in a separate eval env of the same backend.

        Episodes are taken fairly: ``min(num_episodes, num_agents)`` envs run until each has
        finished enough episodes, and the first episodes of each env are kept (no bias towards
        short episodes). The first ``max_length`` steps (reset included) are one compiled
        call, which suffices when every episode ends within the time limit.

        Each env runs at most ``config.eval_max_steps`` steps: an episode still running then
        is cut and kept with its return and length so far, ``"cut"`` counts such episodes
        among those returned, and a ``RuntimeWarning`` says how many were cut.

        Args:
            train_state: The state whose params and observation statistics act.
            num_episodes: Episodes to collect (>= 1).
            key: PRNG key of the env resets.

        Returns:
            ``{"score", "length"}`` means, ``"returns"`` and ``"lengths"`` arrays (fewer than
            ``num_episodes`` when an env's episodes were cut) and ``"cut"``, the number of
            cut episodes.

        Raises:
            Exception: An eval env's own exception (see the class docstring).
        """
        try:
            return self._evaluate(train_state, num_episodes, key)
        except Exception as error:
            self._raise_env_error(error)
            raise

    def _evaluate(self, train_state: TrainState, num_episodes: int, key: jax.Array) -> dict:
        num_envs, chunk = self._eval_layout(num_episodes)
        self._get_eval_env(num_envs)
        per_env = math.ceil(num_episodes / num_envs)
        params = self._one_device((train_state.params, train_state.obs_norm))
        # Each env's episodes in order: (return, length, cut by eval_max_steps).
        episodes: list[list[tuple[float, int, bool]]] = [[] for _ in range(num_envs)]
        max_steps = self.config.eval_max_steps
        ss, stats = self._call(("eval_start", num_envs, chunk), params, raw_key(key))
        steps = chunk
        while True:
            done, score, length = jax.device_get((stats.done, stats.score, stats.length))
            for t, i in zip(*np.nonzero(done), strict=True):
                episodes[i].append((float(score[t, i]), int(length[t, i]), False))
            if min(len(e) for e in episodes) >= per_env or steps >= max_steps:
                break
            more = min(chunk, max_steps - steps)  # the last call stops at the bound exactly
            ss, stats = self._call(("eval_more", num_envs, more), params, ss)
            steps += more
        running = jax.device_get((ss.score, ss.length))
        for i, env_episodes in enumerate(episodes):
            if len(env_episodes) < per_env and running[1][i] > 0:
                env_episodes.append((float(running[0][i]), int(running[1][i]), True))
        ordered = [e[k] for k in range(per_env) for e in episodes if k < len(e)]
        ordered = ordered[:num_episodes]
        cut = sum(c for _, _, c in ordered)
        if cut:
            warnings.warn(
                f"evaluate: {cut} of {len(ordered)} eval episodes were cut at "
                f"eval_max_steps={max_steps} steps per env before they ended; they count "
                "with their return so far. Raise eval_max_steps, or bound episodes with "
                "max_length",
                RuntimeWarning,
                stacklevel=3,
            )
        rets = np.array([s for s, _, _ in ordered], np.float64)
        lens = np.array([n for _, n, _ in ordered], np.int64)
        return {
            "score": float(rets.mean()),
            "length": float(lens.mean()),
            "returns": rets,
            "lengths": lens,
            "cut": cut,
        }

    def policy(
        self, train_state: TrainState, deterministic: bool = True
    ) -> Callable[[np.ndarray], np.ndarray]:
        """A host callable ``obs (B, *obs_shape) -> actions (B, *action_shape)``.

        It normalises observations with the state's statistics; recurrent policies carry their
        state across calls (call ``.reset()`` at episode starts). Sampling (``deterministic=
        False``) draws from a key seeded by ``config.seed``.
        """
        acting = self._one_device({"params": train_state.params, "obs_norm": train_state.obs_norm})
        train_state = train_state.replace(**acting)
        return _HostPolicy(self.ppo, train_state, deterministic, self.config.seed)

    def close(self) -> None:
        """Closes the training and evaluation envs (worker processes of host backends)."""
        if self._compiler is not None:
            self._compiler.shutdown(wait=False, cancel_futures=True)
            self._compiler = None
        for env in (self.env, self._eval_env):
            close = getattr(env, "close", None)
            if close is not None:
                close()
        self._eval_env = None


class _HostPolicy:
    """``obs -> action`` on the host for deployment and visualisation (see Trainer.policy)."""

    def __init__(self, ppo: PPO, ts: TrainState, deterministic: bool, seed: int) -> None:
        self._ppo = ppo
        self._params = (ts.params, ts.obs_norm)
        self._fn = jax.jit(ppo.mode_fn if deterministic else ppo.policy_fn)
        self._key = jax.random.key(seed)
        self._carry: PyTree = None

    def reset(self) -> None:
        """Forgets the recurrent state; the next call starts new episodes."""
        self._carry = None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = jnp.asarray(obs, jnp.float32)
        if obs.shape[1:] != tuple(self._ppo.spec.obs_shape):
            raise ValueError(
                f"policy: observations of shape {obs.shape} do not match (B, "
                f"*{tuple(self._ppo.spec.obs_shape)}); pass a batch"
            )
        batch = obs.shape[0]
        first = self._carry is None
        if first:
            self._carry = self._ppo.network.initial_carry(batch)
        self._key, key = jax.random.split(self._key)
        first_arr = jnp.full((batch,), first)
        action, _, self._carry = self._fn(self._params, self._carry, obs, first_arr, key)
        return np.asarray(action)

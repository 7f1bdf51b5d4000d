"""A PureJaxRL-style PPO baseline (continuous actions), written for batchppo's benchmark.

It reproduces the *structure and sizes* of PureJaxRL's ``ppo_continuous_action`` on gymnax
Pendulum-v1 (2048 envs x 10 steps, 4 epochs, 32 minibatches, 256x256 tanh actor and critic,
per-step observation and return-based reward normalisation, clipped objective with value
clipping, linear LR anneal, whole training run as one jitted function) so that the fused
throughput of batchppo can be compared side by side at that exact configuration. It is our
own code, not a copy of PureJaxRL.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax


class Config(NamedTuple):
    """PureJaxRL's ppo_continuous_action defaults for Pendulum-v1."""

    num_envs: int = 2048
    num_steps: int = 10
    total_timesteps: int = 1_000_000
    update_epochs: int = 4
    num_minibatches: int = 32
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 256
    anneal_lr: bool = True


class ActorCritic(nn.Module):
    action_dim: int
    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[distrax.Distribution, jax.Array]:
        orth = nn.initializers.orthogonal
        a = nn.tanh(nn.Dense(self.hidden, kernel_init=orth(np.sqrt(2)))(x))
        a = nn.tanh(nn.Dense(self.hidden, kernel_init=orth(np.sqrt(2)))(a))
        mean = nn.Dense(self.action_dim, kernel_init=orth(0.01))(a)
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        c = nn.tanh(nn.Dense(self.hidden, kernel_init=orth(np.sqrt(2)))(x))
        c = nn.tanh(nn.Dense(self.hidden, kernel_init=orth(np.sqrt(2)))(c))
        v = nn.Dense(1, kernel_init=orth(1.0))(c)[..., 0]
        return distrax.MultivariateNormalDiag(mean, jnp.exp(log_std)), v


class RunningStats(NamedTuple):
    mean: jax.Array
    var: jax.Array
    count: jax.Array


def _merge(stats: RunningStats, x: jax.Array) -> RunningStats:
    bmean, bvar, bcount = x.mean(0), x.var(0), x.shape[0]
    delta = bmean - stats.mean
    tot = stats.count + bcount
    mean = stats.mean + delta * bcount / tot
    m2 = stats.var * stats.count + bvar * bcount + delta**2 * stats.count * bcount / tot
    return RunningStats(mean, m2 / tot, tot)


class EnvCarry(NamedTuple):
    env_state: Any
    obs: jax.Array  # raw observations
    obs_stats: RunningStats
    ret: jax.Array  # discounted return accumulator for reward scaling
    ret_stats: RunningStats
    ep_return: jax.Array


class Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array


def make_train(config: Config):
    """Returns ``train(key) -> (params, mean episode returns per update)``."""
    env, env_params = gymnax.make("Pendulum-v1")
    action_dim = env.action_space(env_params).shape[0]
    low = env.action_space(env_params).low
    high = env.action_space(env_params).high
    num_updates = config.total_timesteps // (config.num_envs * config.num_steps)
    batch_size = config.num_envs * config.num_steps
    mb_size = batch_size // config.num_minibatches
    net = ActorCritic(action_dim, config.hidden)

    def lr_schedule(count: jax.Array) -> jax.Array:
        frac = 1.0 - (count // (config.num_minibatches * config.update_epochs)) / num_updates
        return config.lr * frac

    tx = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(lr_schedule if config.anneal_lr else config.lr, eps=1e-5),
    )

    def norm_obs(stats: RunningStats, obs: jax.Array) -> jax.Array:
        return (obs - stats.mean) / jnp.sqrt(stats.var + 1e-8)

    def env_step(carry: EnvCarry, action: jax.Array, key: jax.Array):
        keys = jax.random.split(key, config.num_envs)
        action = jnp.clip(action, low, high)
        obs, state, reward, term, trunc, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, carry.env_state, action, env_params
        )
        done = jnp.logical_or(term, trunc).astype(jnp.float32)  # PureJaxRL treats both as done
        obs_stats = _merge(carry.obs_stats, obs)
        ret = carry.ret * config.gamma * (1 - done) + reward
        ret_stats = _merge(carry.ret_stats, ret)
        scaled = reward / jnp.sqrt(ret_stats.var + 1e-8)
        ep_return = carry.ep_return + reward
        new = EnvCarry(state, obs, obs_stats, ret, ret_stats, ep_return * (1 - done))
        return new, scaled, done, ep_return

    def train(key: jax.Array):
        key, k_init, k_reset = jax.random.split(key, 3)
        obs_dim = env.observation_space(env_params).shape[0]
        params = net.init(k_init, jnp.zeros((obs_dim,)))
        opt_state = tx.init(params)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_reset, config.num_envs), env_params
        )
        zeros_stats = RunningStats(jnp.zeros(obs_dim), jnp.ones(obs_dim), jnp.asarray(1e-4))
        carry = EnvCarry(
            state,
            obs,
            _merge(zeros_stats, obs),
            jnp.zeros(config.num_envs),
            RunningStats(jnp.zeros(()), jnp.ones(()), jnp.asarray(1e-4)),
            jnp.zeros(config.num_envs),
        )

        def update(runner, _):
            params, opt_state, carry, key = runner

            def step(c, _):
                env_c, key = c
                key, k_act, k_env = jax.random.split(key, 3)
                o = norm_obs(env_c.obs_stats, env_c.obs)
                pi, v = net.apply(params, o)
                a = pi.sample(seed=k_act)
                lp = pi.log_prob(a)
                env_c, r, d, epret = env_step(env_c, a, k_env)
                return (env_c, key), (Transition(d, a, v, r, lp, o), (epret, d))

            (carry, key), (traj, (epret, dones)) = jax.lax.scan(
                step, (carry, key), None, config.num_steps
            )
            _, last_v = net.apply(params, norm_obs(carry.obs_stats, carry.obs))

            def gae_step(c, t):
                gae, nv = c
                delta = t.reward + config.gamma * nv * (1 - t.done) - t.value
                gae = delta + config.gamma * config.gae_lambda * (1 - t.done) * gae
                return (gae, t.value), gae

            _, adv = jax.lax.scan(gae_step, (jnp.zeros_like(last_v), last_v), traj, reverse=True)
            targets = adv + traj.value

            def loss_fn(p, t, a, tgt):
                pi, v = net.apply(p, t.obs)
                lp = pi.log_prob(t.action)
                v_clip = t.value + jnp.clip(v - t.value, -config.clip_eps, config.clip_eps)
                v_loss = 0.5 * jnp.maximum((v - tgt) ** 2, (v_clip - tgt) ** 2).mean()
                ratio = jnp.exp(lp - t.log_prob)
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = -jnp.minimum(
                    ratio * a, jnp.clip(ratio, 1 - config.clip_eps, 1 + config.clip_eps) * a
                ).mean()
                return pg + config.vf_coef * v_loss - config.ent_coef * pi.entropy().mean()

            def epoch(c, k):
                p, o = c
                perm = jax.random.permutation(k, batch_size)
                data = jax.tree.map(
                    lambda x: jnp.take(x.reshape((batch_size, *x.shape[2:])), perm, 0).reshape(
                        (config.num_minibatches, mb_size, *x.shape[2:])
                    ),
                    (traj, adv, targets),
                )

                def mb(c, d):
                    p, o = c
                    g = jax.grad(loss_fn)(p, *d)
                    u, o = tx.update(g, o, p)
                    return (optax.apply_updates(p, u), o), None

                return jax.lax.scan(mb, (p, o), data)[0], None

            key, k_ep = jax.random.split(key)
            (params, opt_state), _ = jax.lax.scan(
                epoch, (params, opt_state), jax.random.split(k_ep, config.update_epochs)
            )
            done_f = dones.astype(jnp.float32)
            score = (epret * done_f).sum() / jnp.maximum(done_f.sum(), 1)
            return (params, opt_state, carry, key), score

        (params, *_), scores = jax.lax.scan(
            update, (params, opt_state, carry, key), None, num_updates
        )
        return params, scores

    return train

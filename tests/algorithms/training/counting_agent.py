"""A counting agent of the ``Agent`` protocol, for tests of the shared trainers.

The agent learns nothing: its train state counts env steps, updates and rewards, so every
number a trainer reports is known exactly. Its sampling policy draws action 1 with a
probability taken from the init key, its deterministic policy always acts 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from batchppo.algorithms.run_config import RunConfig
from batchppo.algorithms.training.trainer import episode_metrics
from batchppo.core import Env, EpisodeStats, SimState, Transition, init_sim_state, rollout


@struct.dataclass
class CountState:
    """The counting agent's train state."""

    p: jax.Array  # probability of action 1 when sampling, drawn from the init key
    step: jax.Array
    updates: jax.Array
    reward_sum: jax.Array


class Counter:
    """An agent of the ``Agent`` protocol that counts: 4-step rollouts, no learning."""

    T = 4
    num_iterations = 3

    def __init__(self, config: RunConfig, env: Env) -> None:
        self.env, self.spec, self.minibatch_sharding = env, env.spec, None

    def init(self, key: jax.Array) -> CountState:
        zero = jnp.zeros((), jnp.int32)
        p = jax.random.uniform(key, minval=0.25, maxval=0.75)
        return CountState(p, zero, zero, jnp.zeros((), jnp.float32))

    def init_sim(self, key: jax.Array, env: Env | None = None) -> SimState:
        return init_sim_state(env or self.env, (), key)

    def acting_params(self, ts: CountState) -> jax.Array:
        return ts.p

    def initial_carry(self, batch: int) -> tuple:
        return ()

    def policy_fn(self, params, carry, obs, first, key):
        action = jax.random.bernoulli(key, params, (obs.shape[0],)).astype(jnp.int32)
        return action, {}, carry

    def mode_fn(self, params, carry, obs, first, key):
        return jnp.zeros((obs.shape[0],), jnp.int32), {}, carry

    def iteration(self, ts: CountState, ss: SimState):
        ss, traj, stats = rollout(self.env, self.policy_fn, self.acting_params(ts), ss, self.T)
        ts, metrics = self.learn(ts, traj, stats)
        return ts, ss, metrics

    def learn(self, ts: CountState, traj: Transition, stats: EpisodeStats):
        total = traj.reward.sum()
        ts = ts.replace(
            step=ts.step + traj.reward.size,
            updates=ts.updates + 1,
            reward_sum=ts.reward_sum + total,
        )
        return ts, {"reward_sum": total, **episode_metrics(stats)}

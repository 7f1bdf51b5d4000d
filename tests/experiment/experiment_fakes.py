"""A deterministic stand-in for the PPO Trainer, for cadence and resume tests of the loop.

Each iteration adds ``steps_per_iteration`` env steps and 1 to ``params["w"]``; metrics are
exact functions of the step, so every report the loop writes can be predicted.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from batchppo.algorithms.ppo.config import PPOConfig


@struct.dataclass
class FakeState:
    params: dict
    key: jax.Array
    step: jax.Array
    updates: jax.Array


class FakeTrainer:
    """Trainer API (init, init_sim, iteration, evaluate, policy, close) without learning.

    Args:
        config: The run's config; ``num_agents * rollout_length`` steps per iteration.
        signal_at: Send this process ``signal_num`` during the iteration that reaches this
            many updates (simulates Ctrl-C / SIGTERM arriving mid-iteration); 0 sends it
            during ``init``, at start-up.
    """

    instances: list[FakeTrainer] = []  # noqa: RUF012  (test bookkeeping)

    def __init__(
        self, config: PPOConfig, signal_at: int | None = None, signal_num: int = signal.SIGTERM
    ) -> None:
        self.config = config
        self.steps_per_iteration = config.num_agents * (config.rollout_length or 1)
        self.signal_at, self.signal_num = signal_at, signal_num
        self.closed = False
        self.evaluated_at: list[int] = []
        self.sampled: list[bool] = []
        FakeTrainer.instances.append(self)

    def init(self, key: jax.Array) -> FakeState:
        if self.signal_at == 0:
            os.kill(os.getpid(), self.signal_num)
        return FakeState(
            params={"w": jnp.zeros((3,), jnp.float32), "b": jnp.ones((2, 2), jnp.float32)},
            key=jax.random.key(0),
            step=jnp.zeros((), jnp.int32),
            updates=jnp.zeros((), jnp.int32),
        )

    def init_sim(self, train_state: FakeState, key: jax.Array) -> dict:
        return {"key": key}

    def iteration(self, ts: FakeState, ss: dict) -> tuple[FakeState, dict, dict[str, float]]:
        updates = int(ts.updates) + 1
        if self.signal_at is not None and updates == self.signal_at:
            os.kill(os.getpid(), self.signal_num)
        new_key, _ = jax.random.split(ts.key)
        ts = ts.replace(
            params={"w": ts.params["w"] + 1.0, "b": ts.params["b"]},
            key=new_key,
            step=ts.step + self.steps_per_iteration,
            updates=ts.updates + 1,
        )
        step = int(ts.step)
        metrics = {
            "env_steps": float(self.steps_per_iteration),
            "episodes": 2.0,
            "score": float(step),
            "length": 10.0,
            "policy_loss": float(updates),
            "kl": float("nan") if updates == 1 else 0.5,
        }
        return ts, ss, metrics

    def evaluate(
        self, ts: FakeState, num_episodes: int, key: jax.Array, sample: bool = False
    ) -> dict:
        self.evaluated_at.append(int(ts.step))
        self.sampled.append(sample)
        returns = np.full((num_episodes,), float(ts.step))
        lengths = np.full((num_episodes,), 7)
        return {"score": float(ts.step), "length": 7.0, "returns": returns, "lengths": lengths}

    def policy(self, ts: FakeState, deterministic: bool = True) -> Any:
        w = np.asarray(ts.params["w"])
        return lambda obs: np.asarray(obs)[:, :1] * 0 + w[0]

    def close(self) -> None:
        self.closed = True


class FakeSeedsTrainer:
    """``SeedsTrainer``'s API over one ``FakeTrainer``: states stacked over seeds, one
    metrics dict per seed, each seed computing what a separate FakeTrainer run computes.

    Args:
        config: The seeds' config (as ``FakeTrainer``'s).
        num_seeds: Number of seeds.
        signal_at: Send this process ``signal_num`` (once) during the iteration that reaches
            this many updates.
    """

    def __init__(
        self,
        config: PPOConfig,
        num_seeds: int,
        signal_at: int | None = None,
        signal_num: int = signal.SIGTERM,
    ) -> None:
        self.one, self.num_seeds = FakeTrainer(config), num_seeds
        self.signal_at, self.signal_num = signal_at, signal_num

    def init(self, keys: Any) -> FakeState:
        return _stack([self.one.init(key) for key in keys])

    def init_sim(self, train_state: FakeState, keys: Any) -> dict:
        return {}

    def iteration(self, ts: FakeState, ss: dict) -> tuple[FakeState, dict, list[dict[str, float]]]:
        if self.signal_at is not None and int(ts.updates[0]) + 1 == self.signal_at:
            os.kill(os.getpid(), self.signal_num)
        out = [self.one.iteration(jax.tree.map(lambda x, i=i: x[i], ts), ss)
               for i in range(self.num_seeds)]  # fmt: skip
        return _stack([ts for ts, _, _ in out]), ss, [metrics for _, _, metrics in out]

    def evaluate(
        self, ts: FakeState, num_episodes: int, key: jax.Array, sample: bool = False
    ) -> dict:
        return self.one.evaluate(ts, num_episodes, key, sample)

    def policy(self, ts: FakeState, deterministic: bool = True) -> Any:
        return self.one.policy(ts, deterministic)

    def close(self) -> None:
        self.one.close()


def _stack(states: list[FakeState]) -> FakeState:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def fake_config(**changes: Any) -> PPOConfig:
    """A config whose iterations are 100 steps, with a tight reporting cadence."""
    base = PPOConfig(
        env="CartPole-v1",
        backend="gymnax",
        num_agents=10,
        rollout_length=10,
        steps=1000,
        log_every=250,
        eval_every=400,
        checkpoint_every=300,
        keep_checkpoints=2,
        eval_episodes=3,
    )
    return dataclasses.replace(base, **changes)

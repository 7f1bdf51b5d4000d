"""Pendulums that crash, for training runs with env restarts and for fail-fast runs.

Importing this module registers ``CrashingPendulum-v0`` (crashes at random steps) and
``FailingPendulum-v0`` (fails at a given step); ``batchppo`` reaches them as
``crash_envs:CrashingPendulum-v0``, which imports the module first (in the worker processes
too), as ``gymnasium.make`` does. ``train_argv`` and ``env_workers`` run them through
``batchppo train`` and find the worker processes left behind.
"""

from __future__ import annotations

import os
import time
from typing import Any

import gymnasium
import numpy as np
import psutil
from gymnasium.envs.classic_control.pendulum import PendulumEnv

ENV_ID = "CrashingPendulum-v0"
FAILING_ID = "FailingPendulum-v0"

# 8 envs x 64 steps = 512 env steps per iteration in 2 worker processes; tiny networks.
TINY_RUN = (
    "steps=4096",
    "num_agents=8",
    "backend_options.num_workers=2",
    "rollout_length=64",
    "max_length=100",
    "update_epochs=1",
    "num_minibatches=1",
    "policy_layers=[16]",
    "value_layers=[16]",
    "eval_episodes=4",
    "eval_every=2048",
    "log_every=1024",
)


def train_argv(logdir: Any, timestamp: str, env: str, *overrides: str) -> list[str]:
    """``batchppo train`` arguments of a ``TINY_RUN`` of ``env`` (``pendulum_fast``)."""
    argv = ["train", "--config", "pendulum_fast", "--logdir", str(logdir), "--timestamp"]
    argv += [timestamp, "--progress", "none"]
    for override in (f"env={env}", *TINY_RUN, *overrides):
        argv += ["--set", override]
    return argv


def env_workers() -> list[psutil.Process]:
    """The env worker processes below this one (none once every batch env is closed)."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "env-worker" in " ".join(p.cmdline())
    ]


class CrashingPendulumEnv(PendulumEnv):
    """Pendulum-v1 whose ``step`` raises RuntimeError with probability ``crash_probability``.

    The crashes are drawn from their own generator, seeded by the seed of the env's last
    seeded reset, so a seeded run crashes at the same steps every time.
    """

    def __init__(self, crash_probability: float = 0.002, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.crash_probability = crash_probability
        self._crashes = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._crashes = np.random.default_rng([seed, 1])
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self._crashes.random() < self.crash_probability:
            raise RuntimeError("CrashingPendulum: the simulator crashed")
        return super().step(action)


class FailingError(RuntimeError):
    """What a FailingPendulum raises (a type of the env's own, importable in the parent)."""


class FailingPendulumEnv(PendulumEnv):
    """Pendulum-v1 whose ``fail_at``-th step since construction fails.

    ``how="raise"`` raises ``FailingError``; ``how="exit"`` ends the worker process
    with ``os._exit(3)``; ``how="hang"`` sleeps for an hour (a simulator that deadlocked).
    """

    def __init__(self, fail_at: int = 100, how: str = "raise", render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.fail_at, self.how, self.steps = fail_at, how, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            if self.how == "exit":
                os._exit(3)
            if self.how == "hang":
                time.sleep(3600)
            raise FailingError(f"FailingPendulum: step {self.steps} failed on purpose")
        return super().step(action)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=CrashingPendulumEnv, max_episode_steps=200)
if FAILING_ID not in gymnasium.registry:
    gymnasium.register(FAILING_ID, entry_point=FailingPendulumEnv, max_episode_steps=200)

"""Envs shaped like the ecosystem's, for the recipe, start-up and worker tests of issue 42.

``batchppo`` reaches them as ``ecosystem_envs:<factory>`` (the module is imported in the
worker processes too):

* ``make_grid2d``: highway-env's shape, a Box(5, 5) float observation and Discrete(5)
  actions (10-step episodes);
* ``make_pick_many``: a vector observation and a MultiDiscrete([2, 3]) action;
* ``make_one_legal_move``: a Dict observation whose ``action_mask`` (MultiBinary(4)) allows
  one of four actions each step; an illegal action ends the episode, 20 legal ones fill it;
* ``make_handler_env``: a Pendulum built with pygame initialised and SIGTERM and SIGINT
  handlers of its own that exit with 255.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class Grid2D(gymnasium.Env):
    """Five vehicles of five features, as highway-env's kinematics observation."""

    observation_space = spaces.Box(-1.0, 1.0, (5, 5), np.float32)
    action_space = spaces.Discrete(5)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        obs = np.full((5, 5), 0.1 * int(action), np.float32)
        return obs, float(int(action) == 2), False, self.t >= 10, {}


class PickMany(gymnasium.Env):
    """Two choices at once: reward 1 for each entry equal to the observation's."""

    observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = spaces.MultiDiscrete([2, 3])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), float(np.sum(action == 0)), False, self.t >= 10, {}


class OneLegalMove(gymnasium.Env):
    """One legal action of four each step, drawn at random and marked in ``action_mask``:
    reward 1 for it; any other ends the episode (terminated). 20 steps at most."""

    observation_space = spaces.Dict(
        {"action_mask": spaces.MultiBinary(4), "t": spaces.Box(0.0, 1.0, (1,), np.float32)}
    )
    action_space = spaces.Discrete(4)

    def _obs(self):
        mask = np.zeros(4, np.int8)
        mask[self.legal] = 1
        return {"action_mask": mask, "t": np.array([self.t / 20], np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.legal = 0, int(self.np_random.integers(4))
        return self._obs(), {}

    def step(self, action):
        legal = int(action) == self.legal
        self.t, self.legal = self.t + 1, int(self.np_random.integers(4))
        return self._obs(), float(legal), not legal, legal and self.t >= 20, {}


def _exit_255(signum, frame):  # pygame's parachute: the process exits on the signal
    sys.exit(255)


def make_grid2d():
    return Grid2D()


def make_pick_many():
    return PickMany()


def make_one_legal_move():
    return OneLegalMove()


class SlowPendulum(PendulumEnv):
    """Pendulum whose step takes a millisecond more, as a simulator would."""

    def step(self, action):
        time.sleep(0.001)
        return super().step(action)


def make_handler_env():
    """What highway-env and MiniGrid bring into a worker: pygame initialised; and handlers
    that exit with 255 on SIGTERM and SIGINT installed by the env's own code."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    import pygame

    pygame.init()
    signal.signal(signal.SIGTERM, _exit_255)
    signal.signal(signal.SIGINT, _exit_255)
    return SlowPendulum()


class _Model:
    nq = 2


def make_asserting():
    model = _Model()
    assert model.nq == 3  # as gymnasium-robotics asserts on MuJoCo's model
    return PendulumEnv()

"""A worker's death says why (issue 42): its exit code or signal, what it was asked, and the
last lines it wrote to stderr; a worker whose env installs signal handlers still ignores the
SIGTERM and SIGINT that reach the whole process group."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest
from envs_testlib import wait_delivered
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from batchppo.envs import BatchEnv, WorkerDiedError, WorkerOptions

pytestmark = pytest.mark.timeout(60)

ACTIONS = np.zeros((2, 1), np.float32)


class DyingPendulum(PendulumEnv):
    """Pendulum whose 2nd step (or its ``die`` call) writes two lines to stderr, then ends
    the process: ``os._exit(3)``, or SIGKILL with ``signal_kill``."""

    def __init__(self, signal_kill: bool = False):
        super().__init__()
        self.signal_kill, self.t = signal_kill, 0

    def die(self) -> None:
        print("loading the level", file=sys.stderr, flush=True)
        print("Fatal: the simulator lost its licence", file=sys.stderr, flush=True)
        if self.signal_kill:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)

    def step(self, action):
        self.t += 1
        if self.t == 2:
            self.die()
        return super().step(action)


class HandlerPendulum(PendulumEnv):
    """Pendulum built as pygame-importing envs are: pygame initialised, and handlers of its
    own that exit with 255 on SIGTERM and SIGINT."""

    def __init__(self):
        super().__init__()
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        import pygame

        pygame.init()
        self.install_handlers()

    def install_handlers(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(255))
        signal.signal(signal.SIGINT, lambda *_: os._exit(255))


def test_a_death_names_the_exit_code_the_call_and_the_stderr_tail(capfd):
    env = BatchEnv([DyingPendulum] * 2, WorkerOptions(num_workers=2), autoreset_mode="SameStep")
    pid = env.worker_pids[0]
    env.reset(seed=0)
    env.step(ACTIONS)
    with pytest.raises(WorkerDiedError) as info:
        env.step(ACTIONS)
    env.close(terminate=True)
    first, *rest = str(info.value).splitlines()
    assert first.startswith(f"worker 0 (pid {pid}, envs 0..0) died (exit code 3) during a step;")
    assert first.endswith(
        "the last line it wrote to stderr: 'Fatal: the simulator lost its licence'. The batch "
        "env cannot continue; close it and build a new one."
    )
    assert rest == [
        "[batchppo] worker 0's last lines on stderr:",
        "  loading the level",
        "  Fatal: the simulator lost its licence",
    ]
    assert "Fatal: the simulator lost its licence" in capfd.readouterr().err  # forwarded


def test_a_death_by_signal_in_a_call_names_the_signal_and_the_call():
    env = BatchEnv(
        [lambda: DyingPendulum(signal_kill=True)] * 2,
        WorkerOptions(num_workers=2),
        autoreset_mode="SameStep",
    )
    env.reset(seed=0)
    with pytest.raises(WorkerDiedError, match=r"died \(killed by signal SIGKILL\) during a "
                       r"call of 'die'; the last line it wrote"):  # fmt: skip
        env.call("die")
    env.close(terminate=True)


def test_a_worker_ignores_stop_signals_whatever_handlers_its_env_installs():
    env = BatchEnv([HandlerPendulum] * 2, WorkerOptions(num_workers=2), autoreset_mode="SameStep")
    try:
        env.reset(seed=0)
        for pid in env.worker_pids:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGINT)
        wait_delivered(env.worker_pids, [signal.SIGTERM, signal.SIGINT])
        env.step(ACTIONS)  # every worker alive
        env.call("install_handlers")  # a call installs them again: ignored after it too
        for pid in env.worker_pids:
            os.kill(pid, signal.SIGTERM)
        wait_delivered(env.worker_pids, [signal.SIGTERM])
        obs, *_ = env.step(ACTIONS)
        assert obs.shape == (2, 3)
    finally:
        env.close()

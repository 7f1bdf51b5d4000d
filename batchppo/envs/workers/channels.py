"""How a ``WorkerPool`` talks to its slots: commands out, answers in.

A worker is woken for each command by its command semaphore, after the pool wrote the command word
in shared memory: a step (its actions are already in the shared arrays), or a pipe command whose
message follows on its pipe. It answers a step with its done semaphore and its status word, and
anything else on its pipe. ``Channels`` holds the parent's ends of that: it writes the command
words, releases the semaphores, sends the messages and waits for the answers. Every wait polls,
so that it notices a worker that died (``Diagnosis.dead``), a ``step_timeout`` that passed
(``HungError``; the clock starts with each command, ``start_clock``) and a caller's ``*_wait``
timeout (``multiprocessing.TimeoutError``). The slot of the envs the calling process steps
(``PARENT_SLOT``) is a ``LocalWorker``, which runs each message when its answer is asked for.

Which commands a step, a request or a restart sends, and what the pool makes of the answers, is
the pool's (``batchppo.envs.workers.pool``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from multiprocessing import reduction
from typing import Any

import numpy as np

from batchppo.envs.workers.diagnosis import Diagnosis, HungError, call_words
from batchppo.envs.workers.local_worker import LocalWorker
from batchppo.envs.workers.protocol import CMD_PIPE, spin_acquire
from batchppo.envs.workers.worker_processes import PARENT_SLOT, WorkerProcesses

__all__ = ["Channels"]

_POLL_S = 0.05  # how often a blocked wait checks that the other side is alive


class Channels:
    """The parent's ends of every slot's command words, semaphores and pipe.

    Args:
        processes: The pool's worker processes.
        diagnosis: What a dead worker becomes (``dead``) and how workers are named.
        spin_s: Seconds the parent spins on a worker's done semaphore before blocking.
        step_timeout: Seconds a worker may take to answer a command (None: no limit).

    Attributes:
        parent: The slot of the envs the calling process steps (None: the workers step all).
        cmd: The command words in shared memory, one per worker (set by ``attach``).
        status: The status words, one per worker, that answer a step (set by ``attach``).
    """

    def __init__(
        self,
        processes: WorkerProcesses,
        diagnosis: Diagnosis,
        spin_s: float,
        step_timeout: float | None,
    ):
        self._processes = processes
        self._diagnosis = diagnosis
        self._spin = spin_s
        self._step_timeout = step_timeout
        self._hard_deadline: float | None = None  # of the command in flight (step_timeout)
        self.parent: LocalWorker | None = None
        self.cmd: np.ndarray | None = None
        self.status: np.ndarray | None = None

    def attach(self, views: dict[str, Any]) -> None:
        """Takes the command and status words of the shared arrays' ``views``."""
        self.cmd, self.status = views["cmd"], views["status"]

    def start_clock(self) -> None:
        """Starts the ``step_timeout`` clock of the command being sent to the workers."""
        if self._step_timeout is not None:
            self._hard_deadline = time.monotonic() + self._step_timeout

    def send(self, slot: int, message: tuple) -> None:
        """Wakes worker ``slot`` for a pipe command and sends it ``message``.

        Raises:
            WorkerDiedError: The worker died.
        """
        if slot == PARENT_SLOT:
            self.parent.send(message)
            return
        # Wake the worker first, then send: a large message must not fill the pipe while the
        # worker still sleeps on its semaphore.
        processes = self._processes
        processes.calls[slot] = call_words(message)
        self.cmd[slot] = CMD_PIPE
        processes.cmd_sems[slot].release()
        try:
            processes.conns[slot].send(message)
        except (BrokenPipeError, OSError):
            raise self._diagnosis.dead(slot) from None

    def send_start(self, slot: int, start_message: tuple, buffer_fd: int) -> None:
        """Sends worker ``slot`` the start message, then the shared memory's descriptor.

        Raises:
            WorkerDiedError: The worker died.
        """
        processes = self._processes
        conn = processes.conns[slot]
        processes.calls[slot] = "its start (taking its rows of shared memory)"
        try:
            conn.send(start_message)
            reduction.send_handle(conn, buffer_fd, processes.procs[slot].pid)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._diagnosis.dead(slot) from None

    def ask_close(self) -> None:
        """Asks every live worker to close its envs and exit; never raises."""
        processes = self._processes
        for slot, proc in enumerate(processes.procs):
            if proc.is_alive():
                with contextlib.suppress(Exception):
                    self.cmd[slot] = CMD_PIPE
                    processes.cmd_sems[slot].release()
                    processes.conns[slot].send(("close",))

    def recv(self, slot: int, deadline: float | None = None, *, timed: bool = False) -> Any:
        """The next message of worker ``slot``.

        Args:
            slot: The worker.
            deadline: A ``*_wait`` timeout (monotonic); None waits for ever.
            timed: Bound the wait by the ``step_timeout`` clock of the command in flight
                (``start_clock``).

        Raises:
            WorkerDiedError: The worker died.
            HungError: ``timed`` and the ``step_timeout`` deadline passed.
            multiprocessing.TimeoutError: ``deadline`` passed.
        """
        if slot == PARENT_SLOT:  # it runs the message now (untimed)
            return self.parent.recv()
        conn, proc = self._processes.conns[slot], self._processes.procs[slot]
        hard = self._hard_deadline if timed else None
        while not conn.poll(_POLL_S):
            if not proc.is_alive():
                raise self._diagnosis.dead(slot)
            if hard is not None and time.monotonic() > hard:
                raise HungError(slot)
            if deadline is not None and time.monotonic() > deadline:
                raise mp.TimeoutError(f"{self._diagnosis.describe(slot)} did not answer in time.")
        try:
            return conn.recv()
        except (EOFError, OSError):
            raise self._diagnosis.dead(slot) from None

    def start_step(self, command: int) -> None:
        """Starts the ``step_timeout`` clock and wakes every slot for a step, ``command`` its
        command word (the parent's share steps when its answer is asked for)."""
        self.start_clock()
        if self.parent is not None:
            self.parent.start_step(command)
        cmd, calls = self.cmd, self._processes.calls
        for slot, sem in enumerate(self._processes.cmd_sems):
            calls[slot] = "a step"
            cmd[slot] = command
            sem.release()

    def wait_done(self, slot: int, deadline: float | None) -> None:
        """Waits for worker ``slot`` to answer the step in flight (its status word is then set).

        Raises:
            WorkerDiedError: The worker died.
            HungError: The ``step_timeout`` deadline passed.
            multiprocessing.TimeoutError: ``deadline`` passed.
        """
        done = self._processes.done_sems[slot]
        if spin_acquire(done, self._spin):
            return
        acquire = done.acquire
        proc = self._processes.procs[slot]
        hard = self._hard_deadline
        while not acquire(True, _POLL_S):
            if not proc.is_alive():
                raise self._diagnosis.dead(slot)
            if hard is not None and time.monotonic() > hard:
                raise HungError(slot)
            if deadline is not None and time.monotonic() > deadline:
                raise mp.TimeoutError(
                    f"step_wait timed out waiting for {self._diagnosis.describe(slot)}; call "
                    "step_wait again to keep waiting."
                )

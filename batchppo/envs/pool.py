"""WorkerPool: the worker processes under a [`BatchEnv`][batchppo.envs.BatchEnv].

A pool owns ``W`` worker processes (``worker_main``), each stepping a contiguous range of envs, and
everything that reaches them: their semaphores, pipes and stack pipes, the read end of the
parent-alive pipe, and every word of the protocol (``batchppo.envs.protocol``): the command words of
the shared memory and the pipe messages. It starts them (``WorkerPool.start``, then
``WorkerPool.connect`` once the shared memory is laid out), steps them, sends them the requests of
the Gymnasium API (reset, call, set_attr) and restarts and gathers the answers, tells when one died
or hung, kills a hung one after asking it for its Python stacks, respawns one (restarts) and stops
them all (``WorkerPool.stop``, which never hangs). With ``step_in_parent`` the envs that the
calling process steps are one more slot, a ``LocalWorker`` that answers as a worker does, so the
batch env talks to every slot alike.

The pool does not decide what a failure means for the batch env: a worker that dies or hangs is
reported to the ``on_broken`` callback given at construction (the batch env is then broken); the
restart policy (``batchppo.envs.restarts``), the Gymnasium API and the shared arrays stay above it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing as mp
import os
import select
import signal
import time
from collections.abc import Callable
from multiprocessing import reduction
from typing import Any

import cloudpickle
import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from batchppo.envs import processes as _processes
from batchppo.envs import worker as _worker
from batchppo.envs.batch_transform import BatchTransform
from batchppo.envs.errors import EnvTimeoutError, WorkerDiedError, error_from_report
from batchppo.envs.local_worker import LocalWorker
from batchppo.envs.protocol import (
    CMD_PIPE,
    CMD_STEP,
    CMD_STEP_INFO,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_RESTART,
    spin_acquire,
)
from batchppo.envs.shared_arrays import SharedArrays
from batchppo.envs.stderr_tail import StderrTails

__all__ = ["HungError", "StepAnswers", "WorkerPool", "check_step_timeout", "split_envs"]

# The slot of the envs the calling process steps (``step_in_parent``): before worker 0's, as its
# envs come first.
_PARENT = -1

# The slots' answers to a step: the first error one reported (or None), their batched infos as
# (first env, count, info), the error reports of envs that raised in restartable slots as (slot,
# reports), and (slot, why) of each worker that died or was killed as hung.
StepAnswers = tuple[
    BaseException | None,
    list[tuple[int, int, dict[str, Any]]],
    list[tuple[int, list[dict[str, Any]]]],
    list[tuple[int, str]],
]


@dataclasses.dataclass(frozen=True)
class _PartialStep:
    """What the slots have answered of the step in flight, kept when a wait on it timed out
    so that the next wait waits only on the others.

    Attributes:
        answered: The slots before slot ``answered`` have answered (the workers' done
            semaphores are taken).
        answers: What they returned (see ``StepAnswers``).
    """

    answered: int
    answers: StepAnswers


_POLL_S = 0.05  # how often a blocked wait checks that the other side is alive
# How long a hung worker gets to write its stacks after SIGUSR1, and the quiet gap that ends
# the dump (faulthandler writes it in many small writes).
_STACK_WAIT_S = 2.0
_STACK_QUIET_S = 0.2


def split_envs(
    num_envs: int, num_workers: int | None, envs_per_worker: int | None, step_in_parent: bool
) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """How a batch env's envs are shared out: ``K`` envs per slot, the parent's slot first.

    Args:
        num_envs: The envs of the batch.
        num_workers: Units that step envs (workers, plus the parent with ``step_in_parent``);
            None: the CPUs available.
        envs_per_worker: Envs per unit ``K``; None: ``ceil(num_envs / num_workers)``.
        step_in_parent: Whether the calling process steps the first ``K`` envs.

    Returns:
        ``(ranges, parent_envs)``: ``(start, stop)`` of each worker's envs, and of the parent's
        (None without ``step_in_parent``).

    Raises:
        ValueError: No envs, or a count that is not a positive int or None.
    """
    if num_envs == 0:
        raise ValueError("BatchEnv needs at least one env function; got an empty list.")
    for name, value in (("num_workers", num_workers), ("envs_per_worker", envs_per_worker)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive int or None; got {value!r}.")
    per = envs_per_worker or math.ceil(num_envs / (num_workers or _processes.available_cpus()))
    ranges = [(i, min(i + per, num_envs)) for i in range(0, num_envs, per)]
    return ranges, ranges.pop(0) if step_in_parent else None


def check_step_timeout(step_timeout: float | None) -> float | None:
    """``step_timeout`` as a float (None: no limit).

    Raises:
        ValueError: Not a number of seconds > 0 (nor None).
    """
    if step_timeout is not None and (
        isinstance(step_timeout, bool)
        or not isinstance(step_timeout, (int, float))
        or not 0 < step_timeout < math.inf
    ):
        raise ValueError(
            f"step_timeout must be a number of seconds > 0, or None to wait for ever; got "
            f"{step_timeout!r}."
        )
    return None if step_timeout is None else float(step_timeout)


class HungError(Exception):
    """Worker ``slot`` did not answer within the pool's ``step_timeout``.

    Raised by the pool's timed waits; ``WorkerPool.hung_error`` turns the hung workers into an
    [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError].
    """

    def __init__(self, slot: int):
        super().__init__(slot)
        self.slot = slot


class WorkerPool:
    """The worker processes of a batch env: start, messages, death, hangs, respawn, stop.

    Its slots are ``0 .. W - 1``, the workers, and with ``parent_envs`` a slot before them for the
    envs that the calling process steps (a ``LocalWorker``); ``slots`` lists them in env order.
    The messages, answers and errors of every slot take the same form.

    Args:
        start_method: The multiprocessing start method of the workers (forkserver or spawn).
        ranges: ``(start, stop)`` of the envs of each worker, in slot order.
        parent_envs: ``(0, K)``: the envs the calling process steps itself; None for none.
        daemon: The workers' ``daemon`` flag.
        spin_s: Seconds the parent spins on a worker's done semaphore before blocking.
        worker_spin_s: Seconds a worker spins for its next command before blocking.
        step_timeout: Seconds a worker may take to answer a command (None: no limit); with
            one, each worker gets a stack pipe that its ``faulthandler`` writes to on
            ``SIGUSR1``.
        on_broken: Called with a one-line reason when a worker is found dead or is killed
            as hung: the batch env above can no longer use the pool as it is.

    Raises:
        RuntimeError: This Python cannot start workers without running an unguarded main script
            again (see ``process_class``).
    """

    def __init__(
        self,
        start_method: str,
        ranges: list[tuple[int, int]],
        *,
        parent_envs: tuple[int, int] | None,
        daemon: bool,
        spin_s: float,
        worker_spin_s: float,
        step_timeout: float | None,
        on_broken: Callable[[str], None],
    ):
        self._ctx = ctx = mp.get_context(start_method)
        self._forkserver = ctx.get_start_method() == "forkserver"
        self._ranges = ranges
        self._parent_envs = parent_envs
        self._parent: LocalWorker | None = None  # built by ``start``
        self._first_slot = _PARENT if parent_envs is not None else 0
        # Decided before any env is built: this may refuse the main script.
        self._process_class = (
            _processes.process_class(ctx, import_main=not _processes.main_would_rerun_caller())
            if ranges
            else None
        )
        self._daemon = daemon
        self._spin = spin_s
        self._worker_spin = worker_spin_s
        self._step_timeout = step_timeout
        self._on_broken = on_broken
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._cmd_sems: list[Any] = []
        self._done_sems: list[Any] = []
        self._stacks: list[Any] = []  # read ends of the workers' stack pipes (step_timeout)
        self._alive_r: Any = None
        self._alive_w: Any = None
        self._payloads: list[bytes] = []
        # Each slot's answer to the request in flight, kept when a wait on it timed out.
        self._answers: dict[int, tuple[str, Any]] = {}
        self._start_message: tuple = ()
        self._buffer_fd: int | None = None
        self._cmd: np.ndarray | None = None  # the command words in shared memory
        self._status: np.ndarray | None = None  # the status words
        self._hard_deadline: float | None = None  # of the command in flight (step_timeout)
        # Set when a wait on the step in flight times out; the next wait takes it.
        self._partial: _PartialStep | None = None
        self._stderr = StderrTails()  # the workers' stderr: forwarded, last lines kept
        self._calls: list[str] = []  # per worker: what it was asked last, for death reports
        self.hung_reasons: dict[int, str] = {}  # slot -> why, of the workers just killed
        self.broken_reason = ""  # of the last worker found dead or killed

    # ------------------------------------------------------------------ life cycle

    @property
    def size(self) -> int:
        """How many worker processes the pool holds (started so far, during start-up)."""
        return len(self._procs)

    @property
    def pids(self) -> tuple[int, ...]:
        """The pid of each worker's process, in slot order (a dead worker's until respawned)."""
        return tuple(proc.pid for proc in self._procs)

    @property
    def slots(self) -> range:
        """Every slot, in the order of their envs (the parent's first, when it steps some)."""
        return range(self._first_slot, len(self._ranges))

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` of each worker's envs, in slot order (a new list)."""
        return list(self._ranges)

    @property
    def parent_envs(self) -> tuple[int, int] | None:
        """``(0, K)``: the envs the calling process steps; None when the workers step them all."""
        return self._parent_envs

    @property
    def parent_count(self) -> int:
        """How many envs the calling process steps now (0 before its start, after ``stop``)."""
        return self._parent.count if self._parent is not None else 0

    def envs_of(self, slot: int) -> tuple[int, int]:
        """``(start, stop)`` of the envs of ``slot``."""
        return self._parent_envs if slot == _PARENT else self._ranges[slot]

    def start(
        self,
        env_fns: list[Callable[[], gymnasium.Env]],
        observation_mode: str | tuple[gymnasium.Space, gymnasium.Space],
        obs_rule: str,
        autoreset_mode: AutoresetMode,
        restartable: bool,
        transform: Any,
    ) -> list[dict[str, Any]]:
        """Has every slot build its envs (the parent's share first, then the workers); returns
        what each says of its envs.

        The first half of a slot's start: the shared memory is laid out only once env 0's spaces
        are known, and ``connect`` hands it over.

        Args:
            env_fns: The batch env's env functions; each worker gets its share (kept to respawn
                it).
            observation_mode: The batch env's (see ``check_async_options``).
            obs_rule: How the envs' observation spaces must match (see ``check_spaces``).
            autoreset_mode: The batch env's autoreset mode.
            restartable: Whether envs are restarted: their groups keep their env functions, and
                workers may be respawned (the parent-alive pipe's read end is kept for them).
            transform: The batch env's ``transform`` argument.

        Returns:
            Each slot's report of its envs (``describe_envs``), in env order.

        Raises:
            Exception: What building an env raised (the parent's share, else the first worker's
                to fail), with the env index and where it ran.
        """
        reports = []
        if self._parent_envs is not None:
            self._parent = LocalWorker(
                env_fns[slice(*self._parent_envs)],
                observation_mode,
                obs_rule,
                autoreset_mode,
                restartable,
                transform,
            )
            reports.append(self._parent.build())
        if self._ranges:
            payloads = [
                cloudpickle.dumps(
                    (env_fns[start:stop], obs_rule, autoreset_mode, restartable, transform)
                )
                for start, stop in self._ranges
            ]
            reports += self._start_workers(payloads, restartable)
        return reports

    def _start_workers(self, payloads: list[bytes], restartable: bool) -> list[dict[str, Any]]:
        """Starts the worker processes with their cloudpickled arguments (see ``worker_main``);
        returns what each says of its envs."""
        ctx = self._ctx
        if ctx.get_start_method() == "forkserver":
            # Workers fork from a server that already imported these (fast start). Not
            # ``__main__``: the server must not run a main script without a main guard.
            ctx.set_forkserver_preload(["numpy", "gymnasium", "batchppo.envs.worker"])
            _processes.start_forkserver()  # SIGTERM ignored: see its docstring
        self._alive_r, self._alive_w = ctx.Pipe(duplex=False)
        self._payloads = payloads
        for slot in range(len(self._ranges)):
            self._spawn(slot)
        if not restartable:  # a respawned worker needs the read end; otherwise it can go
            self._alive_r.close()
        error, reports = None, []
        for slot in range(len(self._ranges)):
            kind, data = self._recv(slot)
            if kind == "error" and error is None:
                error = self.remote_error(slot, data)
            reports.append(data)
        if error is not None:
            raise error
        return reports

    def connect(
        self,
        spaces: tuple[gymnasium.Space, gymnasium.Space],
        arrays: SharedArrays,
        transform: BatchTransform | None,
        wrap: bool,
    ) -> None:
        """Hands every slot the shared memory and what to make of it (the second half of its
        start); each checks its envs' spaces and takes its rows.

        Args:
            spaces: The ``(observation, action)`` spaces every env must match.
            arrays: The shared buffer and its arrays, the command and status words (one per
                worker) among them.
            transform: The batch transform the slots apply to their envs, or None.
            wrap: Whether each env gets the per-env stack of the ``TransformFactory`` given to
                ``start``.

        Raises:
            SpaceMismatchError: An env's spaces do not match env 0's (with its index).
        """
        # Kept for respawned workers.
        start_message = ("start", spaces, arrays.layout, arrays.discrete, transform, wrap)
        self._start_message = start_message
        self._buffer_fd = arrays.fd
        self._cmd, self._status = arrays.views["cmd"], arrays.views["status"]
        if self._parent is not None:
            self._parent.connect(start_message, arrays.views)
        if not self._ranges:
            return
        for slot in range(len(self._ranges)):
            self._send_start(slot)
        error = None
        for slot in range(len(self._ranges)):
            kind, data = self._recv(slot)
            if kind == "error" and error is None:
                error = self.remote_error(slot, data)
        if error is not None:
            raise error
        # Every worker has opened the semaphores (it answered): their names can go, so none
        # is left behind however this process ends.
        _processes.unlink_semaphores(self._cmd_sems + self._done_sems)

    def _send_start(self, slot: int) -> None:
        """Sends worker ``slot`` the start message, then the shared memory's descriptor."""
        conn = self._conns[slot]
        self._calls[slot] = "its start (taking its rows of shared memory)"
        try:
            conn.send(self._start_message)
            reduction.send_handle(conn, self._buffer_fd, self._procs[slot].pid)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._dead(slot) from None

    def _spawn(self, slot: int) -> None:
        """Starts the process of worker ``slot`` with its own semaphores and pipe.

        Used at start-up and to respawn a dead worker: the new process takes the place of the
        old one. Its first message on the pipe reports its envs (or the error that building
        them raised).
        """
        ctx = self._ctx
        cmd_sem, done_sem = ctx.Semaphore(0), ctx.Semaphore(0)
        parent_conn, child_conn = ctx.Pipe()
        stack_r, stack_w = ctx.Pipe(duplex=False) if self._step_timeout else (None, None)
        err_r, err_w = ctx.Pipe(duplex=False)
        proc = self._process_class(
            target=_worker.worker_main,
            name=f"batchppo-env-worker-{slot}",
            args=(
                slot,
                self._payloads[slot],
                self._ranges[slot][0],
                cmd_sem,
                done_sem,
                child_conn,
                self._alive_r,
                self._worker_spin,
                stack_w,
                err_w,
            ),
            daemon=self._daemon,
        )
        try:
            proc.start()
        finally:
            child_conn.close()
            err_w.close()
            if stack_w is not None:
                stack_w.close()
        self._stderr.add(slot, err_r)
        if slot < len(self._procs):
            self._calls[slot] = "its start (building its envs)"
            self._procs[slot], self._conns[slot] = proc, parent_conn
            self._cmd_sems[slot], self._done_sems[slot] = cmd_sem, done_sem
            if self._stacks[slot] is not None:
                self._stacks[slot].close()
            self._stacks[slot] = stack_r
        else:
            self._calls.append("its start (building its envs)")
            self._procs.append(proc)
            self._conns.append(parent_conn)
            self._cmd_sems.append(cmd_sem)
            self._done_sems.append(done_sem)
            self._stacks.append(stack_r)

    def respawn(self, slot: int) -> None:
        """Replaces dead worker ``slot`` by a new process that builds its envs again.

        The new worker's start (building its envs, then taking their rows) is bounded by
        ``step_timeout`` counted from its spawn.

        Raises:
            EnvTimeoutError: The new worker did not finish its start in time (it is killed).
            WorkerDiedError: The new worker died.
            Exception: What building an env raised.
        """
        self._procs[slot].join(1.0)
        self._conns[slot].close()
        self._spawn(slot)
        self._start_clock()
        for _ in range(2):  # its envs are built; then they took their rows
            try:
                kind, data = self._recv(slot, timed=True)
            except HungError:
                raise self.hung_error([slot], "a respawn (building its envs again)") from None
            if kind == "error":
                raise self.remote_error(slot, data)
            if kind == "built":
                self._send_start(slot)
        _processes.unlink_semaphores([self._cmd_sems[slot], self._done_sems[slot]])

    def stop(self, timeout: float, terminate: bool, ask: bool) -> None:
        """Stops every worker: asks them to close, then terminates, then kills. Never hangs.

        Args:
            timeout: Seconds the workers get to close their envs and exit on their own.
            terminate: Skip waiting; terminate at once.
            ask: Send each live worker the close command first (unless ``terminate``).
        """
        procs = self._procs
        deadline = time.monotonic() + (0.0 if terminate else timeout)
        if not terminate and ask:
            for slot, proc in enumerate(procs):
                if proc.is_alive():
                    with contextlib.suppress(Exception):
                        self._cmd[slot] = CMD_PIPE
                        self._cmd_sems[slot].release()
                        self._conns[slot].send(("close",))
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for escalate in ("terminate", "kill"):
            alive = [p for p in procs if p.is_alive()]
            if not alive:
                break
            for proc in alive:
                with contextlib.suppress(Exception):
                    getattr(proc, escalate)()
            end = time.monotonic() + 1.0
            for proc in alive:
                proc.join(max(0.0, end - time.monotonic()))
        for conn in self._conns + [s for s in self._stacks if s is not None]:
            conn.close()
        self._stderr.close()
        for end in (self._alive_w, self._alive_r):
            with contextlib.suppress(Exception):
                end.close()
        if self._parent is not None:
            self._parent.close()

    # ------------------------------------------------------------------ messages

    def _start_clock(self) -> None:
        """Starts the ``step_timeout`` clock of the command being sent to the workers."""
        if self._step_timeout is not None:
            self._hard_deadline = time.monotonic() + self._step_timeout

    def _send(self, slot: int, message: tuple) -> None:
        """Wakes worker ``slot`` for a pipe command and sends it ``message``.

        Raises:
            WorkerDiedError: The worker died.
        """
        if slot == _PARENT:
            self._parent.send(message)
            return
        # Wake the worker first, then send: a large message must not fill the pipe while the
        # worker still sleeps on its semaphore.
        self._calls[slot] = _call_words(message)
        self._cmd[slot] = CMD_PIPE
        self._cmd_sems[slot].release()
        try:
            self._conns[slot].send(message)
        except (BrokenPipeError, OSError):
            raise self._dead(slot) from None

    def _recv(self, slot: int, deadline: float | None = None, *, timed: bool = False) -> Any:
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
        if slot == _PARENT:  # it runs the message now (untimed)
            return self._parent.recv()
        conn, proc = self._conns[slot], self._procs[slot]
        hard = self._hard_deadline if timed else None
        while not conn.poll(_POLL_S):
            if not proc.is_alive():
                raise self._dead(slot)
            if hard is not None and time.monotonic() > hard:
                raise HungError(slot)
            if deadline is not None and time.monotonic() > deadline:
                raise mp.TimeoutError(f"{self.describe(slot)} did not answer in time.")
        try:
            return conn.recv()
        except (EOFError, OSError):
            raise self._dead(slot) from None

    def start_step(self, want_info: bool) -> None:
        """Starts the ``step_timeout`` clock and wakes every worker for a step (its actions are in
        shared memory) that reports the envs' infos when ``want_info``; the parent's share steps
        in ``wait_step``."""
        command = CMD_STEP_INFO if want_info else CMD_STEP
        if self._step_timeout is not None:
            self._hard_deadline = time.monotonic() + self._step_timeout
        if self._parent is not None:
            self._parent.start_step(command)
        cmd = self._cmd
        for slot, sem in enumerate(self._cmd_sems):
            self._calls[slot] = "a step"
            cmd[slot] = command
            sem.release()

    def _wait_done(self, slot: int, deadline: float | None) -> None:
        if spin_acquire(self._done_sems[slot], self._spin):
            return
        acquire = self._done_sems[slot].acquire
        proc = self._procs[slot]
        hard = self._hard_deadline
        while not acquire(True, _POLL_S):
            if not proc.is_alive():
                raise self._dead(slot)
            if hard is not None and time.monotonic() > hard:
                raise HungError(slot)
            if deadline is not None and time.monotonic() > deadline:
                raise mp.TimeoutError(
                    f"step_wait timed out waiting for {self.describe(slot)}; call "
                    "step_wait again to keep waiting."
                )

    def wait_step(self, deadline: float | None, restartable: bool) -> StepAnswers:
        """Gathers the workers' answers to the step in flight (see ``start_step``).

        The parent's share is stepped first, then the workers are waited on. Only the slots that
        have not answered yet are: a wait that times out keeps which slots answered and what they
        returned, and the next call goes on from there and returns it all.

        Args:
            deadline: A ``step_wait`` timeout (monotonic); None waits for ever.
            restartable: A worker that dies or hangs is listed among the dead (its envs are
                to be restarted) instead of raising.

        Returns:
            What the workers answered (see ``StepAnswers``).

        Raises:
            WorkerDiedError: A worker died (not ``restartable``).
            EnvTimeoutError: Workers did not answer within ``step_timeout`` and were killed
                (not ``restartable``).
            multiprocessing.TimeoutError: ``deadline`` passed; the step stays in flight.
        """
        partial, self._partial = self._partial, None
        if partial is not None:  # an earlier wait timed out: the slots before `first` answered
            first = partial.answered
            error, parts, failures, dead = partial.answers
        else:
            first, error, parts, failures, dead = self._first_slot, None, [], [], []
        self.hung_reasons = {}
        hung: list[int] = []
        slot = first
        try:
            for slot in range(first, len(self._procs)):
                try:
                    reported = self._gather(slot, deadline, parts, failures)
                    error = error or reported
                except WorkerDiedError:
                    if not restartable:
                        raise
                    dead.append((slot, self.broken_reason))
                except HungError:
                    hung.append(slot)
        except mp.TimeoutError:
            # Worker `slot` timed out before its answer was taken: the next wait starts there.
            self._partial = _PartialStep(slot, (error, parts, failures, dead))
            raise
        if hung:
            timeout = self.hung_error(hung, "a step")
            if not restartable:
                raise timeout
            dead += [(slot, self.hung_reasons[slot]) for slot in hung]
        return error, parts, failures, dead

    def _gather(
        self,
        slot: int,
        deadline: float | None,
        parts: list[tuple[int, int, dict[str, Any]]],
        failures: list[tuple[int, list[dict[str, Any]]]],
    ) -> BaseException | None:
        """Waits for slot ``slot``'s step; adds its infos to ``parts``, its failed envs'
        reports (restartable slots) to ``failures``; returns the error it reported, if any.

        Raises:
            WorkerDiedError: The worker died.
            HungError: The ``step_timeout`` deadline passed.
            multiprocessing.TimeoutError: ``deadline`` passed.
        """
        if slot == _PARENT:  # the parent's share steps now
            status, message = self._parent.step()
        else:
            self._wait_done(slot, deadline)
            status = self._status[slot]
            message = None if status == STATUS_OK else self._recv(slot)
        if status == STATUS_OK:
            return None
        start, stop = self.envs_of(slot)
        if status == STATUS_ERROR:
            return self.remote_error(slot, message[1])
        if status == STATUS_RESTART and message[0] == "failures":
            _, reports, message = message
            failures.append((slot, reports))
        if isinstance(message, tuple):  # ("error", report): the infos could not be sent
            return self.remote_error(slot, message[1])
        if message:
            parts.append((start, stop - start, message))
        return None

    # ------------------------------------------------------------------ requests

    def send_reset(
        self, seeds: list[int | None], options: dict[str, Any] | None, mask: np.ndarray | None
    ) -> None:
        """Asks every slot to reset its envs: ``seeds`` and ``mask`` (or None) hold one entry per
        env of the batch, ``options`` goes to every env. ``wait_answers`` gathers the infos."""

        def message(start: int, stop: int) -> tuple:
            rows = None if mask is None else mask[start:stop].tolist()
            return ("reset", seeds[start:stop], options, rows)

        self._send_all(message)

    def send_call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> None:
        """Asks every slot to call method ``name`` of its envs (or read attribute ``name``);
        ``wait_answers`` gathers one result per env."""
        self._send_all(lambda start, stop: ("call", name, args, kwargs))

    def send_set_attr(self, name: str, values: list[Any]) -> None:
        """Asks every slot to set attribute ``name`` of its envs, one value per env of the batch
        in ``values``; ``wait_answers`` waits for them."""
        self._send_all(lambda start, stop: ("set_attr", name, values[start:stop]))

    def _send_all(self, message: Callable[[int, int], tuple]) -> None:
        """Sends each slot ``message(start, stop)`` of its envs, the ``step_timeout`` clock
        started; the answers gathered so far are dropped."""
        self._answers = {}
        self._start_clock()
        for slot in self.slots:
            self._send(slot, message(*self.envs_of(slot)))

    def wait_answers(
        self, timeout: float | None, caller: str, what: str
    ) -> tuple[list[tuple[int, int, Any]], BaseException | None]:
        """Gathers every slot's answer to the request in flight (the parent's share runs it now).

        Only the slots that have not answered yet are waited on: a wait that times out keeps the
        answers, and the next call goes on from there.

        Args:
            timeout: Seconds to wait (the caller's ``*_wait`` timeout); None waits for ever.
            caller: The ``*_wait`` method, for the message of a timeout.
            what: The request, for the message of hung workers (``"reset"``).

        Returns:
            ``([(start, stop, answer), ...], error)``: each slot's answer in env order, and the
            first error a slot answered (the envs' exception, naming where it ran) or None.

        Raises:
            multiprocessing.TimeoutError: ``timeout`` passed; the request stays in flight.
            EnvTimeoutError: Workers did not answer within ``step_timeout`` (they are killed).
            WorkerDiedError: A worker died.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        answers = self._answers
        hung = []
        for slot in self.slots:
            if slot in answers:
                continue
            try:
                answers[slot] = self._recv(slot, deadline, timed=True)
            except HungError:
                hung.append(slot)
                continue
            if slot == _PARENT and deadline is not None and time.monotonic() > deadline:
                # As AsyncVectorEnv: the call took longer than `timeout` (here the parent's own
                # share did); it stays pending, and the next wait returns its result.
                raise mp.TimeoutError(
                    f"The call to `{caller}` has timed out after {timeout} second(s) (the envs "
                    "stepped in this process took that long); it stays pending."
                )
        if hung:
            raise self.hung_error(hung, f"a {what}")
        self._answers = {}
        results, error = [], None
        for slot, (kind, data) in sorted(answers.items()):
            if kind == "error":
                error = error or self.remote_error(slot, data)
            results.append((*self.envs_of(slot), data))
        return results, error

    def restart(
        self, targets: dict[int, list[int]], seeds: dict[int, int | None]
    ) -> dict[int, dict[str, Any]]:
        """Has each slot of ``targets`` restart those of its envs (rebuild the ones that raised,
        reset them all with their seeds); their reset infos, by env.

        The wait is bounded by ``step_timeout``, counted from the command; the parent's share is
        not timed, and its error is raised at once.

        Args:
            targets: Slot -> the global indices of its envs to restart.
            seeds: Env index -> the seed of its first reset.

        Raises:
            EnvTimeoutError: A worker did not answer its restart in time (it is killed).
            Exception: What rebuilding or resetting an env raised.
        """
        self._start_clock()
        for slot, indices in targets.items():
            start = self.envs_of(slot)[0]
            rows = [i - start for i in indices]
            self._send(slot, ("restart", rows, [seeds[i] for i in indices]))
        infos: dict[int, dict[str, Any]] = {}
        hung: list[int] = []
        error: BaseException | None = None
        for slot, indices in targets.items():
            try:
                kind, result = self._recv(slot, timed=True)
            except HungError:
                hung.append(slot)
                continue
            if kind == "error" and slot == _PARENT:
                raise result from None
            if kind == "error":
                error = error or self.remote_error(slot, result)
            else:
                infos.update(zip(indices, result, strict=True))
        if hung:
            envs = [i for slot in hung for i in targets[slot]]
            raise self.hung_error(hung, f"a restart of {_env_list(envs)}")
        if error is not None:
            raise error
        return infos

    # ------------------------------------------------------------------ failures

    def describe(self, slot: int) -> str:
        """``worker 1 (pid 123, envs 2..3)``: worker ``slot``, for messages."""
        start, stop = self._ranges[slot]
        proc = self._procs[slot]
        return f"worker {slot} (pid {proc.pid}, envs {start}..{stop - 1})"

    def _envs_of(self, slot: int) -> str:
        """``envs 2..3 (worker 1, pid 123)``: the envs of worker ``slot``, for messages."""
        start, stop = self._ranges[slot]
        envs = f"env {start}" if stop - start == 1 else f"envs {start}..{stop - 1}"
        return f"{envs} (worker {slot}, pid {self._procs[slot].pid})"

    def mark_broken(self, reason: str) -> None:
        """Reports the pool unusable as it is to ``on_broken``, ``reason`` saying why in one line:
        a worker died or hung, or a restart failed (answers may be left in the pipes)."""
        self.broken_reason = reason
        self._on_broken(reason)

    def _dead(self, slot: int) -> WorkerDiedError:
        """The error for worker ``slot``, found dead (its exit code or signal); reports it
        to ``on_broken``."""
        proc = self._procs[slot]
        proc.join(0.1)
        tail = self._stderr.tail(slot)
        last = f"; the last line it wrote to stderr: {tail[-1].strip()!r}" if tail else ""
        self.mark_broken(
            f"{self.describe(slot)} died ({_exit_words(proc.exitcode, self._forkserver)}) during "
            f"{self._calls[slot]}{last}"
        )
        lines = "".join(f"\n  {line}" for line in tail)
        more = f"\n[batchppo] worker {slot}'s last lines on stderr:{lines}" if tail else ""
        return WorkerDiedError(
            f"{self.broken_reason}. The batch env cannot continue; close it and build a new "
            f"one.{more}"
        )

    def remote_error(
        self, slot: int, report: dict[str, Any] | BaseException, note: str = ""
    ) -> BaseException:
        """The exception slot ``slot`` reported (see ``error_from_report``), naming the worker and
        its pid, or the parent. The parent's share answers with its envs' own exceptions, which
        are returned as they are; its failed envs' reports are rebuilt as a worker's."""
        if slot != _PARENT:
            return error_from_report(report, f"worker {slot} (pid {self._procs[slot].pid})", note)
        if isinstance(report, BaseException):
            return report
        return error_from_report(report, "the parent", note)

    def hung_error(self, slots: list[int], what: str) -> EnvTimeoutError:
        """Kills the workers ``slots`` that did not answer within ``step_timeout`` (after
        asking each for its Python stacks), reports them to ``on_broken`` and returns the
        error.

        Their reasons stay in ``hung_reasons`` (a step with restarts respawns them as dead workers
        and names them in its warnings).

        Args:
            slots: The hung workers.
            what: The command they did not answer, for the message (``"a step"``).
        """
        described = {slot: self.describe(slot) for slot in slots}
        stacks = self._dump_stacks(slots)
        for slot in slots:
            proc = self._procs[slot]
            with contextlib.suppress(Exception):
                proc.kill()
            proc.join(1.0)
        limit = f"step_timeout={self._step_timeout:g} s"
        self.hung_reasons = {  # one line, then the stacks
            slot: f"{described[slot]} did not answer {what} within {limit} (killed)\nIts "
            f"stacks, where it was stuck:\n{stacks[slot]}"
            for slot in slots
        }
        envs = "; ".join(self._envs_of(slot) for slot in slots)
        self.mark_broken(f"{envs} did not answer {what} within {limit} (killed)")
        where = "\n".join(
            f"Stacks of {described[slot]}, where it was stuck:\n{stacks[slot]}" for slot in slots
        )
        workers = "its worker was" if len(slots) == 1 else "their workers were"
        return EnvTimeoutError(
            f"{envs} did not answer {what} within {limit}, so {workers} killed and the batch "
            "env cannot continue (raise step_timeout, env_step_timeout in a config, if the env "
            f"is only slow).\n{where}"
        )

    def _dump_stacks(self, slots: list[int]) -> dict[int, str]:
        """Asks the workers ``slots`` for their threads' Python stacks (``SIGUSR1``, which their
        ``faulthandler`` answers on their stack pipes); the text of each."""
        for slot in slots:
            with contextlib.suppress(OSError):
                os.kill(self._procs[slot].pid, signal.SIGUSR1)
        end = time.monotonic() + _STACK_WAIT_S
        out = {}
        for slot in slots:
            text = _env_stacks(_read_until_quiet(self._stacks[slot].fileno(), end))
            out[slot] = text or "(none came: the worker did not answer SIGUSR1 either)"
        return out


def _env_list(indices: list[int]) -> str:
    """``env 2``, ``envs 2..3`` or ``envs [1, 4]``: env indices, for messages."""
    if len(indices) == 1:
        return f"env {indices[0]}"
    if indices == list(range(indices[0], indices[-1] + 1)):
        return f"envs {indices[0]}..{indices[-1]}"
    return f"envs {indices}"


def _call_words(message: tuple) -> str:
    """What a pipe command asks a worker, for the report of its death (``a call of 'render'``)."""
    kind = message[0]
    if kind == "call":
        return f"a call of {message[1]!r}"
    if kind == "set_attr":
        return f"set_attr of {message[1]!r}"
    if kind == "close":
        return "its close"
    return f"a {kind}"


def _exit_words(code: int | None, forkserver: bool) -> str:
    """A dead worker's exit status in words: its exit code, or the signal that killed it."""
    if code is None:
        return "its exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"killed by signal {name}"
    if code == 255 and forkserver:
        return (
            "exit code 255, also what multiprocessing reports for a worker whose fork server died"
        )
    return f"exit code {code}"


def _read_until_quiet(fd: int, end: float) -> str:
    """What arrives on ``fd`` until ``end`` (monotonic) or until it stays quiet for
    ``_STACK_QUIET_S`` after the first bytes; decoded, undecodable bytes replaced."""
    chunks: list[bytes] = []
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        wait = min(left, _STACK_QUIET_S) if chunks else left
        readable, _, _ = select.select([fd], [], [], wait)
        if not readable:
            if chunks:
                break
            continue
        data = os.read(fd, 65536)
        if not data:  # EOF: the worker is gone
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def _env_stacks(dump: str) -> str:
    """A worker's faulthandler dump without its parent-watch thread and without the frames
    of multiprocessing's start-up below ``worker_main``: the stacks that show the envs."""
    blocks = []
    for block in dump.strip().split("\n\n"):
        if "in _exit_when_parent_dies" in block:
            continue
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.endswith(" in worker_main"):
                lines = lines[: i + 1]
                break
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)

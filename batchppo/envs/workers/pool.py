"""WorkerPool: the worker processes under a [`BatchEnv`][batchppo.envs.BatchEnv], and the
conversations of the protocol with them.

A pool owns ``W`` worker processes, each stepping a contiguous range of envs, and every exchange of
the protocol (``batchppo.envs.workers.protocol``) with them: which command words and pipe messages a
start, a step, a request or a restart sends, and what it makes of the answers. It starts them
(``WorkerPool.start``, then ``WorkerPool.connect`` once the shared memory is laid out), steps them,
sends them the requests of the Gymnasium API (reset, call, set_attr) and restarts and gathers the
answers, bounding each wait by ``step_timeout``, respawns a dead one (restarts) and stops them all
(``WorkerPool.stop``, which never hangs). With ``step_in_parent`` the envs that the calling process
steps are one more slot, a ``LocalWorker`` that answers as a worker does, so the batch env talks to
every slot alike.

The pool composes three modules, one job each: the processes' life (start, respawn, stop, no
orphan) is ``batchppo.envs.workers.worker_processes``; sending commands and waiting for answers over
the semaphores, the shared command and status words and the pipes is
``batchppo.envs.workers.channels``; what a dead or hung worker or an env's exception becomes (typed
errors, stack dumps, one-line reasons) is ``batchppo.envs.workers.diagnosis``.

The pool does not decide what a failure means for the batch env: a worker that dies or hangs is
reported to the ``on_broken`` callback given at construction (the batch env is then broken); the
restart policy (``batchppo.envs.workers.restarts``), the Gymnasium API and the shared arrays stay
above it.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import cloudpickle
import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from batchppo.core.worker_options import WorkerOptions
from batchppo.envs.errors import WorkerDiedError
from batchppo.envs.stack.batch_transform import BatchTransform
from batchppo.envs.workers.channels import Channels
from batchppo.envs.workers.diagnosis import Diagnosis, HungError, env_list
from batchppo.envs.workers.local_worker import LocalWorker
from batchppo.envs.workers.protocol import (
    CMD_STEP,
    CMD_STEP_INFO,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_RESTART,
)
from batchppo.envs.workers.shared_arrays import SharedArrays
from batchppo.envs.workers.worker_processes import PARENT_SLOT as _PARENT
from batchppo.envs.workers.worker_processes import WorkerProcesses

__all__ = ["StepAnswers", "WorkerPool"]

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


class WorkerPool:
    """The worker processes of a batch env, and what they are told: start, step, requests,
    restarts, respawn, stop.

    Its slots are ``0 .. W - 1``, the workers, and with ``parent_envs`` a slot before them for the
    envs that the calling process steps (a ``LocalWorker``); ``slots`` lists them in env order.
    The messages, answers and errors of every slot take the same form.

    Args:
        start_method: The multiprocessing start method of the workers (forkserver or spawn).
        ranges: ``(start, stop)`` of the envs of each worker, in slot order.
        options: The batch env's [`WorkerOptions`][batchppo.envs.WorkerOptions] (kept as
            ``options``), of which the pool reads: ``spin_us``, how long the parent spins on a
            worker's done semaphore before blocking; ``worker_spin_us``, how long a worker spins
            for its next command; ``step_timeout``, the seconds a worker may take to answer a
            command (None: no limit; with one, each worker gets a stack pipe that its
            ``faulthandler`` writes to on ``SIGUSR1``). ``ranges`` and ``parent_envs`` are
            where its ``num_workers``, ``envs_per_worker`` and ``step_in_parent`` put the envs.
        parent_envs: ``(0, K)``: the envs the calling process steps itself; None for none.
        daemon: The workers' ``daemon`` flag.
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
        options: WorkerOptions,
        *,
        parent_envs: tuple[int, int] | None,
        daemon: bool,
        on_broken: Callable[[str], None],
    ):
        self.options = options
        step_timeout = options.step_timeout
        worker_spin_s = float(options.worker_spin_us) * 1e-6
        spin_s = float(options.spin_us) * 1e-6
        self._processes = processes = WorkerProcesses(
            start_method,
            ranges,
            daemon=daemon,
            worker_spin_s=worker_spin_s,
            stack_pipes=bool(step_timeout),
        )
        self._diagnosis = diagnosis = Diagnosis(processes, step_timeout, on_broken)
        self._channels = Channels(processes, diagnosis, spin_s, step_timeout)
        self._ranges = ranges
        self._parent_envs = parent_envs
        self._parent: LocalWorker | None = None  # built by ``start``
        self._first_slot = _PARENT if parent_envs is not None else 0
        # Each slot's answer to the request in flight, kept when a wait on it timed out.
        self._answers: dict[int, tuple[str, Any]] = {}
        self._start_message: tuple = ()
        self._buffer_fd: int | None = None
        # Set when a wait on the step in flight times out; the next wait takes it.
        self._partial: _PartialStep | None = None

    # ------------------------------------------------------------------ life cycle

    @property
    def size(self) -> int:
        """How many worker processes the pool holds (started so far, during start-up)."""
        return self._processes.size

    @property
    def pids(self) -> tuple[int, ...]:
        """The pid of each worker's process, in slot order (a dead worker's until respawned)."""
        return self._processes.pids

    @property
    def hung_reasons(self) -> dict[int, str]:
        """Slot -> why, of the workers just killed as hung (one line, then their stacks)."""
        return self._diagnosis.hung_reasons

    @property
    def broken_reason(self) -> str:
        """Why the last worker found dead or killed was (one line); ``""`` before any."""
        return self._diagnosis.broken_reason

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
            self._parent = self._channels.parent = LocalWorker(
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
        self._processes.launch(payloads, restartable)
        error, reports = None, []
        for slot in range(len(self._ranges)):
            kind, data = self._channels.recv(slot)
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
        self._channels.attach(arrays.views)
        if self._parent is not None:
            self._parent.connect(start_message, arrays.views)
        if not self._ranges:
            return
        for slot in range(len(self._ranges)):
            self._channels.send_start(slot, self._start_message, self._buffer_fd)
        error = None
        for slot in range(len(self._ranges)):
            kind, data = self._channels.recv(slot)
            if kind == "error" and error is None:
                error = self.remote_error(slot, data)
        if error is not None:
            raise error
        # Every worker has opened the semaphores (it answered): their names can go, so none
        # is left behind however this process ends.
        self._processes.unlink_semaphores()

    def respawn(self, slot: int) -> None:
        """Replaces dead worker ``slot`` by a new process that builds its envs again.

        The new worker's start (building its envs, then taking their rows) is bounded by
        ``step_timeout`` counted from its spawn.

        Raises:
            EnvTimeoutError: The new worker did not finish its start in time (it is killed).
            WorkerDiedError: The new worker died.
            Exception: What building an env raised.
        """
        self._processes.replace(slot)
        self._channels.start_clock()
        for _ in range(2):  # its envs are built; then they took their rows
            try:
                kind, data = self._channels.recv(slot, timed=True)
            except HungError:
                raise self._diagnosis.hung_error(
                    [slot], "a respawn (building its envs again)"
                ) from None
            if kind == "error":
                raise self.remote_error(slot, data)
            if kind == "built":
                self._channels.send_start(slot, self._start_message, self._buffer_fd)
        self._processes.unlink_semaphores([slot])

    def stop(self, timeout: float, terminate: bool, ask: bool) -> None:
        """Stops every worker: asks them to close, then terminates, then kills. Never hangs.

        Args:
            timeout: Seconds the workers get to close their envs and exit on their own.
            terminate: Skip waiting; terminate at once.
            ask: Send each live worker the close command first (unless ``terminate``).
        """
        deadline = time.monotonic() + (0.0 if terminate else timeout)
        if not terminate and ask:
            self._channels.ask_close()
        self._processes.stop(deadline)
        if self._parent is not None:
            self._parent.close()

    # ------------------------------------------------------------------ messages

    def start_step(self, want_info: bool) -> None:
        """Starts the ``step_timeout`` clock and wakes every worker for a step (its actions are in
        shared memory) that reports the envs' infos when ``want_info``; the parent's share steps
        in ``wait_step``."""
        self._channels.start_step(CMD_STEP_INFO if want_info else CMD_STEP)

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
        self._diagnosis.hung_reasons = {}
        hung: list[int] = []
        slot = first
        try:
            for slot in range(first, self._processes.size):
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
            timeout = self._diagnosis.hung_error(hung, "a step")
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
            self._channels.wait_done(slot, deadline)
            status = self._channels.status[slot]
            message = None if status == STATUS_OK else self._channels.recv(slot)
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
        self._channels.start_clock()
        for slot in self.slots:
            self._channels.send(slot, message(*self.envs_of(slot)))

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
                answers[slot] = self._channels.recv(slot, deadline, timed=True)
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
            raise self._diagnosis.hung_error(hung, f"a {what}")
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
        self._channels.start_clock()
        for slot, indices in targets.items():
            start = self.envs_of(slot)[0]
            rows = [i - start for i in indices]
            self._channels.send(slot, ("restart", rows, [seeds[i] for i in indices]))
        infos: dict[int, dict[str, Any]] = {}
        hung: list[int] = []
        error: BaseException | None = None
        for slot, indices in targets.items():
            try:
                kind, result = self._channels.recv(slot, timed=True)
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
            raise self._diagnosis.hung_error(hung, f"a restart of {env_list(envs)}")
        if error is not None:
            raise error
        return infos

    # ------------------------------------------------------------------ failures

    def mark_broken(self, reason: str) -> None:
        """Reports the pool unusable as it is to ``on_broken``, ``reason`` saying why in one line:
        a worker died or hung, or a restart failed (answers may be left in the pipes)."""
        self._diagnosis.mark_broken(reason)

    def remote_error(
        self, slot: int, report: dict[str, Any] | BaseException, note: str = ""
    ) -> BaseException:
        """The exception slot ``slot`` reported, naming where it ran (see
        ``Diagnosis.remote_error``)."""
        return self._diagnosis.remote_error(slot, report, note)

"""What went wrong with a ``WorkerPool``'s workers, in words and in typed errors.

A worker found dead becomes a [`WorkerDiedError`][batchppo.envs.WorkerDiedError] naming its exit
code or the signal that killed it, what it was asked, and its last lines on stderr. A worker that
does not answer within the pool's ``step_timeout`` is asked for its Python stacks (``SIGUSR1``,
which its ``faulthandler`` answers on its stack pipe), killed, and becomes an
[`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] naming its envs and showing where it was stuck.
An env's exception reported by a worker is raised again with its own type and the worker's
traceback (``batchppo.envs.errors.error_from_report``), naming the worker and its pid.

Each death or hang is also reported, in one line, to the pool's ``on_broken`` callback: the batch
env above decides what it means.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from batchppo.envs.errors import EnvTimeoutError, WorkerDiedError, error_from_report
from batchppo.envs.workers.worker_processes import PARENT_SLOT, WorkerProcesses

__all__ = ["Diagnosis", "HungError", "call_words", "env_list"]

# How long a hung worker gets to write its stacks after SIGUSR1, and the quiet gap that ends
# the dump (faulthandler writes it in many small writes).
_STACK_WAIT_S = 2.0
_STACK_QUIET_S = 0.2


class HungError(Exception):
    """Worker ``slot`` did not answer within the pool's ``step_timeout``.

    Raised by the pool's timed waits; ``WorkerPool.hung_error`` turns the hung workers into an
    [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError].
    """

    def __init__(self, slot: int):
        super().__init__(slot)
        self.slot = slot


class Diagnosis:
    """The errors and one-line reasons of a pool's failed workers.

    Args:
        processes: The pool's worker processes.
        step_timeout: Seconds a worker may take to answer a command (None: no limit), for the
            messages of hung workers.
        on_broken: Called with a one-line reason when a worker is found dead or is killed as
            hung: the batch env above can no longer use the pool as it is.

    Attributes:
        hung_reasons: Slot -> why, of the workers just killed as hung (one line, then their
            stacks).
        broken_reason: Why the last worker found dead or killed was (one line).
    """

    def __init__(
        self,
        processes: WorkerProcesses,
        step_timeout: float | None,
        on_broken: Callable[[str], None],
    ):
        self._processes = processes
        self._step_timeout = step_timeout
        self._on_broken = on_broken
        self.hung_reasons: dict[int, str] = {}
        self.broken_reason = ""

    def describe(self, slot: int) -> str:
        """``worker 1 (pid 123, envs 2..3)``: worker ``slot``, for messages."""
        start, stop = self._processes.ranges[slot]
        proc = self._processes.procs[slot]
        return f"worker {slot} (pid {proc.pid}, envs {start}..{stop - 1})"

    def _envs_of(self, slot: int) -> str:
        """``envs 2..3 (worker 1, pid 123)``: the envs of worker ``slot``, for messages."""
        start, stop = self._processes.ranges[slot]
        envs = f"env {start}" if stop - start == 1 else f"envs {start}..{stop - 1}"
        return f"{envs} (worker {slot}, pid {self._processes.procs[slot].pid})"

    def mark_broken(self, reason: str) -> None:
        """Reports the pool unusable as it is to ``on_broken``, ``reason`` saying why in one
        line."""
        self.broken_reason = reason
        self._on_broken(reason)

    def dead(self, slot: int) -> WorkerDiedError:
        """The error for worker ``slot``, found dead (its exit code or signal); reports it
        to ``on_broken``."""
        processes = self._processes
        proc = processes.procs[slot]
        proc.join(0.1)
        tail = processes.stderr.tail(slot)
        last = f"; the last line it wrote to stderr: {tail[-1].strip()!r}" if tail else ""
        self.mark_broken(
            f"{self.describe(slot)} died ({_exit_words(proc.exitcode, processes.forkserver)}) "
            f"during {processes.calls[slot]}{last}"
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
        if slot != PARENT_SLOT:
            pid = self._processes.procs[slot].pid
            return error_from_report(report, f"worker {slot} (pid {pid})", note)
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
            self._processes.kill(slot)
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
            "env cannot continue (raise step_timeout, backend_options.step_timeout in a config, "
            f"if the env is only slow).\n{where}"
        )

    def _dump_stacks(self, slots: list[int]) -> dict[int, str]:
        """Asks the workers ``slots`` for their threads' Python stacks (``SIGUSR1``, which their
        ``faulthandler`` answers on their stack pipes); the text of each."""
        for slot in slots:
            with contextlib.suppress(OSError):
                os.kill(self._processes.procs[slot].pid, signal.SIGUSR1)
        end = time.monotonic() + _STACK_WAIT_S
        out = {}
        for slot in slots:
            text = _env_stacks(_read_until_quiet(self._processes.stacks[slot].fileno(), end))
            out[slot] = text or "(none came: the worker did not answer SIGUSR1 either)"
        return out


def env_list(indices: list[int]) -> str:
    """``env 2``, ``envs 2..3`` or ``envs [1, 4]``: env indices, for messages."""
    if len(indices) == 1:
        return f"env {indices[0]}"
    if indices == list(range(indices[0], indices[-1] + 1)):
        return f"envs {indices[0]}..{indices[-1]}"
    return f"envs {indices}"


def call_words(message: tuple) -> str:
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

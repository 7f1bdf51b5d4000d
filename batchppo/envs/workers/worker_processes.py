"""The life of a ``WorkerPool``'s processes: start, respawn and stop, and no orphan.

``WorkerProcesses`` starts the worker processes (``worker_main``) of a pool, each with its own
command and done semaphores, its pipe, its stderr pipe (``StderrTails``) and, where the pool
bounds its workers' answers, a stack pipe that its ``faulthandler`` writes to. It replaces a dead
worker by a new process that builds the same envs, and stops them all without hanging.

Nothing outlives the parent, however it ends: every worker watches the read end of a pipe the
parent never writes (EOF means the parent is gone, and the worker exits); workers ignore the
SIGINT and SIGTERM sent to the whole process group (Ctrl-C, ``timeout``, Slurm), so that the
parent stops them in order; the fork server is started with SIGTERM ignored
(``batchppo.envs.workers.processes.start_forkserver``), and the semaphores' names are unlinked as
soon as every worker has opened them. ``stop`` escalates from join to terminate to kill.

What the workers are told and what they answer is the pool's (``batchppo.envs.workers.pool``); what
a death or a hang means, in words and errors, is ``batchppo.envs.workers.diagnosis``'s.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import time
from typing import Any

from batchppo.envs.workers import processes as _processes
from batchppo.envs.workers import worker as _worker
from batchppo.envs.workers.stderr_tail import StderrTails

__all__ = ["PARENT_SLOT", "WorkerProcesses", "split_envs"]

PARENT_SLOT = -1
"""The slot of the envs the calling process steps (``step_in_parent``): before worker 0's, as
its envs come first."""


def split_envs(
    num_envs: int, num_workers: int | None, envs_per_worker: int | None, step_in_parent: bool
) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """How a batch env's envs are shared out: ``K`` envs per slot, the parent's slot first.

    Args:
        num_envs: The envs of the batch.
        num_workers: Units that step envs (workers, plus the parent with ``step_in_parent``), a
            positive int (as ``WorkerOptions`` checks it); None: the CPUs available.
        envs_per_worker: Envs per unit ``K``, a positive int; None: ``ceil(num_envs /
            num_workers)``.
        step_in_parent: Whether the calling process steps the first ``K`` envs.

    Returns:
        ``(ranges, parent_envs)``: ``(start, stop)`` of each worker's envs, and of the parent's
        (None without ``step_in_parent``).

    Raises:
        ValueError: No envs.
    """
    if num_envs == 0:
        raise ValueError("BatchEnv needs at least one env function; got an empty list.")
    per = envs_per_worker or math.ceil(num_envs / (num_workers or _processes.available_cpus()))
    ranges = [(i, min(i + per, num_envs)) for i in range(0, num_envs, per)]
    return ranges, ranges.pop(0) if step_in_parent else None


class WorkerProcesses:
    """The worker processes of a pool and their ends of every channel, in slot order.

    Args:
        start_method: The multiprocessing start method (forkserver or spawn).
        ranges: ``(start, stop)`` of the envs of each worker, in slot order.
        daemon: The workers' ``daemon`` flag.
        worker_spin_s: Seconds a worker spins for its next command before blocking.
        stack_pipes: Give each worker a stack pipe, which its ``faulthandler`` writes its
            Python stacks to on ``SIGUSR1`` (for the report of a hung worker).

    Attributes:
        ranges: ``(start, stop)`` of each worker's envs, in slot order.
        forkserver: Whether the workers fork from multiprocessing's fork server.
        procs: Each worker's process (a dead worker's until it is respawned).
        conns: The parent's end of each worker's pipe.
        cmd_sems: The semaphores that wake each worker for its next command.
        done_sems: The semaphores each worker releases when it has answered a step.
        stacks: The read end of each worker's stack pipe (None without ``stack_pipes``).
        stderr: The workers' stderr, forwarded and its last lines kept.
        calls: What each worker was asked last, in words, for the report of its death.

    Raises:
        RuntimeError: This Python cannot start workers without running an unguarded main script
            again (see ``process_class``).
    """

    def __init__(
        self,
        start_method: str,
        ranges: list[tuple[int, int]],
        *,
        daemon: bool,
        worker_spin_s: float,
        stack_pipes: bool,
    ):
        self._ctx = ctx = mp.get_context(start_method)
        self.forkserver = ctx.get_start_method() == "forkserver"
        self.ranges = ranges
        # Decided before any env is built: this may refuse the main script.
        self._process_class = (
            _processes.process_class(ctx, import_main=not _processes.main_would_rerun_caller())
            if ranges
            else None
        )
        self._daemon = daemon
        self._worker_spin = worker_spin_s
        self._stack_pipes = stack_pipes
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.cmd_sems: list[Any] = []
        self.done_sems: list[Any] = []
        self.stacks: list[Any] = []
        self._alive_r: Any = None
        self._alive_w: Any = None
        self._payloads: list[bytes] = []
        self.stderr = StderrTails()
        self.calls: list[str] = []

    @property
    def size(self) -> int:
        """How many worker processes there are (started so far, during start-up)."""
        return len(self.procs)

    @property
    def pids(self) -> tuple[int, ...]:
        """The pid of each worker's process, in slot order (a dead worker's until respawned)."""
        return tuple(proc.pid for proc in self.procs)

    def launch(self, payloads: list[bytes], restartable: bool) -> None:
        """Starts a worker per payload, its cloudpickled arguments (see ``worker_main``); each
        first answers on its pipe with what it says of its envs.

        Args:
            payloads: Each worker's arguments, in slot order (kept to respawn it).
            restartable: Whether workers may be respawned (the parent-alive pipe's read end is
                kept for them).
        """
        ctx = self._ctx
        if self.forkserver:
            # Workers fork from a server that already imported these (fast start). Not
            # ``__main__``: the server must not run a main script without a main guard.
            ctx.set_forkserver_preload(["numpy", "gymnasium", "batchppo.envs.workers.worker"])
            _processes.start_forkserver()  # SIGTERM ignored: see its docstring
        self._alive_r, self._alive_w = ctx.Pipe(duplex=False)
        self._payloads = payloads
        for slot in range(len(self.ranges)):
            self.spawn(slot)
        if not restartable:  # a respawned worker needs the read end; otherwise it can go
            self._alive_r.close()

    def spawn(self, slot: int) -> None:
        """Starts the process of worker ``slot`` with its own semaphores and pipes.

        Used at start-up and to respawn a dead worker: the new process takes the place of the
        old one. Its first message on the pipe reports its envs (or the error that building
        them raised).
        """
        ctx = self._ctx
        cmd_sem, done_sem = ctx.Semaphore(0), ctx.Semaphore(0)
        parent_conn, child_conn = ctx.Pipe()
        stack_r, stack_w = ctx.Pipe(duplex=False) if self._stack_pipes else (None, None)
        err_r, err_w = ctx.Pipe(duplex=False)
        proc = self._process_class(
            target=_worker.worker_main,
            name=f"batchppo-env-worker-{slot}",
            args=(
                slot,
                self._payloads[slot],
                self.ranges[slot][0],
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
        self.stderr.add(slot, err_r)
        if slot < len(self.procs):
            self.calls[slot] = "its start (building its envs)"
            self.procs[slot], self.conns[slot] = proc, parent_conn
            self.cmd_sems[slot], self.done_sems[slot] = cmd_sem, done_sem
            if self.stacks[slot] is not None:
                self.stacks[slot].close()
            self.stacks[slot] = stack_r
        else:
            self.calls.append("its start (building its envs)")
            self.procs.append(proc)
            self.conns.append(parent_conn)
            self.cmd_sems.append(cmd_sem)
            self.done_sems.append(done_sem)
            self.stacks.append(stack_r)

    def replace(self, slot: int) -> None:
        """Replaces dead worker ``slot`` by a new process that builds its envs again (its
        first message, as at start-up, reports them)."""
        self.procs[slot].join(1.0)
        self.conns[slot].close()
        self.spawn(slot)

    def unlink_semaphores(self, slots: list[int] | None = None) -> None:
        """Removes the names of the semaphores of workers ``slots`` (None: all), once they have
        opened them, so that none is left behind however this process ends."""
        chosen = range(len(self.procs)) if slots is None else slots
        _processes.unlink_semaphores(
            [self.cmd_sems[slot] for slot in chosen] + [self.done_sems[slot] for slot in chosen]
        )

    def kill(self, slot: int) -> None:
        """Kills worker ``slot`` (SIGKILL) and reaps it."""
        proc = self.procs[slot]
        with contextlib.suppress(Exception):
            proc.kill()
        proc.join(1.0)

    def stop(self, deadline: float) -> None:
        """Waits for the workers to exit until ``deadline`` (monotonic), then terminates, then
        kills those left, and closes the parent's ends of their channels. Never hangs."""
        procs = self.procs
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
        for conn in self.conns + [s for s in self.stacks if s is not None]:
            conn.close()
        self.stderr.close()
        for end in (self._alive_w, self._alive_r):
            with contextlib.suppress(Exception):
                end.close()

"""The worker process of [`BatchEnv`][batchppo.envs.BatchEnv]: its loop over the parent's commands.

A worker builds its ``K`` envs into an ``EnvGroup`` over the batch env's shared memory, then waits
for command words (``batchppo.envs.workers.protocol``): a step runs the group and answers with a
status word, a pipe command (reset, restart, call, set_attr, close) is read from the pipe and
answered on it. With restarts on (``WorkerOptions(max_restarts=N)``) the worker's group steps on
past an env that raises; the step then ends with ``STATUS_RESTART`` and the envs' error reports
(``batchppo.envs.errors``), and the parent either sends a ``restart`` message (rebuild and reset
them) or raises. A worker exits when its parent dies.
"""

from __future__ import annotations

import contextlib
import faulthandler
import mmap
import os
import signal
import sys
import threading
import time
from multiprocessing import reduction
from typing import Any

import cloudpickle

from batchppo.envs.errors import describe_exception
from batchppo.envs.stack.batch_transform import wrapped_env_fn
from batchppo.envs.stack.env_group import EnvGroup, build_envs, check_spaces
from batchppo.envs.workers.protocol import (
    CMD_PIPE,
    CMD_STEP,
    CMD_STEP_INFO,
    STATUS_ERROR,
    STATUS_INFO,
    STATUS_OK,
    STATUS_RESTART,
    spin_acquire,
)

__all__ = ["describe_envs", "run_message", "worker_main"]


def _wait(sem: Any, spin_s: float, alive_r: Any) -> bool:
    """Acquires ``sem``: spins ``spin_s`` seconds, then blocks in slices. False: parent died."""
    if spin_acquire(sem, spin_s):
        return True
    acquire = sem.acquire
    while not acquire(True, 0.1):
        if alive_r.poll():  # readable only at EOF: the parent's end is closed
            return False
    return True


def worker_main(
    slot: int,
    payload: bytes,
    offset: int,
    cmd_sem: Any,
    done_sem: Any,
    conn: Any,
    alive_r: Any,
    spin_s: float,
    stack_w: Any = None,
    err_w: Any = None,
) -> None:
    """Entry point of a worker process (see the module docstring for the protocol).

    The worker starts in two halves. It builds its envs and reports them
    (``("built", describe_envs(...))``, or ``("error", report)``); env 0's spaces decide the
    layout of the shared memory, so no env needs building in the parent. The parent then
    sends ``("start", spaces, layout, discrete, transform, wrap)`` and the shared buffer's
    file descriptor; the worker checks its envs' spaces against ``spaces``, wraps them in
    the factory's per-env stack when ``wrap``, maps the buffer and answers
    ``("ready", pid)`` (or ``("error", report)``).

    Args:
        slot: Index of this worker (its command/status word).
        payload: cloudpickled ``(env_fns, obs_rule, autoreset_mode, restartable, transform)``; a
            restartable worker's group keeps ``env_fns`` to rebuild envs that raise; ``obs_rule``
            says how the envs' spaces must match (see ``check_spaces``); ``transform`` is the batch
            env's (a ``TransformFactory`` when ``wrap`` may be asked).
        offset: Global index of this worker's first env.
        cmd_sem: Released by the parent when a command is waiting.
        done_sem: Released by this worker when a command is done.
        conn: This worker's end of its pipe to the parent.
        alive_r: Read end of a pipe the parent never writes: EOF means the parent died.
        spin_s: Seconds of non-blocking tries before blocking on a semaphore.
        stack_w: Write end of a pipe (a ``BatchEnv`` with ``step_timeout``): on ``SIGUSR1``
            the worker writes every thread's Python stack there (``faulthandler``, which
            works while an env holds the interpreter in C code), so that a parent about to
            kill a hung worker can say where it was stuck.
        err_w: Write end of a pipe that becomes this worker's stderr (file descriptor 2): the
            parent forwards it to its own and keeps its last lines for a death report
            (``batchppo.envs.workers.stderr_tail``).
    """
    if err_w is not None:
        os.dup2(err_w.fileno(), 2)
        err_w.close()
    _ignore_stop_signals()
    if stack_w is not None:
        faulthandler.register(signal.SIGUSR1, file=stack_w.fileno(), all_threads=True)
    threading.Thread(
        target=_exit_when_parent_dies, args=(alive_r,), name="batchppo-parent-watch", daemon=True
    ).start()
    started = _start(payload, offset, conn)
    if started is None:
        return
    group, views = started
    conn.send(("ready", os.getpid()))
    try:
        _serve(slot, group, views, cmd_sem, done_sem, conn, alive_r, spin_s)
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return
    finally:
        group.close()


def _ignore_stop_signals() -> None:
    """Ignores SIGINT and SIGTERM, again after anything an env ran (its constructor, a reset,
    a call) may have installed handlers of its own, as SDL does for pygame.

    Ctrl-C, and the SIGTERM by which `timeout`, Slurm or systemd stop a job, reach the whole
    process group; the parent decides what happens (a run finishes its iteration and saves),
    and the workers end when it closes them or dies (``_exit_when_parent_dies``). A worker
    forked from a fork server started with SIGTERM blocked
    (``batchppo.envs.workers.processes.start_forkserver``) unblocks it: ignored either way.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _start(payload: bytes, offset: int, conn: Any) -> tuple[EnvGroup, dict[str, Any]] | None:
    """The worker's start (both halves, see ``worker_main``): its env group over the shared buffer
    and the buffer's views; None when it reported an error or the parent gave up on the batch env
    (the envs built are closed then)."""
    envs: list[Any] = []
    index: int | None = None
    try:
        env_fns, obs_rule, autoreset_mode, restartable, factory = cloudpickle.loads(payload)
        envs = build_envs(env_fns, offset, None)
        _ignore_stop_signals()
        conn.send(("built", describe_envs(envs, obs_rule)))
        message = conn.recv()
        fd = reduction.recv_handle(conn)
        _, spaces, layout, discrete, transform, wrap = message
        try:
            buffer = mmap.mmap(fd, layout.nbytes)
        finally:
            os.close(fd)
        for j, env in enumerate(envs):
            index = offset + j
            check_spaces(env, index, spaces, obs_rule)
        index = None
        views = layout.views(buffer)
        if wrap:
            envs = [factory.wrap(env) for env in envs]
            env_fns = [wrapped_env_fn(fn, factory.wrap) for fn in env_fns]
        group = EnvGroup(
            envs,
            offset,
            views,
            discrete,
            None,
            autoreset_mode,
            env_fns if restartable else None,
            transform,
        )
    except (EOFError, BrokenPipeError, ConnectionResetError):
        _close_envs(envs)  # the parent gave up on this batch env
        return None
    except BaseException as exc:
        _close_envs(envs)
        index = getattr(exc, "batchppo_env_index", index)
        conn.send(("error", describe_exception(exc, index)))
        conn.close()
        return None
    return group, views


def _serve(
    slot: int,
    group: EnvGroup,
    views: dict[str, Any],
    cmd_sem: Any,
    done_sem: Any,
    conn: Any,
    alive_r: Any,
    spin_s: float,
) -> None:
    """The worker's loop: runs the parent's commands until a ``close`` or the parent's death."""
    cmd, status = views["cmd"], views["status"]
    while True:
        if not _wait(cmd_sem, spin_s, alive_r):
            return
        command = int(cmd[slot])
        if command in (CMD_STEP, CMD_STEP_INFO):
            _step(slot, group, status, done_sem, conn, command == CMD_STEP_INFO)
        elif command == CMD_PIPE:
            if _handle(conn.recv(), group, conn):
                return
        else:  # pragma: no cover - protocol violation
            raise RuntimeError(f"worker {slot}: unknown command word {command}")


def _step(
    slot: int, group: EnvGroup, status: Any, done_sem: Any, conn: Any, with_info: bool
) -> None:
    """One step command: steps the group, sets this worker's status word, releases the
    parent, then sends what the status word announces (infos, failures or an error)."""
    message = None
    try:
        info = group.step(with_info)
    except Exception as exc:
        status[slot] = STATUS_ERROR
        message = ("error", describe_exception(exc, group.current_global))
    else:
        if group.failures:  # envs raised; the parent decides on their restart
            status[slot] = STATUS_RESTART
            message = ("failures", group.failures, info)
        else:
            status[slot] = STATUS_INFO if info else STATUS_OK
            message = info or None
    # Release first, then send: a message larger than the pipe's buffer must not block this
    # worker while the parent still waits on the semaphore.
    done_sem.release()
    if message is not None:
        try:
            conn.send(message)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:  # e.g. an info that cannot be pickled
            conn.send(("error", describe_exception(exc, None)))


def describe_envs(envs: list[Any], obs_rule: str) -> dict[str, Any]:
    """What a worker reports of its envs once built: its first env's spaces, metadata and
    render mode (env 0's decide the batch env's), and under ``obs_rule="different"`` every
    env's observation space."""
    first = envs[0]
    return {
        "observation_space": first.observation_space,
        "action_space": first.action_space,
        "metadata": dict(getattr(first, "metadata", {}) or {}),
        "render_mode": getattr(first, "render_mode", None),
        "obs_spaces": (
            [env.observation_space for env in envs] if obs_rule == "different" else None
        ),
    }


def _close_envs(envs: list[Any]) -> None:
    for env in envs:
        with contextlib.suppress(Exception):
            env.close()


_PARENT_DEATH_GRACE_S = 1.0  # for the main thread to close the envs and return by itself


def _exit_when_parent_dies(alive_r: Any) -> None:
    """Ends this worker once the parent has died, even while an env hangs in a call.

    The main thread notices the parent's death only while it waits on its semaphore; an env
    stuck in ``step`` (or ``reset``, ``close``) would keep this worker, and the forkserver it
    holds open, alive after the parent. This thread blocks until the parent's end of
    ``alive_r`` is closed, leaves the main thread a grace period to return on its own, then
    exits the process.
    """
    try:
        alive_r.poll(None)  # readable only at EOF: the parent's end is closed
    except Exception:
        return  # cannot watch; the main thread's own checks remain
    time.sleep(_PARENT_DEATH_GRACE_S)
    os._exit(1)


def _handle(message: tuple, group: EnvGroup, conn: Any) -> bool:
    """Handles a pipe message; returns True when the worker should exit."""
    kind = message[0]
    if kind == "close":
        group.close()
        conn.send(("ok", None))
        return True
    try:
        result = run_message(group, message)
    except Exception as exc:
        conn.send(("error", describe_exception(exc, group.current_global)))
        group.current = None
        return False
    finally:
        _ignore_stop_signals()
    conn.send(("ok", result))
    return False


def run_message(group: EnvGroup, message: tuple) -> Any:
    """Runs a pipe message other than ``close`` on ``group``: what a worker answers with
    ``("ok", result)``, and the parent's own share (``LocalWorker``) with it.

    Raises:
        RuntimeError: An unknown message.
        Exception: What an env raised (``group.current`` names it).
    """
    kind = message[0]
    if kind == "reset":
        return group.reset(message[1], message[2], message[3])
    if kind == "restart":
        return group.restart(message[1], message[2])
    if kind == "call":
        return group.call(message[1], message[2], message[3])
    if kind == "set_attr":
        group.set_attr(message[1], message[2])
        return None
    raise RuntimeError(f"unknown message {kind!r}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("batchppo.envs.workers.worker is started by BatchEnv, not run directly.")

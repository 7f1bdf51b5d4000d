"""One writer per run dir: an exclusive lock held for the life of a training run.

A run (a new one, a resume, each seed dir of a ``--seeds`` run) holds the lock of its run
dir: a POSIX record lock (``fcntl.lockf``) on ``<run dir>/.lock``, a file that records the
holder (pid, host, start time, command). A second process that wants the dir gets
``RunDirLockedError``, one line naming the holder. The kernel (or the NFS server) drops the lock
when its process ends, however it ends; a lock file still there with a holder in it was left by a
process that ended without releasing it (killed), and the next run takes it over with a
``StaleLockWarning``.

``lockf`` rather than ``flock``: POSIX locks are what NFS implements (NFSv4 in the protocol,
NFSv3 through the lock manager), while ``flock`` is local to a client on many systems (Linux
emulates it with POSIX locks over NFS, BSD and macOS do not). POSIX locks belong to the
process and are released when the process closes *any* descriptor of the file, so the file
is opened once, holder data is read and written through that descriptor only, and a second
lock of a dir this process already holds is refused from an in-process table before the
file is opened. A lock held by a live process on another host is never broken: the second
process gets the one-line error until that run ends; if that host died, an NFSv4 server
drops its locks when the host's lease expires (90 s by default), after which the lock is
taken over with the warning.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from batchppo.experiment.errors import RunDirError

__all__ = ["LOCK_FILE", "RunDirLock", "RunDirLockedError", "StaleLockWarning", "lock_run_dir"]

LOCK_FILE = ".lock"
_HELD: dict[str, RunDirLock] = {}  # resolved run dir -> the lock this process holds on it
_HELD_LOCK = threading.Lock()
_RETRIES = 5  # a lock file unlinked by its releasing holder is opened anew


class RunDirLockedError(RunDirError):
    """Another process (or this one) holds the run dir's lock: its message names the holder."""


class StaleLockWarning(UserWarning):
    """A run dir's lock file was left by a process that ended without releasing it."""


def _holder() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
    }


def _describe(info: dict[str, Any] | None) -> str:
    if not info:
        return "a process that is starting (no holder recorded yet)"
    return f"pid {info.get('pid')} on host {info.get('host')}, started {info.get('started')}"


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return info if isinstance(info, dict) else None


class RunDirLock:
    """The lock of one run dir, held from ``acquire`` to ``release``.

    Args:
        run_dir: The run directory (it must exist).
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None
        self._key = ""

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.run_dir / LOCK_FILE

    def acquire(self) -> RunDirLock:
        """Takes the lock, or raises naming its holder.

        Returns:
            This lock, held.

        Raises:
            RunDirLockedError: Another process holds it (or this process, through another
                ``RunDirLock``); one line with the holder's pid, host and start time.
        """
        key = os.path.realpath(self.run_dir)
        with _HELD_LOCK:
            if key in _HELD:
                raise RunDirLockedError(self._message(None, this=True))
            for _ in range(_RETRIES):
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    info = _parse(os.pread(fd, 65536, 0))
                    os.close(fd)
                    raise RunDirLockedError(self._message(info)) from None
                if _same_file(fd, self.path):
                    break
                os.close(fd)  # its holder released it and unlinked the file meanwhile
            else:  # pragma: no cover - a storm of runs starting and ending in this dir
                raise RunDirLockedError(f"{self.run_dir}: its lock file kept changing; try again")
            left = _parse(os.pread(fd, 65536, 0))
            if left:
                warnings.warn(
                    f"{self.run_dir}: taking over the lock left by {_describe(left)}, which "
                    "ended without releasing it",
                    StaleLockWarning,
                    stacklevel=3,
                )
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(_holder()).encode(), 0)
            os.fsync(fd)
            self._fd, self._key = fd, key
            _HELD[key] = self
        return self

    def moved(self, run_dir: str | Path) -> None:
        """Follows the run dir to its new name (a new run's staging dir renamed into place)."""
        with _HELD_LOCK:
            _HELD.pop(self._key, None)
            self.run_dir = Path(run_dir)
            self._key = os.path.realpath(self.run_dir)
            if self._fd is not None:
                _HELD[self._key] = self

    def release(self) -> None:
        """Removes the lock file and releases the lock (a no-op when not held)."""
        with _HELD_LOCK:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            _HELD.pop(self._key, None)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no holder left behind, even if the unlink fails
            with contextlib.suppress(OSError):
                if _same_file(fd, self.path):
                    self.path.unlink()  # before unlocking: a waiter then opens a new file
            os.close(fd)  # releases the lock

    def _message(self, info: dict[str, Any] | None, this: bool = False) -> str:
        who = "this process" if this else _describe(info)
        return (
            f"run dir {self.run_dir} is in use by {who}; wait for that run to end (or stop "
            "it), or train into another --timestamp"
        )

    def __enter__(self) -> RunDirLock:
        return self if self._fd is not None else self.acquire()

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def lock_run_dir(run_dir: str | Path) -> RunDirLock:
    """Takes the lock of ``run_dir`` (see ``RunDirLock.acquire``); release it when done.

    Raises:
        RunDirLockedError: The dir is in use; one line naming the holder.
    """
    return RunDirLock(run_dir).acquire()

"""The workers' stderr, forwarded to the parent's and its last lines kept for death reports.

Each worker process of a ``WorkerPool`` writes its file descriptor 2 (Python's tracebacks,
warnings, a C library's messages, what an env prints) into a pipe of its own. One daemon
thread of the parent (``StderrTails``) reads every pipe, writes what comes to the
parent's ``sys.stderr`` as it comes (so nothing a worker writes is lost from the terminal),
and keeps each worker's last ``TAIL_LINES`` lines: when a worker dies, its error names
them (``StderrTails.tail``).
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import sys
import threading
import time
from typing import Any

__all__ = ["TAIL_LINES", "StderrTails"]

TAIL_LINES = 8
"""The lines of a worker's stderr kept for the report of its death."""
_TAIL_WAIT_S = 0.5  # how long a death report waits for a dead worker's pipe to drain


class StderrTails:
    """Forwards the workers' stderr pipes to ``sys.stderr`` and keeps their last lines."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._tails: dict[int, collections.deque[str]] = {}
        self._partial: dict[int, str] = {}
        self._open: dict[int, Any] = {}  # slot -> read end, until its EOF
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, slot: int, read_end: Any) -> None:
        """Follows worker ``slot``'s pipe (a respawned worker's replaces the old one)."""
        with self._lock:
            old = self._open.pop(slot, None)
            if old is not None:
                self._forget(old)
            self._tails[slot] = collections.deque(maxlen=TAIL_LINES)
            self._partial[slot] = ""
            self._open[slot] = read_end
            self._selector.register(read_end.fileno(), selectors.EVENT_READ, (slot, read_end))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="batchppo-worker-stderr", daemon=True
                )
                self._thread.start()

    def tail(self, slot: int) -> list[str]:
        """Worker ``slot``'s last lines, once its pipe drained (a dead worker's reaches its
        end within a moment; waited for at most half a second)."""
        end = time.monotonic() + _TAIL_WAIT_S
        while slot in self._open and time.monotonic() < end:
            time.sleep(0.01)
        with self._lock:
            lines = list(self._tails.get(slot, ()))
            partial = self._partial.get(slot, "")
        return [*lines, partial] if partial else lines

    def close(self, drain_s: float = 0.2) -> None:
        """Stops following every pipe and ends the thread, once the pipes of the workers,
        which are gone, drained (for at most ``drain_s`` seconds: a process the env started
        may hold a pipe open). What the thread had no time to read by then is read here, as
        far as it is there, so a busy machine loses no line a worker wrote."""
        end = time.monotonic() + drain_s
        while self._open and time.monotonic() < end:
            time.sleep(0.01)
        with self._lock:
            self._closed = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)
        if self._thread is None or not self._thread.is_alive():
            for slot, read_end in list(self._open.items()):
                self._drain(slot, read_end)
        with self._lock:
            for read_end in list(self._open.values()):
                self._forget(read_end)
            self._open.clear()
        self._selector.close()

    def _drain(self, slot: int, read_end: Any) -> None:
        """Reads what a pipe holds now, without waiting for more, and forwards it all."""
        with contextlib.suppress(OSError):
            os.set_blocking(read_end.fileno(), False)
        while True:
            try:
                data = os.read(read_end.fileno(), 65536)
            except OSError:  # nothing more now (EAGAIN), or closed: its last line goes out
                data = b""
            with self._lock:
                text = self._keep(slot, data) if data else self._end(slot)
            self._forward(text)
            if not data:
                return

    def _forget(self, read_end: Any) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(read_end.fileno())
        with contextlib.suppress(OSError):
            read_end.close()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
            try:
                if not self._selector.get_map():
                    time.sleep(0.1)
                    continue
                ready = self._selector.select(0.1)
            except (OSError, ValueError, RuntimeError):  # closed under us
                return
            for key, _ in ready:
                self._read(*key.data)

    def _read(self, slot: int, read_end: Any) -> None:
        try:
            data = os.read(read_end.fileno(), 65536)
        except OSError:
            data = b""
        with self._lock:
            if self._open.get(slot) is not read_end:
                return  # replaced or closed meanwhile
            if not data:  # EOF: the worker has exited
                self._open.pop(slot)
                self._forget(read_end)
                text = self._end(slot)
            else:
                text = self._keep(slot, data)
        self._forward(text)

    def _keep(self, slot: int, data: bytes) -> str:
        """Adds what worker ``slot`` wrote to its tail (under the lock); returns its lines
        completed by it, to forward. Whole lines only: the workers write into one stderr, and
        a line forwarded in parts could be cut by another worker's."""
        text = self._partial[slot] + data.decode("utf-8", "replace")
        complete, newline, self._partial[slot] = text.rpartition("\n")
        if newline:
            self._tails[slot].extend(line for line in complete.split("\n") if line.strip())
        return complete + newline

    def _end(self, slot: int) -> str:
        """Worker ``slot``'s last line, once its pipe ends (under the lock), forwarded with a
        newline where the worker wrote none, so that what the next worker writes starts a line
        of its own."""
        partial, self._partial[slot] = self._partial[slot], ""
        if partial.strip():
            self._tails[slot].append(partial)
        return partial + "\n" if partial else ""

    @staticmethod
    def _forward(text: str) -> None:
        """Writes what a worker wrote to the parent's stderr."""
        if not text:
            return
        with contextlib.suppress(Exception):  # a closed or replaced sys.stderr
            sys.stderr.write(text)
            sys.stderr.flush()

"""Graceful stop: the first Ctrl-C / SIGTERM (or a user's callback) asks a run to stop after its
iteration and save."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class StopFlag:
    """A stop request: the signal or the user's callback that asked a run to stop (None: none
    yet), and whether a second Ctrl-C asked to abort."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.callback: str | None = None
        self.abort = False

    @property
    def requested(self) -> bool:
        """Whether a signal or a callback asked the run to stop."""
        return self.signum is not None or self.callback is not None

    def ask(self, callback: str) -> None:
        """Records that the callback named ``callback`` asked the run to stop (the first one
        that asked stays named)."""
        if self.callback is None:
            self.callback = callback

    def check_abort(self) -> None:
        """Raises the KeyboardInterrupt of a second Ctrl-C, in case it got lost.

        Python ignores exceptions raised while a garbage-collection callback runs (JAX has
        one), so a KeyboardInterrupt raised by the signal handler at that moment is printed
        and dropped; the flag keeps the request.
        """
        if self.abort:
            raise KeyboardInterrupt


@contextmanager
def graceful_stop(
    message: Callable[[str], None], flag: StopFlag | None = None
) -> Iterator[StopFlag]:
    """Turns the first SIGINT/SIGTERM into a flag (finish the step, save); a 2nd SIGINT aborts.

    Args:
        message: Tells the user that the run stops after this iteration.
        flag: The flag to raise; None: a new one.

    Yields:
        The flag, raised by the signal handlers while the context is open.
    """
    flag = flag if flag is not None else StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag  # Signal handlers can only be installed from the main thread.
        return

    def handler(signum: int, frame: Any) -> None:
        if flag.signum is not None and signum == signal.SIGINT:
            flag.abort = True
            raise KeyboardInterrupt
        flag.signum = signum
        message("stopping after this iteration, then saving (Ctrl-C again aborts)")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)

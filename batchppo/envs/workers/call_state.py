"""The calls of a [`BatchEnv`][batchppo.envs.BatchEnv]: Gymnasium's ``AsyncState``, plus two ends.

As ``AsyncVectorEnv``, a batch env takes one call at a time: a ``*_async`` method starts it and
its ``*_wait`` ends it. ``CallState`` keeps which call is pending and raises Gymnasium's errors,
in its words, for a call out of order (``AlreadyPendingCallError``, ``NoAsyncCallError``) or on a
closed env (``ClosedEnvironmentError``). A batch env is broken when a worker died or hung, or a
restart failed: it then accepts only ``close``, and every other call raises
[`WorkerDiedError`][batchppo.envs.WorkerDiedError] saying why. ``start`` and ``wait`` run a
request's two halves: a wait that times out leaves the call pending, Ctrl-C closes the batch env
(answers may be on their way, so its pipes cannot be resynchronised), any other error ends the
call.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from enum import Enum
from typing import TypeVar

from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

from batchppo.envs.errors import WorkerDiedError

__all__ = ["BatchState", "CallState"]

_T = TypeVar("_T")


class BatchState(Enum):
    """Where a [`BatchEnv`][batchppo.envs.BatchEnv] is in its life: Gymnasium's ``AsyncState``, plus
    two ends.

    ``DEFAULT`` accepts any call; ``WAITING_*`` wait for the matching ``*_wait`` call;
    ``BROKEN`` (a worker died) and ``CLOSED`` accept only ``close``.
    """

    DEFAULT = "default"
    WAITING_RESET = "reset"
    WAITING_STEP = "step"
    WAITING_CALL = "call"
    BROKEN = "broken"
    CLOSED = "closed"


class CallState:
    """Which call of a batch env is pending, and the checks of each call against it.

    Attributes:
        state: The batch env's ``BatchState``.
        broken_reason: Why it broke (one line, for its errors); ``""`` while it is not.
    """

    def __init__(self):
        self.state = BatchState.DEFAULT
        self.broken_reason = ""

    def mark_broken(self, reason: str) -> None:
        """The batch env can take no call but ``close``; ``reason`` says why in its errors."""
        self.broken_reason = reason
        self.state = BatchState.BROKEN

    def check_usable(self) -> None:
        """Raises unless the batch env can take calls: closed, or broken by a dead worker."""
        if self.state is BatchState.CLOSED:
            raise ClosedEnvironmentError("This BatchEnv is closed; build a new one.")
        if self.state is BatchState.BROKEN:
            raise WorkerDiedError(f"{self.broken_reason}; close this BatchEnv and build a new one.")

    def check_idle(self, caller: str) -> None:
        """Raises unless no call is pending (``caller`` names the method, for the message)."""
        if self.state is BatchState.DEFAULT:
            return
        self.check_usable()
        pending = self.state.value
        raise AlreadyPendingCallError(
            f"Calling `{caller}` while waiting for a pending call to `{pending}` to complete; "
            f"call `{pending}_wait` first.",
            pending,
        )

    def check_waiting(self, state: BatchState, caller: str) -> None:
        """Raises unless ``state``'s call is pending (``caller`` is its ``*_wait`` method)."""
        if self.state is state:
            return
        self.check_usable()
        raise NoAsyncCallError(
            f"Calling `{caller}` without any prior call to `{state.value}_async`.", state.value
        )

    def end_wait(self, state: BatchState) -> None:
        """The call of ``state`` is over (answered or failed), unless the env broke or closed."""
        if self.state is state:
            self.state = BatchState.DEFAULT

    def start(
        self,
        state: BatchState,
        caller: str,
        send: Callable[[], None],
        abort: Callable[[], None],
    ) -> None:
        """Starts a request: ``send`` sends it to every worker, then ``state``'s call is pending.

        Args:
            state: The call's ``WAITING_*`` state.
            caller: Its ``*_async`` method, for the messages.
            send: Sends the request.
            abort: Closes the batch env at once (Ctrl-C while sending: some workers got the
                request and will answer).
        """
        self.check_idle(caller)
        try:
            send()
        except KeyboardInterrupt:
            abort()
            raise
        self.state = state

    def wait(
        self,
        state: BatchState,
        caller: str,
        gather: Callable[[], _T],
        abort: Callable[[], None],
    ) -> _T:
        """Waits for the pending request of ``state``: what ``gather`` returns.

        Args:
            state: The call's ``WAITING_*`` state.
            caller: Its ``*_wait`` method, for the messages.
            gather: Gathers the answers.
            abort: Closes the batch env at once (Ctrl-C while answers are on their way).

        Raises:
            NoAsyncCallError: No such call is pending.
            multiprocessing.TimeoutError: ``gather`` timed out; the call stays pending.
        """
        self.check_waiting(state, caller)
        try:
            result = gather()
        except mp.TimeoutError:
            raise
        except KeyboardInterrupt:
            abort()
            raise
        except BaseException:
            self.end_wait(state)
            raise
        self.end_wait(state)
        return result

"""Typed errors shared by the parent, the workers and Ray actors, and the error reports.

An env that raises in a worker (or a Ray actor) is sent to the parent as a picklable report
(``describe_exception``: its type, the pickled exception, the worker's traceback and the env's
index); the parent raises it again with a message naming where it came from (``error_from_report``,
``with_message``), or as [`WorkerError`][batchppo.envs.WorkerError] when its type cannot be rebuilt.
"""

from __future__ import annotations

import contextlib
import traceback
from typing import Any

import cloudpickle

__all__ = [
    "EnvTimeoutError",
    "SpaceMismatchError",
    "WorkerDiedError",
    "WorkerError",
    "describe_exception",
    "error_from_report",
    "with_message",
]


class WorkerError(RuntimeError):
    """An env raised in a worker and its exception type could not be rebuilt in the parent."""


class WorkerDiedError(RuntimeError):
    """A worker process died (killed, crashed or exited) while the batch env needed it."""


class EnvTimeoutError(WorkerDiedError):
    """Envs did not answer a step, reset or call within the batch env's ``step_timeout``.

    The message names the envs and their worker processes and shows where each was stuck (the
    worker's Python stacks, dumped by ``faulthandler`` before the worker was killed). A
    [`WorkerDiedError`][batchppo.envs.WorkerDiedError] too: the hung workers are killed, so a batch
    env without restarts is broken in the same way as by a dead worker.
    """


class SpaceMismatchError(ValueError, RuntimeError):
    """An env's observation or action space differs from env 0's.

    A ``ValueError``, and the ``RuntimeError`` that Gymnasium's ``AsyncVectorEnv`` raises in
    this case, so code written for either catches it.
    """


def describe_exception(exc: BaseException, env_index: int | None) -> dict[str, Any]:
    """Turns an exception into a picklable report (type, pickled exception, traceback, env).

    Args:
        exc: The exception caught in the worker.
        env_index: Global index of the env that raised, or None when no env was involved.

    Returns:
        A dict with ``type`` (the pickled type or None), ``exc`` (the pickled exception or None),
        ``type_name``, ``message``, ``traceback`` and ``env_index``.
    """
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    report: dict[str, Any] = {
        "type_name": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": tb,
        "env_index": env_index,
        "exc": None,
        "type": None,
    }
    with contextlib.suppress(Exception):
        report["exc"] = cloudpickle.dumps(exc)
    with contextlib.suppress(Exception):
        report["type"] = cloudpickle.dumps(type(exc))
    return report


def with_message(exc: BaseException, message: str) -> BaseException:
    """Returns ``exc`` (or an equivalent of the same type) whose message is ``message``.

    Args:
        exc: The exception to re-raise.
        message: Its new message (the original one with where it was raised).

    Returns:
        ``exc`` with ``args = (message,)``; when its args cannot be set, a new exception of its type
        built from ``message``, or a [`WorkerError`][batchppo.envs.WorkerError] when that fails too.
    """
    with contextlib.suppress(Exception):
        exc.args = (message,)
        return exc
    try:
        return type(exc)(message)
    except Exception:
        return WorkerError(message)


def error_from_report(report: dict[str, Any], where: str, note: str = "") -> BaseException:
    r"""The exception an error report describes, its message naming where it was raised.

    Args:
        report: What ``describe_exception`` made of the exception.
        where: Where the env ran, for the message (``"worker 1 (pid 123)"``, ``"the parent"``).
        note: A sentence added after where it was raised, or ``""``.

    Returns:
        The exception (rebuilt from its pickle, else from its type) with the message
        ``"<message>\n[batchppo] <type> raised by env <i> in <where>. <note> Worker
        traceback:\n<traceback>"``; a [`WorkerError`][batchppo.envs.WorkerError] when neither can be
        rebuilt.
    """
    index = report["env_index"]
    env = f"env {index}" if index is not None else "a worker"
    message = (
        f"{report['message']}\n[batchppo] {report['type_name']} raised by {env} in {where}."
        f"{' ' + note if note else ''} Worker traceback:\n{report['traceback']}"
    )
    for field in ("exc", "type"):
        if report[field] is None:
            continue
        try:
            obj = cloudpickle.loads(report[field])
        except Exception:
            continue
        return with_message(obj if field == "exc" else obj(message), message)
    return WorkerError(message)

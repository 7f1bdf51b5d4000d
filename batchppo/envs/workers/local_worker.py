"""LocalWorker: the share of a [`BatchEnv`][batchppo.envs.BatchEnv]'s envs that the calling process
steps itself (``step_in_parent``), one slot of its ``WorkerPool``.

A ``LocalWorker`` answers the pool as a worker process does (``batchppo.envs.workers.worker``): the
same start in two halves (build the envs and report them with ``describe_envs``, then take their
rows of the shared arrays from the same start message), the same pipe messages (``run_message``) and
the same answer to a step (a status word and what follows it). It runs each command when the pool
asks for its answer, so the parent steps its share while the workers step theirs. Unlike a worker it
is not timed, and it cannot die or hang apart from the calling process; its errors are the envs' own
exceptions, their message naming the env and the parent process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import gymnasium
from gymnasium.vector import AutoresetMode

from batchppo.envs.async_compat import expected_spaces
from batchppo.envs.errors import with_message
from batchppo.envs.stack.batch_transform import wrapped_env_fn
from batchppo.envs.stack.env_group import EnvGroup, build_envs, check_spaces
from batchppo.envs.workers.protocol import (
    CMD_STEP_INFO,
    STATUS_ERROR,
    STATUS_INFO,
    STATUS_OK,
    STATUS_RESTART,
)
from batchppo.envs.workers.worker import describe_envs, run_message

__all__ = ["LocalWorker"]


class LocalWorker:
    """The envs ``0 .. K - 1`` of a batch env, built and stepped in the calling process.

    Args:
        env_fns: The functions of its envs (the batch env's first ``K``).
        observation_mode: The batch env's (see ``check_async_options``); a tuple's single space
            is what every env's observation space must match.
        obs_rule: How the envs' observation spaces must match (see ``check_spaces``).
        autoreset_mode: The batch env's autoreset mode.
        restartable: Whether envs that raise in a step are restarted (the group keeps their env
            functions to rebuild them).
        transform: The batch env's ``transform`` argument (a ``TransformFactory`` provides the
            per-env stack when the start message asks for it).
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gymnasium.Env]],
        observation_mode: str | tuple[gymnasium.Space, gymnasium.Space],
        obs_rule: str,
        autoreset_mode: AutoresetMode,
        restartable: bool,
        transform: Any,
    ):
        self._env_fns = env_fns
        self._observation_mode = observation_mode
        self._obs_rule = obs_rule
        self._autoreset_mode = autoreset_mode
        self._restartable = restartable
        self._factory = transform
        self._envs: list[gymnasium.Env] = []  # built, not yet in the group
        self._group: EnvGroup | None = None
        self._message: tuple = ()  # the pipe message that ``recv`` runs
        self._want_info = False  # of the step in flight

    @property
    def count(self) -> int:
        """How many envs it steps (0 before its start and after ``close``)."""
        return self._group.count if self._group is not None else 0

    def build(self) -> dict[str, Any]:
        """Builds the envs, env 0 first, checking each one's spaces against env 0's (or the single
        space of a tuple ``observation_mode``).

        Returns:
            What a worker reports of its envs (``describe_envs``).

        Raises:
            Exception: What building an env raised, its message naming the env and the parent.
        """
        try:
            self._envs = build_envs(self._env_fns[:1], 0, None)
            env0 = self._envs[0]
            expected = expected_spaces(
                self._observation_mode, (env0.observation_space, env0.action_space)
            )
            if self._obs_rule == "custom":
                check_spaces(env0, 0, expected, "custom")
            self._envs += build_envs(self._env_fns[1:], 1, expected, self._obs_rule)
        except Exception as exc:
            index = getattr(exc, "batchppo_env_index", 0)
            raise with_message(
                exc, f"{exc}\n[batchppo] raised while building env {index} in the parent process."
            ) from None
        return describe_envs(self._envs, self._obs_rule)

    def connect(self, start_message: tuple, views: dict[str, Any]) -> None:
        """Takes the envs' rows of ``views`` (the arrays of the whole batch), as told by the start
        message that the workers get (see ``worker_main``; its spaces were checked by ``build``)."""
        _, _, _, discrete, transform, wrap = start_message
        envs, fns = self._envs, self._env_fns
        if wrap:
            envs = [self._factory.wrap(env) for env in envs]
            fns = [wrapped_env_fn(fn, self._factory.wrap) for fn in fns]
        self._group = EnvGroup(
            envs,
            0,
            views,
            discrete,
            None,
            self._autoreset_mode,
            fns if self._restartable else None,
            transform,
        )
        self._envs = []

    def send(self, message: tuple) -> None:
        """Keeps a pipe message (reset, restart, call, set_attr) for ``recv`` to run."""
        self._message = message

    def recv(self) -> tuple[str, Any]:
        """Runs the message ``send`` kept: ``("ok", result)``, or ``("error", exception)``."""
        try:
            return "ok", run_message(self._group, self._message)
        except Exception as exc:
            return "error", self._error(exc)

    def start_step(self, command: int) -> None:
        """Keeps step ``command`` (its actions are in the arrays) for ``step`` to run."""
        self._want_info = command == CMD_STEP_INFO

    def step(self) -> tuple[int, Any]:
        """Steps the envs: the status word a worker would write and what it would send after it
        (``None`` after ``STATUS_OK``, else an info dict, ``("failures", reports, info)`` or
        ``("error", exception)``)."""
        group = self._group
        try:
            info = group.step(self._want_info)
        except Exception as exc:
            return STATUS_ERROR, ("error", self._error(exc))
        if group.failures:
            return STATUS_RESTART, ("failures", group.failures, info)
        return (STATUS_INFO, info) if info else (STATUS_OK, None)

    def close(self) -> None:
        """Closes the envs (ignoring their errors); the worker takes no command after."""
        if self._group is not None:
            self._group.close()
            self._group = None
        for env in self._envs:
            with contextlib.suppress(Exception):
                env.close()
        self._envs = []

    def _error(self, exc: Exception) -> BaseException:
        """``exc``, its message naming the env that raised it in the parent process."""
        index = self._group.current_global
        self._group.current = None
        return with_message(
            exc, f"{exc}\n[batchppo] raised by env {index}, stepped in the parent process."
        )

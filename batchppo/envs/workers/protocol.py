"""The parent-worker protocol of [`BatchEnv`][batchppo.envs.BatchEnv]: words and shared memory.

A worker process holds ``K`` envs (an ``EnvGroup``) and a window onto the batch env's shared memory
(``Layout``: observations, actions, rewards, terminated, truncated, final observations, and one
command and one status word per worker). The per-step protocol moves no Python objects: the parent
writes the actions into shared memory, sets the command word of the worker (``CMD_*``) and releases
the worker's command semaphore; the worker steps its envs, writes the results and its status word
(``STATUS_*``) into shared memory and releases its done semaphore. Both sides wait with
``spin_acquire``, a short spin of non-blocking tries before blocking, so a step needs no blocking
wait (and no wake-up latency) when both sides are busy. Everything rare (reset with seeds and
options, ``call``, ``get_attr``, ``set_attr``, errors, infos) goes through a pipe, pickled
(``batchppo.envs.workers.worker`` handles those messages).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from batchppo.envs.spaces import gym_leaves

__all__ = [
    "ALIGN",
    "CMD_PIPE",
    "CMD_STEP",
    "CMD_STEP_INFO",
    "STATUS_ERROR",
    "STATUS_INFO",
    "STATUS_OK",
    "STATUS_RESTART",
    "Layout",
    "spin_acquire",
]

# Command words written by the parent into shared memory before releasing a worker.
CMD_STEP = 1  # step, do not report infos (``step_arrays``)
CMD_STEP_INFO = 2  # step and report infos if any env returned some (``step``)
CMD_PIPE = 3  # a pickled message is waiting on the pipe (reset, call, close, ...)

# Status words written by a worker before releasing its done semaphore.
STATUS_OK = 0
STATUS_INFO = 1  # step done; a batched info dict follows on the pipe
STATUS_ERROR = 2  # an env raised; the error report follows on the pipe
STATUS_RESTART = 3  # step done, but envs raised (restartable group); their reports follow

ALIGN = 64  # cache line: arrays start on their own line


Leaf = tuple[tuple[int, ...], str]  # shape of one env's value, dtype string


@dataclass(frozen=True)
class Layout:
    """Where each shared array lives inside the one shared buffer.

    Observations, final observations and actions take one array per leaf of their space (see
    ``batchppo.envs.spaces``); a flat space has one leaf.

    Attributes:
        num_envs: Number of envs of the batch.
        num_slots: Number of command/status words (one per worker process).
        obs_leaves: ``(shape, dtype)`` of one env's value of each observation leaf.
        act_leaves: ``(shape, dtype)`` of one env's value of each action leaf.
    """

    num_envs: int
    num_slots: int
    obs_leaves: tuple[Leaf, ...]
    act_leaves: tuple[Leaf, ...]

    @classmethod
    def for_spaces(
        cls, num_envs: int, num_slots: int, obs_space: gymnasium.Space, act_space: gymnasium.Space
    ) -> Layout:
        """The layout for envs with these (single-env) observation and action spaces.

        Raises:
            ValueError: A space is not a leaf space or a Dict/Tuple nesting of them.
        """

        def of(space: gymnasium.Space) -> tuple[Leaf, ...]:
            return tuple(
                (tuple(leaf.shape), np.dtype(leaf.dtype).str) for leaf in gym_leaves(space)
            )

        return cls(num_envs, num_slots, of(obs_space), of(act_space))

    def _fields(self) -> list[tuple[str, tuple[int, ...], str]]:
        n = self.num_envs
        fields = []
        for name, leaves in (
            ("obs", self.obs_leaves),
            ("final_obs", self.obs_leaves),
            ("act", self.act_leaves),
        ):
            fields += [(name, (n, *shape), dtype) for shape, dtype in leaves]
        return [
            *fields,
            ("reward", (n,), "float32"),
            ("terminated", (n,), "bool"),
            ("truncated", (n,), "bool"),
            ("cmd", (max(self.num_slots, 1),), "int32"),
            ("status", (max(self.num_slots, 1),), "int32"),
        ]

    @property
    def nbytes(self) -> int:
        """Total size of the shared buffer in bytes."""
        total = 0
        for _, shape, dtype in self._fields():
            total += _aligned(int(np.prod(shape)) * np.dtype(dtype).itemsize)
        return max(total, ALIGN)

    def views(self, buffer: Any) -> dict[str, Any]:
        """Numpy views of every field onto ``buffer`` (anything with the buffer protocol).

        Returns:
            ``obs``, ``final_obs`` and ``act``: a list with one array per leaf; ``reward``,
            ``terminated``, ``truncated``, ``cmd`` and ``status``: an array each.
        """
        out: dict[str, Any] = {"obs": [], "final_obs": [], "act": []}
        offset = 0
        for name, shape, dtype in self._fields():
            count = int(np.prod(shape))
            view = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
            if name in ("obs", "final_obs", "act"):
                out[name].append(view)
            else:
                out[name] = view
            offset += _aligned(count * np.dtype(dtype).itemsize)
        return out


def _aligned(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def spin_acquire(sem: Any, spin_s: float) -> bool:
    """Tries to acquire ``sem`` without blocking for up to ``spin_s`` seconds.

    The first tries are back to back (when both sides are busy the answer is microseconds
    away, and a blocking wait would add a wake-up of tens of microseconds); later ones call
    ``sched_yield`` so that on a loaded machine the spinning process hands its core to whoever
    has work. After ``spin_s`` the caller blocks: a long wait (the agent computing its next
    action) costs no CPU.
    """
    acquire = sem.acquire
    if spin_s <= 0:
        return False
    for _ in range(16):
        if acquire(False):
            return True
    end = time.perf_counter() + spin_s
    while time.perf_counter() < end:
        _yield()
        if acquire(False):
            return True
    return False


_yield = getattr(os, "sched_yield", lambda: None)

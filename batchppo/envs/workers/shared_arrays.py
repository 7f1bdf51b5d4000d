"""SharedArrays: the shared memory of a [`BatchEnv`][batchppo.envs.BatchEnv] and its arrays.

One buffer holds every array that the batch env and its workers share, laid out by ``Layout`` once
env 0's spaces are known: observations, final observations and actions (one array per leaf of a
Dict/Tuple space), rewards, terminated, truncated, and one command and one status word per worker.
``SharedArrays`` maps it (memory that the workers map too, or the calling process's own when no
worker is started), keeps the observations and actions in their space's structure, writes a batch
of actions after checking it as Gymnasium does, and fills the dense final observations of a step.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces as gym_spaces

from batchppo.envs.async_compat import (
    check_action_batch,
    check_action_dtype,
    check_action_shape,
)
from batchppo.envs.final_obs import fill_final_obs
from batchppo.envs.spaces import check_structure, gym_leaf_paths, is_gym_leaf, unflatten
from batchppo.envs.workers.protocol import Layout

__all__ = ["SharedArrays"]


class SharedArrays:
    """The arrays of a batch of ``num_envs`` envs, in one buffer.

    Args:
        num_envs: The batch size.
        num_workers: The worker processes that map the buffer; with none it is plain memory.
        obs_space: One env's observation space.
        act_space: One env's action space.

    Attributes:
        layout: Where each array lives in the buffer.
        fd: The buffer's file descriptor, which the workers map (None without workers, and
            after ``close``).
        views: Every array of the buffer (``Layout.views``), as the workers' groups take them.
        obs: The observations, in the observation space's structure (an array for a flat space,
            a dict/tuple of arrays for a nested one).
        final_obs: The final observations, in the same structure.
        reward: float32 rewards, shape ``(num_envs,)``.
        terminated: bool, shape ``(num_envs,)``.
        truncated: bool, shape ``(num_envs,)``.
        done: Where an episode ended in the last step (``end_step``).
        obs_rows: Per observation leaf, its ``(num_envs, -1)`` view.
        final_rows: Per observation leaf, the ``(num_envs, -1)`` view of the final obs.
        copy_obs: Makes a fresh copy of ``obs`` or ``final_obs`` (a nested one included).
        discrete: Whether actions are scalar integers (the envs get them as Python ints).
    """

    def __init__(
        self,
        num_envs: int,
        num_workers: int,
        obs_space: gymnasium.Space,
        act_space: gymnasium.Space,
    ):
        self.layout = Layout.for_spaces(num_envs, num_workers, obs_space, act_space)
        self.fd: int | None = None
        if num_workers:
            self.fd, self._buffer = _shared_buffer(self.layout.nbytes)
        else:
            self._buffer = bytearray(self.layout.nbytes)
        self.views = v = self.layout.views(self._buffer)
        self.obs = unflatten(obs_space, v["obs"])
        self.final_obs = unflatten(obs_space, v["final_obs"])
        self.reward, self.terminated, self.truncated = v["reward"], v["terminated"], v["truncated"]
        self.done = np.zeros(num_envs, dtype=bool)
        self.obs_rows = [o.reshape(num_envs, -1) for o in v["obs"]]
        self.final_rows = [f.reshape(num_envs, -1) for f in v["final_obs"]]
        self.copy_obs = np.ndarray.copy if is_gym_leaf(obs_space) else _copy_tree
        self._not_done = np.zeros((num_envs, 1), dtype=bool)
        self.discrete = isinstance(act_space, gym_spaces.Discrete)
        self._act_space = act_space
        self._act = v["act"][0] if is_gym_leaf(act_space) else None  # None: nested actions
        self._act_leaves = v["act"]
        self._act_paths = gym_leaf_paths(act_space)
        self._act_shape = (num_envs, *act_space.shape) if self._act is not None else None
        self._act_dtype = np.dtype(act_space.dtype) if self._act is not None else None
        self._ok_dtypes: set[np.dtype] = set()

    def write_actions(self, actions: Any) -> None:
        """Checks a batch of actions (an element of the batched action space) and writes it.

        Raises:
            ValueError: ``actions`` has the wrong structure, shape or dtype (the message names the
                expected ones).
            TypeError: A scalar where a batch is expected (Gymnasium's error).
        """
        if self._act is None:
            self._write_nested_actions(actions)
            return
        actions = np.asarray(actions)
        if actions.shape != self._act_shape:
            check_action_batch(actions, self._act_shape)
        if actions.dtype not in self._ok_dtypes:
            check_action_dtype(actions.dtype, self._act_dtype, self._act_shape)
            self._ok_dtypes.add(actions.dtype)
        np.copyto(self._act, actions, casting="unsafe")

    def _write_nested_actions(self, actions: Any) -> None:
        """Checks every leaf of a Dict/Tuple action batch, then writes them all."""
        given = check_structure(self._act_space, actions, "actions")
        arrays = []
        for path, value, dest in zip(self._act_paths, given, self._act_leaves, strict=True):
            value = np.asarray(value)
            try:
                check_action_shape(value.shape, dest.shape)
                check_action_dtype(value.dtype, dest.dtype, dest.shape)
            except ValueError as exc:
                raise ValueError(f"actions{path}: {exc}") from None
            arrays.append(value)
        for value, dest in zip(arrays, self._act_leaves, strict=True):
            np.copyto(dest, value, casting="unsafe")

    def end_step(self, same_step: bool) -> None:
        """Sets ``done`` from the step's flags; with ``same_step``, the final obs of the envs whose
        episode did not end are their obs (dense ``final_obs``)."""
        done = np.logical_or(self.terminated, self.truncated, out=self.done)
        if same_step:
            fill_final_obs(self.final_rows, self.obs_rows, done, self._not_done)

    def results(self, copy: bool) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Any]:
        """``(obs, reward, terminated, truncated, final_obs)`` of the last step: fresh copies, or
        with ``copy`` False the shared arrays themselves (the next step overwrites them)."""
        if copy:
            copy_obs = self.copy_obs
            return (
                copy_obs(self.obs),
                self.reward.copy(),
                self.terminated.copy(),
                self.truncated.copy(),
                copy_obs(self.final_obs),
            )
        return self.obs, self.reward, self.terminated, self.truncated, self.final_obs

    def close(self) -> None:
        """Closes the buffer's file descriptor; the mapping stays, for the arrays handed out."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _shared_buffer(nbytes: int) -> tuple[int, mmap.mmap]:
    """A zeroed shared-memory buffer and its file descriptor, which the workers map.

    The descriptor reaches each worker over its pipe (``multiprocessing.reduction``), once
    env 0's spaces, so the buffer's size, are known: no env has to be built in the parent
    for them.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("batchppo-batch-env", os.MFD_CLOEXEC)
    else:  # an unlinked file, in memory where the system has /dev/shm
        fd, path = tempfile.mkstemp(
            prefix="batchppo-batch-env-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
        os.unlink(path)
    try:
        os.ftruncate(fd, nbytes)
        return fd, mmap.mmap(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise


def _copy_tree(tree: Any) -> Any:
    """A copy of a dict/tuple nesting of arrays (Gymnasium's ``deepcopy`` of observations)."""
    if isinstance(tree, dict):
        return {key: _copy_tree(value) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_copy_tree(value) for value in tree)
    return tree.copy()

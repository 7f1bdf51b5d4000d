"""The worker side of :class:`~batchppo.envs.BatchEnv`: a group of envs stepped in one process.

A worker process holds ``K`` envs (an :class:`EnvGroup`) and a window onto the batch env's
shared memory (observations, actions, rewards, terminated, truncated, final observations).
The per-step protocol moves no Python objects: the parent writes the actions into shared
memory, sets the command word of the worker and releases the worker's command semaphore; the
worker steps its envs, writes the results into shared memory and releases its done semaphore.
Both sides spin on a non-blocking ``acquire`` for a short while before blocking, so a step
needs no blocking wait (and no wake-up latency) when both sides are busy. Everything rare
(reset with seeds and options, ``call``, ``get_attr``, ``set_attr``, errors, infos) goes
through a pipe, pickled. With restarts on (``BatchEnv(max_restarts=N)``) the worker's group
steps on past an env that raises; the step then ends with ``STATUS_RESTART`` and the envs'
error reports, and the parent either sends a ``restart`` message (rebuild and reset them) or
raises.

The same :class:`EnvGroup` steps the parent's own share of the envs and the envs of a Ray actor,
so the autoreset logic exists once.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cloudpickle
import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from batchppo.envs.spaces import flattener, is_leaf, unflatten
from batchppo.envs.spaces import leaves as space_leaves

if TYPE_CHECKING:
    from batchppo.envs.batch_transform import BatchTransform

__all__ = [
    "ALIGN",
    "CMD_PIPE",
    "CMD_STEP",
    "CMD_STEP_INFO",
    "STATUS_ERROR",
    "STATUS_INFO",
    "STATUS_OK",
    "STATUS_RESTART",
    "EnvGroup",
    "Layout",
    "SpaceMismatchError",
    "batch_infos",
    "describe_exception",
    "merge_info_parts",
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

    Observations, final observations and actions take one array per leaf of their space
    (see :mod:`batchppo.envs.spaces`); a flat space has one leaf.

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
                (tuple(leaf.shape), np.dtype(leaf.dtype).str) for leaf in space_leaves(space)
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


def batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Batches per-env info dicts into Gymnasium's dict-of-arrays form (with ``_key`` masks).

    Takes a fast path when every env returned the same keys with scalar values (the common
    case, e.g. MuJoCo's per-step infos); anything else goes through Gymnasium's own
    ``VectorEnv._add_info``.

    Args:
        infos: One info dict per env (empty dicts allowed).

    Returns:
        ``{key: array of len(infos), "_key": bool mask, ...}``; ``{}`` if all infos are empty.
    """
    n = len(infos)
    if not any(infos):
        return {}
    first = infos[0]
    keys = first.keys()
    if all(info.keys() == keys for info in infos) and all(
        isinstance(v, (bool, int, float, np.number, np.bool_)) for v in first.values()
    ):
        out: dict[str, Any] = {}
        try:
            for key in keys:
                values = np.array([info[key] for info in infos])
                if values.dtype == object:
                    raise TypeError
                out[key] = values
                out["_" + key] = np.ones(n, dtype=bool)
            return out
        except (TypeError, ValueError):
            pass
    return _slow_batch_infos(infos)


class _InfoBatcher(gymnasium.vector.VectorEnv):
    """Gives access to Gymnasium's ``_add_info`` for a batch of a given size."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs


def _slow_batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    batcher = _InfoBatcher(len(infos))
    out: dict[str, Any] = {}
    for i, info in enumerate(infos):
        if info:
            out = batcher._add_info(out, info, i)
    return out


def merge_info_parts(parts: Sequence[tuple[int, int, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Merges batched info dicts of consecutive env ranges into one dict over all ``n`` envs.

    Args:
        parts: ``(offset, count, batched_info)`` for each range of envs.
        n: Total number of envs.

    Returns:
        A batched info dict of length ``n`` (masks False where a part had no entry).
    """
    parts = [p for p in parts if p[2]]
    if not parts:
        return {}
    if len(parts) == 1 and parts[0][0] == 0 and parts[0][1] == n:
        return parts[0][2]
    out: dict[str, Any] = {}
    for offset, count, info in parts:
        for key, value in info.items():
            if isinstance(value, dict):
                continue  # nested dicts are merged below, by recursion
            if key not in out:
                if isinstance(value, np.ndarray):
                    out[key] = np.zeros((n, *value.shape[1:]), dtype=value.dtype)
                else:
                    out[key] = np.full(n, None, dtype=object)
            elif isinstance(value, np.ndarray) and out[key].dtype != value.dtype:
                out[key] = out[key].astype(np.result_type(out[key], value))
            out[key][offset : offset + count] = value
        for key, value in info.items():
            if isinstance(value, dict):
                out.setdefault(key, [])
                out[key].append((offset, count, value))
    for key, value in list(out.items()):
        if isinstance(value, list):
            out[key] = merge_info_parts(value, n)
    for key in list(out.keys()):
        if not key.startswith("_") and "_" + key not in out:
            out["_" + key] = np.zeros(n, dtype=bool)
    return out


class TreeRows:
    """Rows of a nested space's leaf arrays, read and written one env's nested value at a time.

    It stands in for the single array of a flat space inside :class:`EnvGroup`, with the
    indexing that the group's step loop uses, so that loop is the same code for both:
    ``rows[j] = value`` writes env ``j``'s value into every leaf, ``rows[...] = values``
    writes one value per env, and ``copy()`` gives fresh per-env values (dicts/tuples of
    arrays), as an array's ``copy()`` gives fresh rows.

    Args:
        space: The (single-env) Dict or Tuple space.
        arrays: One array per leaf (see :mod:`batchppo.envs.spaces`), ``K`` rows each.
    """

    def __init__(self, space: gymnasium.Space, arrays: Sequence[np.ndarray]):
        self.space = space
        self.arrays = list(arrays)
        self._flatten = flattener(space)

    def __setitem__(self, index: Any, value: Any) -> None:
        if index is Ellipsis:
            flat = [self._flatten(v) for v in value]
            for k, array in enumerate(self.arrays):
                array[...] = [leaves[k] for leaves in flat]
            return
        for array, leaf in zip(self.arrays, self._flatten(value), strict=True):
            array[index] = leaf

    def row(self, index: int) -> Any:
        """A copy of row ``index`` as one nested value (a dict/tuple of arrays)."""
        return unflatten(self.space, [array[index].copy() for array in self.arrays])

    def copy(self) -> list[Any]:
        """One fresh nested value per row (an env may keep what it was given)."""
        copies = [array.copy() for array in self.arrays]
        return [unflatten(self.space, [c[j] for c in copies]) for j in range(len(copies[0]))]


def _rows(space: gymnasium.Space, arrays: Sequence[np.ndarray], rows: slice) -> Any:
    """The rows ``rows`` of a space's leaf arrays: an array (flat space) or a TreeRows."""
    if is_leaf(space):
        return arrays[0][rows]
    return TreeRows(space, [array[rows] for array in arrays])


def _row_copy(rows: Any, index: int) -> Any:
    """A copy of row ``index`` of an array or a :class:`TreeRows`."""
    return rows.row(index) if isinstance(rows, TreeRows) else rows[index].copy()


_SPACE_NAMES = ("observation_space", "action_space")


class EnvGroup:
    """``K`` envs stepped in a loop, writing into (shared) numpy arrays, with autoreset.

    Args:
        envs: The envs (their spaces are env 0's, checked by :func:`build_envs`).
        offset: Global index of the first env (for error messages and seeds).
        views: Arrays of the whole batch (from :meth:`Layout.views`); the group works on the
            rows ``offset : offset + len(envs)``.
        discrete: Whether actions are scalar integers (passed to the envs as Python ints).
        row: First row of ``views`` to use, when it differs from ``offset`` (views holding
            only this group's rows, as in a Ray actor).
        autoreset_mode: Gymnasium's autoreset mode (``SAME_STEP``, ``NEXT_STEP`` or
            ``DISABLED``), as ``AsyncVectorEnv``'s workers apply it.
        env_fns: The functions that built ``envs`` (``SAME_STEP`` only). When given, the group
            is *restartable*: an env whose ``step`` raises no longer ends the step. Its report
            goes to :attr:`failures`, its row gets the last obs it returned (as obs and final
            obs), reward 0 and ``truncated``, the other envs step on, and :meth:`restart`
            rebuilds it later.
        transform: A standard wrapper stack to apply to all the group's envs at once (see
            :mod:`batchppo.envs.batch_transform`): the envs are the raw ones, ``views`` has
            the transformed spaces. A non-finite observation or reward raises in the group
            as in the stack, from the env that returned it (:attr:`current`), or, when the
            group is restartable, fails that env as an exception in its step would.
    """

    def __init__(
        self,
        envs: Sequence[gymnasium.Env],
        offset: int,
        views: dict[str, Any],
        discrete: bool,
        row: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        env_fns: Sequence[Callable[[], gymnasium.Env]] | None = None,
        transform: BatchTransform | None = None,
    ):
        self.envs = list(envs)
        self.offset = offset
        self.count = len(self.envs)
        start = offset if row is None else row
        rows = slice(start, start + self.count)
        obs_space = self.envs[0].observation_space
        self.obs = _rows(obs_space, views["obs"], rows)
        self.final_obs = _rows(obs_space, views["final_obs"], rows)
        self.act = _rows(self.envs[0].action_space, views["act"], rows)
        self.reward = views["reward"][rows]
        self.terminated = views["terminated"][rows]
        self.truncated = views["truncated"][rows]
        self.discrete = discrete
        self.current: int | None = None  # local index of the env being stepped (for errors)
        self._steps = [env.step for env in self.envs]
        self._obs_list: list[Any] = [None] * self.count
        self._rewards: list[Any] = [0.0] * self.count
        self._terms: list[Any] = [False] * self.count
        self._truncs: list[Any] = [False] * self.count
        self._infos: list[Any] = [{}] * self.count
        self._resets = [env.reset for env in self.envs]
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        # NEXT_STEP: envs whose episode ended on the last step and are reset on the next.
        self._autoreset = [False] * self.count
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            if env_fns is not None:
                raise ValueError(
                    f"env restarts need autoreset_mode=SAME_STEP; got {self.autoreset_mode}."
                )
            # Bound once here, so the same-step loop (the learner's) stays free of mode tests.
            self.step = self._step_next_or_disabled  # type: ignore[method-assign]
        self._env_fns = None if env_fns is None else list(env_fns)
        self._spaces = (obs_space, self.envs[0].action_space)
        self.failures: list[dict[str, Any]] = []  # reports of the envs that raised this step
        self._broken: set[int] = set()  # local indices of envs that raised, not yet rebuilt
        self._transform = transform
        # The step loops write the final obs of an episode that ended here: into the shared
        # rows, or, with a transform, raw into a dict {local index: obs} mapped after the loop.
        self._final_sink: Any = self.final_obs
        if transform is not None:
            self._actions = functools.partial(transform.actions, self.act)
            self._final_sink = {}
            self._t = 0  # steps taken by the group (for the step of an episode in errors)
            self._episode_start = [0] * self.count  # ``_t`` at each env's last reset
        elif discrete:
            self._actions = self.act.tolist
        else:
            # A fresh array: an env may keep a reference to the action it was given.
            self._actions = self.act.copy

    @property
    def current_global(self) -> int | None:
        """Global index of the env that is (or was last) being worked on."""
        return None if self.current is None else self.offset + self.current

    def step(self, want_info: bool) -> dict[str, Any]:
        """Steps every env once with the actions in shared memory; resets finished envs.

        This is the ``SAME_STEP`` loop; the other modes replace it at construction with
        :meth:`_step_next_or_disabled`. Writes obs (the next episode's first obs where one
        ended), reward, terminated, truncated, and, for finished envs only, the final obs of
        the episode.

        Args:
            want_info: Whether to collect and batch the infos.

        Returns:
            The batched infos of this group (``{}`` when none or not wanted).
        """
        actions = self._actions()
        if self._env_fns is None:
            return self._publish(self._step_from(0, actions, want_info), want_info)
        self.failures = []
        any_info, start = False, 0
        while start < self.count:
            try:
                any_info |= self._step_from(start, actions, want_info)
                break
            except Exception as exc:
                start = self._fail(exc, want_info) + 1
        return self._publish(any_info, want_info)

    def _step_from(self, start: int, actions: Any, want_info: bool) -> bool:
        """The ``SAME_STEP`` loop over envs ``start, start + 1, ...``; whether any gave info.

        On an exception, :attr:`current` is the env that raised.
        """
        resets, final_obs, steps = self._resets, self._final_sink, self._steps
        # Per-env results go to Python lists first (cheaper than numpy item stores) and reach
        # the shared arrays in one vectorised store each.
        obs, rewards, terms, truncs = self._obs_list, self._rewards, self._terms, self._truncs
        infos = self._infos
        any_info = False
        j = start - 1
        try:
            for j in range(start, self.count):
                o, rewards[j], te, tr, info = steps[j](actions[j])
                terms[j] = te
                truncs[j] = tr
                if te or tr:
                    final_obs[j] = o
                    o, reset_info = resets[j]()
                    if want_info:
                        # Gymnasium's SAME_STEP contract: an env that ended reports its final
                        # info (masked by ``_final_info``), even an empty one.
                        info = {**reset_info, "final_info": info}
                obs[j] = o
                if want_info:
                    infos[j] = info
                    if info:
                        any_info = True
        except BaseException:
            self.current = j
            raise
        return any_info

    def _fail(self, exc: Exception, want_info: bool) -> int:
        """Records that env :attr:`current` raised ``exc`` in a step; returns its index.

        The env's row reports its last obs (still in the shared obs row) as obs and final obs,
        reward 0, ``truncated``, and no info; the env waits for :meth:`restart`.
        """
        j = self.current
        assert j is not None
        self.failures.append(describe_exception(exc, self.offset + j))
        self._broken.add(j)
        last = _row_copy(self.obs, j)
        self._obs_list[j] = last
        self.final_obs[j] = last
        self._rewards[j], self._terms[j], self._truncs[j] = 0.0, False, True
        if want_info:
            self._infos[j] = {}
        self.current = None
        return j

    def restart(self, rows: Sequence[int], seeds: Sequence[int | None]) -> list[dict[str, Any]]:
        """Starts a new episode in the envs ``rows`` (local indices): their restart.

        An env that raised in the last step is closed (errors ignored) and built again first.
        Each env is reset with its seed; its row gets the new episode's first obs, reward 0,
        ``terminated`` False and ``truncated`` True. The final obs row is left alone: it holds
        the last obs of the episode that was cut short.

        Args:
            rows: Local indices of the envs to restart.
            seeds: One seed (or None) per env of ``rows``.

        Returns:
            The reset infos, one per env of ``rows``.

        Raises:
            RuntimeError: The group was built without ``env_fns`` and an env needs rebuilding.
            Exception: What building or resetting an env raised (:attr:`current` names it).
        """
        infos = []
        for j, seed in zip(rows, seeds, strict=True):
            self.current = j
            if j in self._broken:
                if self._env_fns is None:
                    raise RuntimeError("this EnvGroup was built without env_fns: no restarts")
                with contextlib.suppress(Exception):
                    self.envs[j].close()
                env = build_envs(self._env_fns[j : j + 1], self.offset + j, self._spaces)[0]
                self.envs[j], self._steps[j], self._resets[j] = env, env.step, env.reset
                self._broken.discard(j)
            o, info = self.envs[j].reset(seed=seed)
            if self._transform is not None:
                o = self._transform.observation(o)
                self._episode_start[j] = self._t
            self.obs[j] = o
            self.reward[j] = 0.0
            self.terminated[j] = False
            self.truncated[j] = True
            infos.append(info)
        self.current = None
        return infos

    def _step_next_or_disabled(self, want_info: bool) -> dict[str, Any]:
        """The ``NEXT_STEP`` and ``DISABLED`` loop, as ``AsyncVectorEnv``'s worker steps.

        ``NEXT_STEP``: an env whose episode ended on the previous step ignores its action
        and is reset instead; it reports the reset obs and info, reward 0 and both flags
        False. ``DISABLED``: every env is stepped, ended or not; resetting is the caller's
        job (``reset(options={"reset_mask": mask})``). No final obs is written.
        """
        actions = self._actions()
        next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        autoreset, resets = self._autoreset, self._resets
        # With a transform: the envs reset instead of stepped (their obs is a reset obs).
        fresh = [j for j, a in enumerate(autoreset) if a] if self._transform is not None else None
        obs, rewards, terms, truncs = self._obs_list, self._rewards, self._terms, self._truncs
        infos = self._infos
        any_info = False
        j = -1
        try:
            for step in self._steps:
                j += 1
                if autoreset[j]:
                    o, info = resets[j]()
                    rewards[j], te, tr = 0.0, False, False
                else:
                    o, rewards[j], te, tr, info = step(actions[j])
                terms[j] = te
                truncs[j] = tr
                if next_step:
                    autoreset[j] = bool(te or tr)
                obs[j] = o
                if want_info:
                    infos[j] = info
                    if info:
                        any_info = True
        except BaseException:
            self.current = j
            raise
        return self._publish(any_info, want_info, fresh)

    def _publish(
        self, any_info: bool, want_info: bool, fresh: list[int] | None = None
    ) -> dict[str, Any]:
        """Stores a step's per-env lists in the shared arrays; returns the batched infos.

        Args:
            any_info: Whether an env returned an info.
            want_info: Whether infos are collected (for the envs a transform fails).
            fresh: With a transform, in ``NEXT_STEP`` mode: the envs reset instead of
                stepped.
        """
        if self._transform is None:
            self.obs[...] = self._obs_list
            self.reward[:] = self._rewards
        else:
            self._publish_transformed(want_info, fresh or [])
        self.terminated[:] = self._terms
        self.truncated[:] = self._truncs
        return batch_infos(self._infos) if any_info else {}

    def _publish_transformed(self, want_info: bool, fresh: list[int]) -> None:
        """Maps and checks a step's observations and rewards at once; stores them.

        Raises:
            ValueError: An env returned a non-finite observation or reward (not restartable;
                :attr:`current` is that env). A restartable group fails such envs instead.
        """
        transform = self._transform
        self._t += 1
        finals = self._final_sink  # {j: raw final obs} of the episodes that ended
        skip = {report["env_index"] - self.offset for report in self.failures}
        for j in skip:  # envs that raised: their rows already hold what they report
            finals.pop(j, None)
        obs = transform.observations(np.asarray(self._obs_list))
        total = float(obs.sum()) + sum(self._rewards)
        rows = list(finals)
        final = None
        if rows:
            final = transform.observations(np.asarray([finals[j] for j in rows]))
            total += float(final.sum())
        finals.clear()
        if not math.isfinite(total):  # NaN and inf survive a sum: look env by env
            ended = dict(zip(rows, final, strict=True)) if rows else {}
            starts = rows or fresh
            failed = self._fail_non_finite(obs, ended, starts, skip, want_info)
            if failed:
                skip |= failed
                if rows:
                    keep = [k for k, j in enumerate(rows) if j not in failed]
                    rows, final = [rows[k] for k in keep], final[keep]
        for j in skip:
            obs[j] = self._obs_list[j]
        self.obs[...] = obs
        if rows:
            self.final_obs[rows] = final
        self.reward[:] = self._rewards
        start = self._episode_start
        for j in rows or fresh:
            start[j] = self._t

    def _fail_non_finite(
        self,
        obs: np.ndarray,
        ended: dict[int, np.ndarray],
        starts: list[int],
        skip: set[int],
        want_info: bool,
    ) -> set[int]:
        """The slow path of the finiteness check: finds the envs that returned NaN or inf.

        Args:
            obs: The normalised obs of every env (reset obs where an episode started).
            ended: The normalised final obs of the envs whose episode ended (``SAME_STEP``).
            starts: The envs whose obs is a reset obs.
            skip: Envs that raised in this step.
            want_info: Whether infos are collected.

        Returns:
            The envs failed (restartable group); empty when every value was finite.

        Raises:
            ValueError: The first such env's error (not restartable; :attr:`current` is it).
        """
        starts_set = set(starts)
        # The obs each env's step returned: its final obs where its episode ended; none where
        # it was reset instead of stepped (NEXT_STEP).
        step_obs = [
            ended[j] if j in ended else None if j in starts_set else obs[j]
            for j in range(self.count)
        ]
        reset_obs = {j: obs[j] for j in starts}
        steps = [self._t - s for s in self._episode_start]
        errors = self._transform.first_error(self._rewards, step_obs, reset_obs, steps, skip)
        if errors and self._env_fns is None:
            self.current = errors[0][0]
            raise ValueError(errors[0][1])
        for j, message in errors:
            self.current = j
            try:
                raise ValueError(message)
            except ValueError as exc:  # raised, so that its report has a traceback
                self._fail(exc, want_info)
        if errors:
            self.failures.sort(key=lambda report: report["env_index"])
        return {j for j, _ in errors}

    def reset(
        self,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
        mask: Sequence[bool] | None = None,
    ) -> dict[str, Any]:
        """Resets the envs (env ``j`` with ``seeds[j]``); writes their obs, clears their flags.

        Args:
            seeds: One seed (or None) per env of the group.
            options: Passed to every env's ``reset``.
            mask: Reset only env ``j`` with ``mask[j]`` (Gymnasium's ``reset_mask``); the
                others keep their state and their last obs, and report no info.

        Returns:
            The batched reset infos of this group.
        """
        infos: list[dict[str, Any]] = [{}] * self.count
        for j, env in enumerate(self.envs):
            if mask is not None and not mask[j]:
                continue
            self.current = j
            o, infos[j] = env.reset(seed=seeds[j], options=options)
            if self._transform is not None:
                o = self._transform.observation(o)
                self._episode_start[j] = self._t
            self.obs[j] = o
            self.final_obs[j] = o
            self.reward[j] = 0.0
            self.terminated[j] = False
            self.truncated[j] = False
            self._autoreset[j] = False
        self.current = None
        return batch_infos(infos)

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        """Calls method ``name`` (or reads attribute ``name``) on every env (through wrappers)."""
        results = []
        if self._transform is not None and name in _SPACE_NAMES:
            # The envs are raw; the spaces they have in the batch are the transform's.
            return [self._transform.spaces[_SPACE_NAMES.index(name)]] * self.count
        for j, env in enumerate(self.envs):
            self.current = j
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        self.current = None
        return results

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        """Sets attribute ``name`` of env ``j`` to ``values[j]`` (through wrappers)."""
        for j, env in enumerate(self.envs):
            self.current = j
            env.set_wrapper_attr(name, values[j])
        self.current = None

    def close(self) -> None:
        """Closes every env, ignoring errors (closing must not fail)."""
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()


def build_envs(
    env_fns: Sequence[Callable[[], gymnasium.Env]],
    offset: int,
    spaces: tuple[gymnasium.Space, gymnasium.Space] | None,
) -> list[gymnasium.Env]:
    """Builds envs, checking that their spaces equal ``spaces`` (observation, action).

    An exception raised while building env ``offset + j`` carries that index in its attribute
    ``batchppo_env_index``; the envs built so far are closed.

    Raises:
        SpaceMismatchError: An env's spaces differ from the expected ones (names the env
            index).
    """
    envs: list[gymnasium.Env] = []
    index = offset
    try:
        for j, fn in enumerate(env_fns):
            index = offset + j
            env = fn()
            envs.append(env)
            if spaces is not None:
                check_spaces(env, index, spaces)
    except BaseException as exc:
        for env in envs:
            with contextlib.suppress(Exception):
                env.close()
        with contextlib.suppress(Exception):
            exc.batchppo_env_index = index  # type: ignore[attr-defined]
        raise
    return envs


class SpaceMismatchError(ValueError, RuntimeError):
    """An env's observation or action space differs from env 0's.

    A ``ValueError``, and the ``RuntimeError`` that Gymnasium's ``AsyncVectorEnv`` raises in
    this case, so code written for either catches it.
    """


def check_spaces(
    env: gymnasium.Env, index: int, spaces: tuple[gymnasium.Space, gymnasium.Space]
) -> None:
    """Raises SpaceMismatchError if ``env``'s observation or action space differs from ``spaces``.

    Args:
        env: The env to check.
        index: Its global index (named in the message).
        spaces: Env 0's ``(observation_space, action_space)``.

    Raises:
        SpaceMismatchError: Naming the env, both spaces and what differs between them.
    """
    for label, space, expected in (
        ("observation", env.observation_space, spaces[0]),
        ("action", env.action_space, spaces[1]),
    ):
        if space != expected:
            raise SpaceMismatchError(
                f"env {index} has {label} space {space}, but env 0 has {expected} "
                f"({space_difference(space, expected)}); all envs of a batch need equal spaces."
            )


def space_difference(space: gymnasium.Space, expected: gymnasium.Space) -> str:
    """Says in a few words how ``space`` differs from ``expected`` (for error messages).

    Args:
        space: The space of the env being checked.
        expected: Env 0's space.

    Returns:
        For example ``"the shapes differ: (4,) vs (3,)"``.
    """
    if type(space) is not type(expected):
        return f"the types differ: {type(space).__name__} vs {type(expected).__name__}"
    if space.shape != expected.shape:
        return f"the shapes differ: {space.shape} vs {expected.shape}"
    if space.dtype != expected.dtype:
        return f"the dtypes differ: {space.dtype} vs {expected.dtype}"
    for name, what in (
        ("low", "lower bounds"),
        ("high", "upper bounds"),
        ("n", "sizes"),
        ("nvec", "sizes"),
        ("start", "starts"),
    ):
        if not hasattr(expected, name):
            continue
        a, b = np.asarray(getattr(space, name)), np.asarray(getattr(expected, name))
        differs = a != b
        if a.dtype.kind == "f":
            differs &= ~(np.isnan(a) & np.isnan(b))
        if not differs.any():
            continue
        if a.ndim == 0:
            return f"the {what} differ: {a} vs {b}"
        at = tuple(int(i) for i in np.argwhere(differs)[0])
        return f"the {what} differ at index {at[0] if a.ndim == 1 else at}: {a[at]} vs {b[at]}"
    return "they are not equal"


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
    layout: Layout,
    buffer: Any,
    cmd_sem: Any,
    done_sem: Any,
    conn: Any,
    alive_r: Any,
    spin_s: float,
) -> None:
    """Entry point of a worker process (see the module docstring for the protocol).

    Args:
        slot: Index of this worker (its command/status word).
        payload: cloudpickled ``(env_fns, spaces, discrete, autoreset_mode, restartable,
            transform)``; a restartable worker's group keeps ``env_fns`` to rebuild envs that
            raise; ``spaces`` are the envs' own (the raw ones under a ``transform``).
        offset: Global index of this worker's first env.
        layout: Layout of the shared buffer.
        buffer: The shared buffer (a ``RawArray``).
        cmd_sem: Released by the parent when a command is waiting.
        done_sem: Released by this worker when a command is done.
        conn: This worker's end of its pipe to the parent.
        alive_r: Read end of a pipe the parent never writes: EOF means the parent died.
        spin_s: Seconds of non-blocking tries before blocking on a semaphore.
    """
    # Ctrl-C reaches the whole process group; the parent decides what happens.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(
        target=_exit_when_parent_dies, args=(alive_r,), name="batchppo-parent-watch", daemon=True
    ).start()
    group: EnvGroup | None = None
    try:
        env_fns, spaces, discrete, autoreset_mode, restartable, transform = cloudpickle.loads(
            payload
        )
        envs = build_envs(env_fns, offset, spaces)
        group = EnvGroup(
            envs,
            offset,
            layout.views(buffer),
            discrete,
            None,
            autoreset_mode,
            env_fns if restartable else None,
            transform,
        )
    except BaseException as exc:
        index = getattr(exc, "batchppo_env_index", None)
        conn.send(("error", describe_exception(exc, index)))
        conn.close()
        return
    conn.send(("ready", os.getpid()))
    views = layout.views(buffer)
    cmd, status = views["cmd"], views["status"]
    try:
        while True:
            if not _wait(cmd_sem, spin_s, alive_r):
                return
            command = int(cmd[slot])
            if command in (CMD_STEP, CMD_STEP_INFO):
                message = None
                try:
                    info = group.step(command == CMD_STEP_INFO)
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
                # Release first, then send: a message larger than the pipe's buffer must not
                # block this worker while the parent still waits on the semaphore.
                done_sem.release()
                if message is not None:
                    try:
                        conn.send(message)
                    except (EOFError, BrokenPipeError, ConnectionResetError):
                        raise
                    except Exception as exc:  # e.g. an info that cannot be pickled
                        conn.send(("error", describe_exception(exc, None)))
            elif command == CMD_PIPE:
                message = conn.recv()
                if _handle(message, group, conn):
                    return
            else:  # pragma: no cover - protocol violation
                raise RuntimeError(f"worker {slot}: unknown command word {command}")
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return
    finally:
        group.close()


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
        if kind == "reset":
            result = group.reset(message[1], message[2], message[3])
        elif kind == "restart":
            result = group.restart(message[1], message[2])
        elif kind == "call":
            result = group.call(message[1], message[2], message[3])
        elif kind == "set_attr":
            group.set_attr(message[1], message[2])
            result = None
        else:
            raise RuntimeError(f"unknown message {kind!r}")
    except Exception as exc:
        conn.send(("error", describe_exception(exc, group.current_global)))
        group.current = None
        return False
    conn.send(("ok", result))
    return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit("batchppo.envs.worker is started by BatchEnv, not run directly.")

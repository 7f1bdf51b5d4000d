"""BatchEnv: Gymnasium envs stepped in worker processes over shared memory.

``BatchEnv`` is a ``gymnasium.vector.VectorEnv`` that can stand in for Gymnasium's
``AsyncVectorEnv``. ``W`` worker processes, started with ``forkserver``, step ``K`` envs each; by
default one per available core, and the calling process steps none, so an env that crashes
(``os._exit``, a segfault) kills only its worker and surfaces as
[`WorkerDiedError`][batchppo.envs.WorkerDiedError]. ``WorkerOptions(step_in_parent=True)`` opts
into the parent stepping the first share itself (one process fewer), giving up that isolation.
Observations, actions, rewards, terminated, truncated and final observations live in one shared
buffer, one array per leaf of a nested Dict/Tuple space (``batchppo.envs.spaces``); a step moves no
Python object between processes (see ``batchppo.envs.workers.protocol`` for the protocol).

Autoreset follows Gymnasium's ``AutoresetMode``, chosen with ``autoreset_mode=`` and reported in
``metadata["autoreset_mode"]``. The default is Gymnasium's own, ``NEXT_STEP``, so that
``BatchEnv(env_fns)`` stands where ``AsyncVectorEnv(env_fns)`` stood, under Gymnasium's vector
wrappers too. The learners and [`make`][batchppo.envs.make.make] ask for ``SAME_STEP``: where an
episode ended, the returned obs is the first obs of the next episode and ``infos["final_obs"]``
holds the episode's last obs. Unlike Gymnasium (an object array holding obs only where an episode
ended), ``infos["final_obs"]`` is *dense*: the batch's structure and shapes, equal to ``obs`` where
no episode ended, present at every step, with the mask ``infos["_final_obs"]``. That costs no
per-step allocation, and a learner can bootstrap ``V(final_obs)`` vectorised. As in Gymnasium,
``step`` reports the info of every finished episode in ``infos["final_info"]`` (batched, ``{}`` when
the envs returned none) with the mask ``infos["_final_info"]``. ``NEXT_STEP`` and ``DISABLED``
behave exactly as in ``AsyncVectorEnv``; ``step_arrays``, the learner's fast path, and env restarts
exist in ``SAME_STEP`` mode only.

Each env is built once: the workers build theirs and report env 0's spaces and metadata, then the
parent lays out the shared memory and hands it to them. No env is built in the calling process
unless ``step_in_parent`` (AsyncVectorEnv builds env 0 there once more). A script may build a
BatchEnv at its top level without ``if __name__ == "__main__":``: its workers then do not run the
script again (see ``batchppo.envs.workers.processes``).

Errors fail fast by default. With ``WorkerOptions(max_restarts=N)`` an env whose step raises, or
whose worker dies, is rebuilt and its episode reported as truncated, up to N times (see *Restarts*
in [`WorkerOptions`][batchppo.envs.WorkerOptions]).

``BatchEnv`` holds the Gymnasium API over its shared arrays (``SharedArrays``), its pending call in
a ``CallState``. Its worker processes are a ``WorkerPool`` (start, messages, respawn, dead and hung
workers, stopping), which reports a dead or killed worker back so that the batch env breaks; the
parent's share of the envs is one more slot of the pool (``LocalWorker``). The restart policy is
``batchppo.envs.workers.restarts``, the keywords shared with ``AsyncVectorEnv`` and Gymnasium's
argument checks ``batchppo.envs.async_compat``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import multiprocessing as mp
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from batchppo.core.worker_options import WorkerOptions, check_worker_options
from batchppo.envs.async_compat import (
    CallingVectorEnv,
    InvalidArgumentError,
    batch_observation_space,
    check_async_options,
    check_callable,
    expected_spaces,
    parse_autoreset_mode,
    parse_seeds,
    per_env_values,
    split_reset_mask,
)
from batchppo.envs.errors import EnvTimeoutError, WorkerDiedError, WorkerError
from batchppo.envs.infos import merge_info_parts
from batchppo.envs.spaces import check_supported
from batchppo.envs.stack.batch_transform import BatchTransform, TransformFactory, resolve_transform
from batchppo.envs.workers.call_state import BatchState, CallState
from batchppo.envs.workers.pool import WorkerPool
from batchppo.envs.workers.protocol import Layout
from batchppo.envs.workers.restarts import EnvRestartWarning, Restarts, restart_seed
from batchppo.envs.workers.shared_arrays import SharedArrays
from batchppo.envs.workers.worker_processes import split_envs

__all__ = [
    "BatchEnv",
    "BatchState",
    "EnvRestartWarning",
    "EnvTimeoutError",
    "InvalidArgumentError",
    "WorkerDiedError",
    "WorkerError",
    "restart_seed",
]

_LIVE: weakref.WeakSet[BatchEnv] = weakref.WeakSet()
_DEFAULT = BatchState.DEFAULT
_WAITING_STEP = BatchState.WAITING_STEP


def _close_all_at_exit() -> None:
    for env in list(_LIVE):
        with contextlib.suppress(Exception):
            env.close(terminate=True)


atexit.register(_close_all_at_exit)


class BatchEnv(CallingVectorEnv):
    """Gymnasium envs stepped in parallel by worker processes over shared memory.

    A drop-in for ``gymnasium.vector.AsyncVectorEnv``: the same spaces and batching
    (``batch_space``; Dict/Tuple observations and actions come as dicts/tuples of arrays), autoreset
    modes, ``reset_mask``, ``*_async``/``*_wait`` pairs and error classes. Where it differs on
    purpose: ``final_obs`` is dense (see the module docstring), rewards are float32, and a
    ``*_wait`` that times out leaves its call pending (call it again to keep waiting) instead of
    abandoning it.

    Examples:
        >>> import gymnasium
        >>> from batchppo.envs import BatchEnv
        >>> with BatchEnv([lambda: gymnasium.make("Pendulum-v1")] * 8) as env:  # NEXT_STEP
        ...     obs, infos = env.reset(seed=0)
        ...     obs, reward, terminated, truncated, infos = env.step(env.action_space.sample())

    Args:
        env_fns: One callable per env returning a ``gymnasium.Env`` (lambdas and closures are fine:
            they are shipped with cloudpickle).
        worker_options: Where the envs are stepped and how their faults are met (workers, envs
            per worker, ``step_in_parent``, env restarts, ``step_timeout``, spinning): a
            [`WorkerOptions`][batchppo.envs.WorkerOptions] (its *Restarts* say how an env is
            restarted); None: its defaults (a worker per CPU, fail fast, no time limit).
        shared_memory: As in ``AsyncVectorEnv``, but only True: BatchEnv always passes observations
            through shared memory (False raises a ``ValueError`` naming ``AsyncVectorEnv``).
        copy: As in ``AsyncVectorEnv``: True (the default) returns fresh observation arrays; False
            returns views into shared memory (``infos["final_obs"]`` too) that the next step or
            reset overwrites. Rewards and flags are fresh either way; with False,
            [`step_arrays`][batchppo.envs.BatchEnv.step_arrays] returns views for all five arrays.
        context: The workers' start method (``AsyncVectorEnv``'s name): ``"forkserver"`` (None,
            the default) or ``"spawn"``; ``"fork"`` raises a ``ValueError`` (a worker forked from
            a process that runs threads, JAX's, can deadlock). Reported in ``context``.
        daemon: As in ``AsyncVectorEnv`` (default True): False for envs that start processes of
            their own (``close``, Ctrl-C and the parent's death still end the workers).
        worker: Only None: BatchEnv's workers run their own protocol (a function raises a
            ``ValueError`` naming a ``gymnasium.Wrapper`` per env, or ``AsyncVectorEnv``).
        observation_mode: As in ``AsyncVectorEnv``: ``"same"`` (the default), ``"different"``
            (spaces that differ in their bounds only; ``single_observation_space`` is env 0's,
            ``observation_space`` batches them all with ``batch_differing_spaces``), or a tuple
            ``(observation_space, single_observation_space)`` whose single space every env's
            must match in shape and dtype. Other than ``"same"``, no ``transform``.
        autoreset_mode: A ``gymnasium.vector.AutoresetMode`` or its value (``"SameStep"``,
            ``"NextStep"``, ``"Disabled"``); default ``NEXT_STEP``, as in ``AsyncVectorEnv``.
            ``SAME_STEP`` is what the learners use, and what
            [`step_arrays`][batchppo.envs.BatchEnv.step_arrays] and ``max_restarts`` need.
        transform: A [`BatchTransform`][batchppo.envs.BatchTransform]: the standard wrapper stack,
            which the workers apply to all their envs at once. The env functions build raw envs
            (``transform.raw_spaces``); the batch env reports ``transform.spaces`` (``get_attr``
            too) and behaves exactly as over envs in that stack. Or a ``TransformFactory`` (what
            [`make`][batchppo.envs.make.make] passes), asked for the transform once env 0's raw
            spaces are known; where it has none, every env gets its per-env stack.

    Attributes:
        shared_memory, copy, context, daemon, worker, observation_mode: As in ``AsyncVectorEnv``
            (``context`` is the start method in use, ``worker`` None).
        worker_options: The worker options given at construction (``max_restarts`` and
            ``step_timeout`` are theirs too).

    Raises:
        ValueError: No envs, an unknown autoreset mode, unsupported or differing spaces.
        TypeError: ``worker_options`` is not a ``WorkerOptions``.
        RuntimeError: This Python cannot start workers without running an unguarded main script
            again (the message names the fix).
    """

    def __init__(
        self,
        env_fns: Iterable[Callable[[], gymnasium.Env]],
        worker_options: WorkerOptions | None = None,
        *,
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: str | tuple[gymnasium.Space, gymnasium.Space] = "same",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        transform: BatchTransform | None = None,
    ):
        self._calls = CallState()  # which call is pending
        self._pool: WorkerPool | None = None  # the worker processes
        self._arrays: SharedArrays | None = None  # laid out once env 0's spaces are known
        self._transform: BatchTransform | None = None  # decided once env 0's spaces are known
        self._want_info = False  # of the step in flight

        options = check_worker_options(worker_options)
        env_fns = list(env_fns)
        num_envs = len(env_fns)
        ranges, parent_envs = split_envs(
            num_envs, options.num_workers, options.envs_per_worker, options.step_in_parent
        )
        start_method, obs_rule = check_async_options(
            shared_memory, copy, context, daemon, worker, observation_mode, transform
        )
        # AsyncVectorEnv's attributes of the same names.
        self.shared_memory = True
        self.context = start_method
        self.daemon = daemon
        self.worker = None
        self.observation_mode = observation_mode
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self._same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        self.worker_options = options
        self.max_restarts = options.max_restarts
        self.step_timeout = options.step_timeout
        self._restarts = Restarts(self.max_restarts, num_envs, self.autoreset_mode)
        self._restartable = restartable = self.max_restarts > 0
        self.num_envs = num_envs
        self.copy = copy
        self._pool = WorkerPool(
            start_method,
            ranges,
            options,
            parent_envs=parent_envs,
            daemon=daemon,
            on_broken=self._calls.mark_broken,
        )

        _LIVE.add(self)
        try:
            reports = self._pool.start(
                env_fns, observation_mode, obs_rule, self.autoreset_mode, restartable, transform
            )
            self._setup(reports, observation_mode, transform)
        except BaseException:
            self.close(terminate=True)
            raise

    def _setup(
        self,
        reports: list[dict[str, Any]],
        observation_mode: str | tuple[gymnasium.Space, gymnasium.Space],
        transform: BatchTransform | TransformFactory | None,
    ) -> None:
        """Decides the spaces and the transform from env 0 (its slot's report, the first of
        ``reports``), lays out the shared memory, and has every slot take its rows."""
        env0 = reports[0]
        raw = (env0["observation_space"], env0["action_space"])
        self.metadata = {**env0["metadata"], "autoreset_mode": self.autoreset_mode}
        self.render_mode = env0["render_mode"]
        expected = expected_spaces(observation_mode, raw)  # what every env must match
        self._transform, wrap, (obs_space, act_space) = resolve_transform(transform, raw, expected)
        check_supported(obs_space, act_space)
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self._arrays = SharedArrays(self.num_envs, self._pool.size, obs_space, act_space)
        self._pool.connect(expected, self._arrays, self._transform, wrap is not None)
        self.observation_space = batch_observation_space(
            observation_mode, self.observation_space, reports
        )

    @property
    def transform(self) -> BatchTransform | None:
        """The batch transform the envs' groups apply (see ``transform`` in the constructor):
        the one given, or the one a ``TransformFactory`` chose; None when there is none or
        the envs got the factory's per-env stack."""
        return self._transform

    @property
    def restarts(self) -> int:
        """Envs restarted so far (see *Restarts*), at most ``max_restarts``."""
        return self._restarts.count

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """The pid of each worker process, in worker order (one per entry of
        [`worker_envs`][batchppo.envs.BatchEnv.worker_envs]); a worker that died keeps its pid until
        it is respawned. Empty when the parent steps every env. Read-only: for tests, monitoring."""
        return self._pool.pids

    @property
    def worker_envs(self) -> list[tuple[int, int]]:
        """Where the envs are stepped: ``(start, stop)`` of each worker's envs, in worker order (a
        new list each time; the parent's own share is
        [`parent_envs`][batchppo.envs.BatchEnv.parent_envs])."""
        return self._pool.ranges

    @property
    def parent_envs(self) -> tuple[int, int] | None:
        """``(0, stop)``: the envs the calling process steps itself (``step_in_parent``);
        None when the workers step them all (the default)."""
        return self._pool.parent_envs

    @property
    def shared_layout(self) -> Layout:
        """Where the shared arrays live in the one shared buffer (``Layout``: each observation and
        action leaf's shape and dtype, as the workers write them). Read-only: for tests and
        diagnostics."""
        return self._arrays.layout

    @property
    def closed(self) -> bool:
        """Whether ``close`` has run (Gymnasium's ``VectorEnv.closed``)."""
        return self._calls.state is BatchState.CLOSED

    @closed.setter
    def closed(self, value: bool) -> None:
        # VectorEnv.close sets ``closed = True`` once close_extras has run.
        if value:
            self._calls.state = BatchState.CLOSED

    # ------------------------------------------------------------------ stepping

    def step_async(self, actions: Any) -> None:
        """Writes ``actions`` into shared memory and starts the workers.

        Args:
            actions: An element of ``action_space``: shape ``(num_envs, *action_shape)``, or a
                dict/tuple of such arrays for a Dict/Tuple action space.

        Raises:
            ValueError: ``actions`` has the wrong structure, shape or dtype (the message
                names the expected ones).
            AlreadyPendingCallError: A step, reset or call is pending.
            ClosedEnvironmentError: The batch env is closed.
        """
        self._start_step(actions, True)

    def _start_step(self, actions: Any, want_info: bool) -> None:
        calls = self._calls
        if calls.state is not _DEFAULT:
            calls.check_idle("step_async")
        self._arrays.write_actions(actions)
        self._pool.start_step(want_info)
        calls.state = _WAITING_STEP
        self._want_info = want_info

    def _finish_step(self, timeout: float | None) -> dict[str, Any]:
        """Gathers the pool's answers to the step; returns the batched infos."""
        calls = self._calls
        if calls.state is not _WAITING_STEP:
            calls.check_waiting(_WAITING_STEP, "step_wait")
        want_info = self._want_info
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            # Only the slots that have not answered yet (a step_wait may have timed out).
            error, parts, failures, dead = self._pool.wait_step(deadline, self._restartable)
        except mp.TimeoutError:
            # The step stays pending; the pool keeps the answers gathered so far.
            if calls.state is BatchState.BROKEN:  # a dead worker; the restarts come at the end
                calls.state = _WAITING_STEP
            raise
        except KeyboardInterrupt:
            # Workers may be mid-step: the batch cannot be resynchronised, so close it.
            self.close(terminate=True)
            raise
        except BaseException:
            calls.end_wait(_WAITING_STEP)
            raise
        calls.state = BatchState.BROKEN if dead else _DEFAULT
        if error is not None:
            raise error
        if failures or dead:
            self._restarts.check_budget(failures, dead, self._pool)
            calls.state = _DEFAULT
            parts += self._restarts.restart(failures, dead, self._pool, self._arrays)
        self._arrays.end_step(self._same_step)
        return merge_info_parts(parts, self.num_envs) if want_info and parts else {}

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Waits for the step started by [`step_async`][batchppo.envs.BatchEnv.step_async]; steps
        the parent's share.

        Args:
            timeout: Seconds to wait for the workers; None waits forever. On timeout a
                ``multiprocessing.TimeoutError`` is raised and the step stays pending.

        Returns:
            ``(obs, reward, terminated, truncated, infos)``; reward is float32. In
            ``SAME_STEP`` mode infos holds the dense ``final_obs`` and its mask
            ``_final_obs`` (see the module docstring).

        Raises:
            NoAsyncCallError: No step is pending.
            WorkerDiedError: A worker process died.
            Exception: An env raised; the same type, its message extended by the env index
                and the worker's traceback.
        """
        infos = self._finish_step(timeout)
        a = self._arrays
        copy = a.copy_obs if self.copy else _identity
        if self._same_step:
            infos["final_obs"] = copy(a.final_obs)
            infos["_final_obs"] = a.done.copy()
        # As in AsyncVectorEnv, `copy` is about observations: the rest is always fresh.
        return copy(a.obs), a.reward.copy(), a.terminated.copy(), a.truncated.copy(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Steps every env; ended episodes autoreset as ``autoreset_mode`` says.

        Args:
            actions: An element of ``action_space``.

        Returns:
            ``(obs, reward, terminated, truncated, infos)``, as
            [`step_wait`][batchppo.envs.BatchEnv.step_wait].
        """
        self._start_step(actions, True)
        return self.step_wait()

    def step_arrays(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Any]:
        """The fast path (``SAME_STEP`` mode only): steps every env, returns arrays, no infos.

        Args:
            actions: An element of ``action_space``.

        Returns:
            ``(obs, reward, terminated, truncated, final_obs)``: obs and final_obs in the
            observation space's structure and dtypes, reward float32, terminated/truncated
            bool. Views into shared memory (valid until the next step) when the batch env has
            ``copy=False``.

        Raises:
            RuntimeError: The batch env is not in ``SAME_STEP`` mode, where a dense ``final_obs`` is
                the last obs of each finished episode; use [`step`][batchppo.envs.BatchEnv.step].
        """
        if not self._same_step:
            raise RuntimeError(
                f"step_arrays needs autoreset_mode=SAME_STEP (its final_obs is the last obs of "
                f"each finished episode); this BatchEnv uses {self.autoreset_mode}. Call step."
            )
        self._start_step(actions, False)
        self._finish_step(None)
        return self._arrays.results(self.copy)

    # ------------------------------------------------------------------ pipe requests

    def reset_async(
        self,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Starts resetting the envs; [`reset_wait`][batchppo.envs.BatchEnv.reset_wait] returns the
        result.

        Args:
            seed: None, an int (env ``i`` gets ``seed + i``) or one seed (or None) per env.
            options: Passed to every env's ``reset``. ``options["reset_mask"]``, a bool array
                of shape ``(num_envs,)``, resets only the envs where it is True (the others
                keep their episode and their last obs), as in Gymnasium; unlike Gymnasium,
                the caller's dict is not modified.

        Raises:
            InvalidArgumentError: A seed list of the wrong length, or a bad ``reset_mask``.
            AlreadyPendingCallError: A step, reset or call is pending.
            ClosedEnvironmentError: The batch env is closed.
        """
        self._calls.check_usable()
        seeds = parse_seeds(seed, self.num_envs)
        self._calls.check_idle("reset_async")
        options, mask = split_reset_mask(options, self.num_envs)
        self._restarts.note_seeds(seeds, mask)
        send = functools.partial(self._pool.send_reset, seeds, options, mask)
        self._calls.start(BatchState.WAITING_RESET, "reset_async", send, self._abort)

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """Waits for the reset started by [`reset_async`][batchppo.envs.BatchEnv.reset_async];
        resets the parent's share.

        Args:
            timeout: Seconds to wait for the workers; None waits forever. On timeout a
                ``multiprocessing.TimeoutError`` is raised and the reset stays pending.

        Returns:
            ``(obs, infos)`` with infos batched Gymnasium-style (only the envs reset report).

        Raises:
            NoAsyncCallError: No reset is pending.
        """
        results = self._answers(BatchState.WAITING_RESET, "reset_wait", timeout)
        parts = [(start, stop - start, info) for start, stop, info in results]
        infos = merge_info_parts(parts, self.num_envs)
        a = self._arrays
        a.done[...] = False
        return (a.copy_obs(a.obs) if self.copy else a.obs), infos

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the envs: [`reset_async`][batchppo.envs.BatchEnv.reset_async], then
        [`reset_wait`][batchppo.envs.BatchEnv.reset_wait] (see both).

        Returns:
            ``(obs, infos)`` with infos batched Gymnasium-style.
        """
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Starts calling method ``name`` of every env (or reading attribute ``name``).

        Raises:
            ValueError: ``name`` is one of ``reset``, ``step``, ``close`` (use them directly).
            AlreadyPendingCallError: A step, reset or call is pending.
        """
        check_callable(name)
        send = functools.partial(self._pool.send_call, name, args, kwargs)
        self._calls.start(BatchState.WAITING_CALL, "call_async", send, self._abort)

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """Waits for the call started by [`call_async`][batchppo.envs.BatchEnv.call_async]; one
        result per env.

        Raises:
            NoAsyncCallError: No call is pending.
            multiprocessing.TimeoutError: ``timeout`` passed; the call stays pending.
        """
        results = self._answers(BatchState.WAITING_CALL, "call_wait", timeout)
        out = []
        for _, _, values in results:
            out.extend(values)
        return tuple(out)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads attribute ``name``); one result each."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every env; ``values`` is one value or one per env.

        Raises:
            ValueError: A list or tuple whose length is not ``num_envs``.
            AlreadyPendingCallError: A step, reset or call is pending.
        """
        self._calls.check_usable()
        values = per_env_values(values, self.num_envs)
        send = functools.partial(self._pool.send_set_attr, name, values)
        self._calls.start(BatchState.WAITING_CALL, "set_attr", send, self._abort)
        self._answers(BatchState.WAITING_CALL, "set_attr", None)

    def _answers(
        self, state: BatchState, caller: str, timeout: float | None
    ) -> list[tuple[int, int, Any]]:
        """Every slot's answer to the pending request of ``state``, ``(start, stop, answer)`` in
        env order (the parent's share runs it now); raises the first error an env raised."""
        results, error = self._calls.wait(
            state,
            caller,
            functools.partial(self._pool.wait_answers, timeout, caller, state.value),
            self._abort,
        )
        if error is not None:
            raise error
        return results

    def _abort(self) -> None:
        """Closes at once: Ctrl-C came while the workers may be answering, so the pipes cannot
        be resynchronised."""
        self.close(terminate=True)

    # ------------------------------------------------------------------ closing

    def close_extras(self, timeout: float = 1.0, terminate: bool = False, **kwargs: Any) -> None:
        """Stops the workers: asks them to close, then terminates, then kills. Never hangs.

        A pending step, reset or call is abandoned (the workers finish it, then close), with
        the ``UserWarning`` that ``AsyncVectorEnv`` gives (which waits for the call instead).

        Args:
            timeout: Seconds the workers get to close their envs and exit on their own.
            terminate: Skip asking; terminate at once.
            **kwargs: What Gymnasium's ``close(**kwargs)`` passes on; ignored.
        """
        _LIVE.discard(self)
        state = self._calls.state
        if state.value in ("reset", "step", "call"):
            gymnasium.logger.warn(
                f"Calling `close` while waiting for a pending call to `{state.value}` to complete."
            )
        if self._pool is not None:
            self._pool.stop(timeout, terminate, ask=state is not BatchState.BROKEN)
        if self._arrays is not None:
            self._arrays.close()

    def __del__(self):
        if not getattr(self, "closed", True):
            with contextlib.suppress(Exception):
                self.close(terminate=True)

    def __repr__(self) -> str:
        return (
            f"BatchEnv(num_envs={getattr(self, 'num_envs', '?')}, "
            f"workers={self._pool.size if getattr(self, '_pool', None) else 0}, "
            f"in_parent={self._pool.parent_count if getattr(self, '_pool', None) else 0})"
        )


def _identity(x: np.ndarray) -> np.ndarray:
    return x

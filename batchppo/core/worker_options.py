"""WorkerOptions: how a host batch env shares its envs among workers and meets their faults, as
one checked value.

The settings that ``AsyncVectorEnv`` has no word for (how many workers, whether the calling
process steps a share, the restart budget, the time limit on a worker's answer and the waits'
spinning) travel together: ``BatchEnv(env_fns, WorkerOptions(num_workers=4, max_restarts=2))``.
[`RayWorkerOptions`][batchppo.envs.RayWorkerOptions] extends them with the Ray cluster's
settings for [`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv]. A bad value is refused
where the options are made, in one line naming the setting: the one check of each setting, whether
the options come from Python or from a config's ``backend_options`` (the host backends' options,
``batchppo.backends.host.ProcessOptions`` and the others, are these classes).

Pure Python, so that a config is parsed (and its backend options checked) without importing
Gymnasium and the batch env; [`batchppo.envs`][batchppo.envs] exports both classes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from batchppo.core.values import check_fixed, fixed, optional_positive_int

__all__ = [
    "DEFAULT_NUM_CPUS",
    "DEFAULT_STARTUP_TIMEOUT",
    "MAX_RESTARTS",
    "SPIN_US",
    "WORKER_SPIN_US",
    "RayWorkerOptions",
    "WorkerOptions",
    "check_step_timeout",
    "check_worker_options",
]

MAX_RESTARTS = 0
"""Env restarts a batch env may make over its life: none, so an env's error fails fast."""

SPIN_US = 50.0
"""Microseconds the caller's wait for the workers spins before it blocks: a short wait is
answered without a wake-up, a long one costs no CPU."""

WORKER_SPIN_US = 1000.0
"""Microseconds a worker spins waiting for its next command before it blocks: the next step
of a caller that steps without pause starts without a wake-up."""


def check_step_timeout(step_timeout: float | None) -> float | None:
    """``step_timeout`` as a float (None: no limit).

    Raises:
        ValueError: Not a number of seconds > 0 (nor None).
    """
    if step_timeout is not None and (
        isinstance(step_timeout, bool)
        or not isinstance(step_timeout, (int, float))
        or not 0 < step_timeout < math.inf
    ):
        raise ValueError(
            f"step_timeout must be a number of seconds > 0, or None to wait for ever; got "
            f"{step_timeout!r}."
        )
    return None if step_timeout is None else float(step_timeout)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class WorkerOptions:
    """Where a batch env's envs are stepped and how their faults are met.

    Examples:
        >>> import gymnasium
        >>> from batchppo.envs import BatchEnv, WorkerOptions
        >>> options = WorkerOptions(num_workers=2, max_restarts=1, step_timeout=30.0)
        >>> fns = [lambda: gymnasium.make("Pendulum-v1")] * 4
        >>> with BatchEnv(fns, options, autoreset_mode="SameStep") as env:
        ...     env.worker_envs
        [(0, 2), (2, 4)]

    Attributes:
        num_workers: Number of units that step envs: worker processes, plus the parent when
            ``step_in_parent``; None (the default): the CPUs available
            (``os.sched_getaffinity``).
        envs_per_worker: Envs per unit ``K``; None: ``ceil(num_envs / num_workers)``. When
            given, the number of units is ``ceil(num_envs / K)``.
        step_in_parent: Opt-in: the parent steps the first ``K`` envs itself while the workers
            step the others (saves one process and its signalling), in ``step_wait``, so
            ``step_async`` still returns at once. This gives up crash isolation: an env of the
            parent's share that calls ``os._exit`` or segfaults ends the calling process. With
            ``num_workers=1`` no process is started at all (the ``"sync"`` backend of
            [`make`][batchppo.envs.make.make]).
        max_restarts: How many env restarts the batch env may make over its life (``SAME_STEP``
            mode only; see *Restarts* below); 0 (the default) fails fast: the env's error (or
            [`WorkerDiedError`][batchppo.envs.WorkerDiedError]) is raised.
        step_timeout: Seconds a worker may take to answer a step, reset or call, counted from
            its ``*_async`` call; None (the default) waits for ever. Past it the hung workers
            write their Python stacks (``faulthandler``, on ``SIGUSR1``), are killed, and the
            call raises [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] naming their envs
            and showing the stacks; the batch env is then broken, except in a step with
            restarts on, where hung workers are handled as dead ones (see *Restarts*, which
            bounds a restart's waits too). Only the worker processes are timed: not the envs
            stepped in the parent (``step_in_parent``), nor building the envs at construction
            (which may legitimately take long, and the caller sees it happen).
        spin_us: Microseconds the parent's wait for the workers spins (non-blocking tries, then
            ``sched_yield``) before it blocks on their semaphores. Spinning saves the wake-up
            latency of a blocked process when the other side answers quickly; blocking costs
            no CPU on long waits.
        worker_spin_us: Microseconds a worker spins, the same way, waiting for its next command
            after answering one. A worker still spinning when the next step comes starts it
            without a wake-up; one that spins longer than the caller takes between steps spends
            up to this much CPU per step.

    **Restarts** (``max_restarts > 0``, ``SAME_STEP`` mode only). When an env's ``step`` raises, or
    a worker process dies during a step (or does not answer within ``step_timeout``: it is killed
    and handled as a dead one), [`step`][batchppo.envs.BatchEnv.step] and
    [`step_arrays`][batchppo.envs.BatchEnv.step_arrays] do not raise. The env is built again from
    its env function (a dead worker is respawned and builds all its envs: all are restarted) and
    reset with a fresh seed (``restart_seed`` of the env's last reset seed and the restart's
    number). For that step each such env reports ``truncated=True``, ``terminated=False``, reward 0,
    the last obs it returned as its final obs and the new episode's first obs as its obs; it counts
    once in ``BatchEnv.restarts``, is marked in ``infos["env_restarted"]`` (mask
    ``infos["_env_restarted"]``; its ``final_info`` is ``{}``) and gets an
    [`EnvRestartWarning`][batchppo.envs.EnvRestartWarning] naming the error. A step that would take
    ``restarts`` past ``max_restarts`` restarts nothing and raises the error (the env's type,
    ``WorkerDiedError`` or ``EnvTimeoutError``) as with ``max_restarts=0``, its message naming the
    budget. Errors and worker deaths outside a step (construction, ``reset``, ``call``) raise as
    with ``max_restarts=0``; a rebuild or reset that fails in a restart raises and breaks the batch
    env (it then accepts only ``close``). With ``step_timeout`` each wait of a restart is bounded by
    it, counted from its own command: a respawned worker's start (building its envs, taking their
    rows), then the restart proper (rebuilding the envs that raised, resetting every restarted
    env). A worker that does not answer in time is killed and
    [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] is raised naming its envs and showing its
    stacks; the batch env is broken. Such a failed restart is not retried and not counted in
    ``restarts``, as a failed rebuild or reset: an env that hangs in its restart would most likely
    hang in the next one too, each try holding the run for another ``step_timeout``.

    Raises:
        ValueError: A setting of the wrong type or out of range, in one line naming it.
    """

    num_workers: int | None = None
    envs_per_worker: int | None = None
    step_in_parent: bool = False
    max_restarts: int = MAX_RESTARTS
    step_timeout: float | None = None
    spin_us: float = SPIN_US
    worker_spin_us: float = WORKER_SPIN_US

    def __post_init__(self) -> None:
        for name, none_means in (
            ("num_workers", "the CPUs available"),
            ("envs_per_worker", "an even split"),
        ):
            count = optional_positive_int(name, getattr(self, name), none_means)
            object.__setattr__(self, name, count)
        if not isinstance(self.step_in_parent, bool):
            raise ValueError(f"step_in_parent must be a bool; got {self.step_in_parent!r}.")
        if not _is_int(self.max_restarts) or self.max_restarts < 0:
            raise ValueError(f"max_restarts must be an int >= 0; got {self.max_restarts!r}.")
        object.__setattr__(self, "step_timeout", check_step_timeout(self.step_timeout))
        for name in ("spin_us", "worker_spin_us"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (0 <= value < math.inf)
            ):
                raise ValueError(f"{name} must be a number of microseconds >= 0; got {value!r}.")
        check_fixed(self)


# Half a CPU per actor. A trainer holds two RayBatchEnvs at once, the training env and the
# eval env, each with one actor per CPU by default, and steps only one of them at a time: at
# a whole CPU each, the eval env's actors could never be placed on a local Ray, whose CPUs
# the training env already holds, and its construction would wait for ever. At half a
# CPU the two fit side by side, and the CPUs Ray books still match the work done at once.
DEFAULT_NUM_CPUS = 0.5
# Long enough for Ray to start worker processes on a loaded machine or a cluster to add a
# node; short enough that a request the cluster cannot meet ends in an error, not a hang.
DEFAULT_STARTUP_TIMEOUT = 60.0

_RAY_STEPS_ALL = "Ray actors step every env; use BatchEnv (backend process) to step some here"
_RAY_NO_SPIN = "Ray actors answer through Ray's own calls, which do not spin"


@dataclasses.dataclass(frozen=True)
class RayWorkerOptions(WorkerOptions):
    """Where a [`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv]'s envs are stepped: the
    workers of ``WorkerOptions`` as Ray actors, and the Ray cluster they run on.

    Of ``WorkerOptions``, Ray's actors take ``num_workers`` (actors; None: the CPUs of the Ray
    cluster), ``envs_per_worker`` and ``step_timeout`` (seconds an actor may take to answer a
    step, reset or call; past it the hung actors are asked for their stacks, killed, and the
    call raises ``EnvTimeoutError``; the batch env cannot continue). The others are held at
    their defaults: actors step every env, are not restarted, and do not spin.

    Examples:
        >>> RayWorkerOptions(num_workers=2, address="auto").num_cpus
        0.5
        >>> RayWorkerOptions(max_restarts=1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: max_restarts=1: Ray env actors are not restarted; use the process or ...

    Attributes:
        address: The Ray cluster to join when Ray is not initialised yet (``auto`` or
            ``host:port``; see [`connect`][batchppo.envs.adapters.ray_env.connect]); None:
            ``RAY_ADDRESS`` if set, else a new local Ray. A Ray already initialised in the
            process is used as it is.
        num_cpus: CPUs each actor books on the cluster; fractions share a CPU (half of one
            lets a run's training and eval envs fit side by side).
        startup_timeout: Seconds the actors may take to start before ``RayResourcesError``
            names what they need and what the cluster has (Ray queues an actor it cannot
            place rather than failing it); None: wait for ever.

    Raises:
        ValueError: A setting of the wrong type or out of range, or one Ray's actors cannot
            honour, in one line naming it.
    """

    step_in_parent: bool = fixed(False, _RAY_STEPS_ALL)
    max_restarts: int = fixed(
        MAX_RESTARTS,
        "Ray env actors are not restarted; use the process or sync backend for env restarts",
    )
    spin_us: float = fixed(SPIN_US, _RAY_NO_SPIN)
    worker_spin_us: float = fixed(WORKER_SPIN_US, _RAY_NO_SPIN)
    address: str | None = None
    num_cpus: float = DEFAULT_NUM_CPUS
    startup_timeout: float | None = DEFAULT_STARTUP_TIMEOUT

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.address is not None and (
            not isinstance(self.address, str) or not self.address.strip()
        ):
            raise ValueError(
                f"address={self.address!r}: give host:port or auto, or None (RAY_ADDRESS, "
                "else a local Ray)"
            )
        if not _is_number(self.num_cpus) or not 0 <= self.num_cpus < math.inf:
            raise ValueError(f"num_cpus={self.num_cpus!r}: must be >= 0 (CPUs per Ray env actor)")
        timeout = self.startup_timeout
        if timeout is not None and (not _is_number(timeout) or not timeout > 0):
            raise ValueError(
                f"startup_timeout={timeout!r}: must be > 0 (seconds), or None to wait for ever"
            )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_worker_options(worker_options: WorkerOptions | None) -> WorkerOptions:
    """``worker_options`` as given, or the defaults for None.

    Raises:
        TypeError: Not a ``WorkerOptions`` (nor None), or ``RayWorkerOptions`` (a
            ``RayBatchEnv``'s).
    """
    if worker_options is None:
        return WorkerOptions()
    if isinstance(worker_options, RayWorkerOptions):
        raise TypeError(
            f"worker_options={worker_options!r}: RayWorkerOptions are RayBatchEnv's; give "
            "BatchEnv a batchppo.envs.WorkerOptions."
        )
    if not isinstance(worker_options, WorkerOptions):
        raise TypeError(
            f"worker_options must be a batchppo.envs.WorkerOptions or None; got "
            f"{worker_options!r} ({type(worker_options).__name__}): pass, say, "
            "worker_options=WorkerOptions(num_workers=4)."
        )
    return worker_options

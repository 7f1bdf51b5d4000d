"""The host backends ``process`` and ``sync``: Gymnasium envs stepped on the host.

Both build their batch env with [`batchppo.envs.make`][batchppo.envs.make.make], each passing its
batch env factory (``process_batch_env``: a ``BatchEnv`` with worker processes, or
``in_process_batch_env``: envs stepped in the calling process), and hand it to the learner as a
[`HostEnv`][batchppo.backends.HostEnv]. Their records are registered when this module is imported
([`batchppo.backends`][batchppo.backends] imports it); ``host_backend`` fills what every host
backend built by ``envs.make`` shares, for ``batchppo.backends.ray`` too. Their settings are a
config's ``backend_options``, parsed once into ``ProcessOptions`` or ``SyncOptions``: the
batch env's own [`WorkerOptions`][batchppo.envs.WorkerOptions] (subclasses that set a run's
defaults), which travel as that one object from the config through ``envs.make`` to the
``BatchEnv``. The module is light: Gymnasium, JAX and the batch envs are imported when an env
is built or an id checked.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from batchppo.core.backends import Backend, factory_package, register
from batchppo.core.registry import lazy
from batchppo.core.values import fixed
from batchppo.core.worker_options import SPIN_US, WORKER_SPIN_US, WorkerOptions

if TYPE_CHECKING:
    from batchppo.backends.host_env import HostEnv

__all__ = [
    "RUN_STEP_TIMEOUT",
    "BackendOptions",
    "ProcessOptions",
    "SyncOptions",
    "builds_with_envs_make",
    "check_gymnasium_id",
    "gymnasium_env_requires",
    "host_backend",
    "make_host_env",
]


def check_gymnasium_id(env_id: str) -> None:
    """Raises a one-line ValueError when ``env_id`` names no Gymnasium env.

    The rule has one home, ``batchppo.envs.make.check_env_id`` (imported on the call): a registered
    id, ``"module:EnvId"`` or ``"module:factory"``, whose module is imported here.
    """
    from batchppo.envs.make import check_env_id

    check_env_id(env_id)


_NAMESPACE_PACKAGES = {"ALE": "ale_py"}
"""Gymnasium id namespaces and the package that registers and runs their envs."""

_ENTRY_POINT_PACKAGES = {"gymnasium.envs.mujoco": "mujoco"}
"""Where Gymnasium's registered envs live (their entry point's module) and the package they
import there."""


def gymnasium_env_requires(env_id: str) -> str | None:
    """The optional package a Gymnasium env id needs (the host backends' ``env_requires``):
    ``ale_py`` for ``ALE/`` ids, ``mujoco`` for Gymnasium's MuJoCo envs, a known package for a
    ``module:factory`` of it (``batchppo.core.backends.factory_package``); None for any other.
    Gymnasium's registry is read, no env module imported.
    """
    if ":" in env_id:
        return factory_package(env_id)
    namespace = env_id.split("/", 1)[0] if "/" in env_id else None
    if namespace in _NAMESPACE_PACKAGES:
        return _NAMESPACE_PACKAGES[namespace]
    import gymnasium

    entry_point = getattr(gymnasium.registry.get(env_id), "entry_point", None)
    if isinstance(entry_point, str):
        module = entry_point.partition(":")[0]
        for prefix, package in _ENTRY_POINT_PACKAGES.items():
            if module == prefix or module.startswith(f"{prefix}."):
                return package
    return None


class BackendOptions:
    """The errors of a backend's options class built on an envs options class
    (``ProcessOptions`` on [`WorkerOptions`][batchppo.envs.WorkerOptions]): a value the base
    refuses is named as the config key it is, ``backend_options.NAME``. The check itself is the
    base's: the one check of each setting."""

    def __post_init__(self) -> None:
        try:
            super().__post_init__()  # type: ignore[misc]
        except ValueError as error:
            raise ValueError(f"backend_options.{error}") from None


RUN_STEP_TIMEOUT = 60.0
"""The ``step_timeout`` of a run's workers (``process``, ``ray``) by default: far above any step
or reset of the presets' envs, so it fires on a hung env only. A batch env built in Python
(``BatchEnv``, ``envs.make``) waits for ever by default, as ``AsyncVectorEnv`` does."""


@dataclasses.dataclass(frozen=True)
class ProcessOptions(BackendOptions, WorkerOptions):
    """The ``backend_options`` of the ``process`` backend: the ``BatchEnv``'s
    [`WorkerOptions`][batchppo.envs.WorkerOptions] themselves (``--set
    backend_options.num_workers=4``), this object handed to the ``BatchEnv`` as it is. They
    differ from ``WorkerOptions`` in one default only: a run's workers have a ``step_timeout``
    (``RUN_STEP_TIMEOUT``). With ``max_restarts`` a crashed env, or a dead or hung worker's
    envs, are restarted and training goes on; the ``env_restarts`` train metric counts them,
    and past the budget the error is raised, naming this setting. They may change when a run
    resumes."""

    step_timeout: float | None = RUN_STEP_TIMEOUT
    """Seconds a worker may take to answer one step, reset or call of its envs. Past it the
    worker is asked for its Python stacks and killed, and the run stops as on an env error,
    with ``EnvTimeoutError`` naming the envs and where they were stuck; with ``max_restarts``
    the worker is respawned instead and its envs' episodes truncated. None waits for ever;
    raise it for an env that is slow by nature."""


_IN_PROCESS = "the sync backend steps every env in the calling process"
_FOR_WORKERS = f"{_IN_PROCESS}; use the process backend for workers"


@dataclasses.dataclass(frozen=True)
class SyncOptions(BackendOptions, WorkerOptions):
    """The ``backend_options`` of the ``sync`` backend (``--set backend_options.max_restarts=8``):
    [`WorkerOptions`][batchppo.envs.WorkerOptions] that step every env in the calling process,
    this object handed to the ``BatchEnv`` as it is. A config gives one of them,
    ``max_restarts``: how many env restarts each env batch (training, evaluation) may make in
    one training process. An env whose step raises is then rebuilt and reset, its episode
    ending truncated, and training goes on; the ``env_restarts`` train metric counts them. 0
    fails fast: the env's error ends the run. Past the budget the error is raised, naming this
    setting. The others are held (``batchppo.core.values.fixed``). They may change when a run
    resumes."""

    num_workers: int | None = fixed(1, _FOR_WORKERS)
    envs_per_worker: int | None = fixed(None, _FOR_WORKERS)
    step_in_parent: bool = fixed(True, _IN_PROCESS)
    step_timeout: float | None = fixed(
        None, f"{_IN_PROCESS}, which cannot bound them; use the process backend for a timeout"
    )
    spin_us: float = fixed(SPIN_US, _FOR_WORKERS)
    worker_spin_us: float = fixed(WORKER_SPIN_US, _FOR_WORKERS)


def make_host_env(
    env_id: str,
    num_envs: int,
    *,
    backend: str | Callable[..., Any],
    max_length: int | None,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    options: WorkerOptions,
    wrappers: Sequence[Any] = (),
) -> HostEnv:
    """The host backends' builder (``batchppo.core.backends.MakeEnv``):
    ``batchppo.envs.make(backend=backend, options=options)`` in a HostEnv.

    The envs are left unreset: the learner's first ``HostEnv.reset(key)`` seeds them (the one
    reset before the first step; the run's start-up probe has checked that the env resets).

    Args:
        env_id: Gymnasium id.
        num_envs: Batch size.
        backend: The ``backend`` of [`batchppo.envs.make`][batchppo.envs.make.make]: the
            batch env factory to build with (``host_backend``'s ``batch_env``), or the name of
            one of ``envs.make``'s (``process``, ``sync``).
        max_length: Time limit in steps; None keeps the registry's.
        normalize_ranges: Rescale finite bounds to [-1, 1].
        env_kwargs: ``gymnasium.make`` keywords.
        options: The backend's options object (``ProcessOptions``, ``SyncOptions``,
            ``RayOptions``: [`WorkerOptions`][batchppo.envs.WorkerOptions]), handed through
            ``envs.make`` to the batch env as it is.
        wrappers: The config's ``env_wrappers`` (the records' ``run_options``), around each
            env.

    Returns:
        The [`HostEnv`][batchppo.backends.HostEnv] (it closes the batch env on ``close()``).
    """
    from batchppo.backends.host_env import wrap_host_env
    from batchppo.envs import make as make_host_envs

    vector_env = make_host_envs(
        env_id,
        num_envs,
        backend=backend,
        options=options,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        wrappers=wrappers,
        **env_kwargs,
    )
    # make()'s stack (ConvertTo32Bit, per env or applied to the batch in the workers) already
    # rejects every non-finite observation and reward, naming the env: no second check here.
    return wrap_host_env(
        vector_env, check_finite=False, take_games=_game_scores(vector_env, env_kwargs)
    )


def _game_scores(vector_env: Any, env_kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
    """``HostEnv``'s ``take_games`` for a batch env of Atari envs (the preprocessing's
    ``GameScoreLog`` in each, called where the envs live), or None for other envs."""
    import numpy as np

    from batchppo.envs.make import preprocessing
    from batchppo.envs.stack.atari import AtariStack

    if not isinstance(preprocessing(env_kwargs.get("preprocess")), AtariStack):
        return None

    def take() -> Any:
        return np.concatenate([np.asarray(s, np.float64) for s in vector_env.call("take_games")])

    return take


# The start-up probe of a run: one env built, and its spaces checked as HostEnv takes them.
_PROBE_GYMNASIUM = lazy("batchppo.backends.host_env:probe_gymnasium")


WRAPPERS = {"env_wrappers": "wrappers"}
"""The host backends' ``run_options``: the config's ``env_wrappers`` as ``wrappers`` (which
every env ``batchppo.envs.make`` builds is wrapped in)."""


def host_backend(
    name: str, *, description: str, batch_env: Callable[..., Any], **fields: Any
) -> Backend:
    """The record of a host backend whose envs [`batchppo.envs.make`][batchppo.envs.make.make]
    builds with its ``batch_env``, stepped through a [`HostEnv`][batchppo.backends.HostEnv].

    Args:
        name: The backend's name.
        description: What steps the envs, for messages.
        batch_env: The batch env factory ``envs.make`` builds with
            (``batchppo.envs.make.BatchEnvFactory``; a ``lazy`` reference keeps the record
            light).
        **fields: The record's other fields ([`Backend`][batchppo.backends.Backend]).

    Returns:
        The record (not yet registered).
    """
    return Backend(
        name=name,
        make=functools.partial(make_host_env, backend=batch_env),
        check_env_id=check_gymnasium_id,
        host=True,
        description=description,
        probe=_PROBE_GYMNASIUM,
        run_options=WRAPPERS,
        env_requires=gymnasium_env_requires,
        **fields,
    )


def builds_with_envs_make(backend: Backend) -> bool:
    """Whether ``backend`` is a record of ``host_backend``: its envs are Gymnasium envs that
    ``batchppo.envs.make`` builds (and wraps in a config's ``env_wrappers``)."""
    make = backend.make
    return isinstance(make, functools.partial) and make.func is make_host_env


register(
    host_backend(
        "process",
        description="BatchEnv worker processes",
        batch_env=lazy("batchppo.envs.make:process_batch_env"),
        options=ProcessOptions,
    )
)
register(
    host_backend(
        "sync",
        description="envs stepped in the calling process",
        batch_env=lazy("batchppo.envs.make:in_process_batch_env"),
        options=SyncOptions,
    )
)

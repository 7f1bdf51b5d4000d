"""``make``: a batch of Gymnasium envs with the standard wrapper stack.

The stack of one env, innermost first: the env as built (``gymnasium.make`` with its
``TimeLimit``, or a preprocessing's env), then [`RangeNormalize`][batchppo.envs.RangeNormalize],
Gymnasium's ``ClipAction`` (Box actions without range normalisation) and
[`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit] (``batchppo.envs.stack.standard_stack`` details
them). [`make_env_fn`][batchppo.envs.make_env_fn] builds one env inside it.
[`make`][batchppo.envs.make.make] resolves the id (``batchppo.envs.env_ids``), builds the envs
without the layers after the first, and has the batch env apply them to all the envs of a worker at
once, as array operations (a [`BatchTransform`][batchppo.envs.BatchTransform] read off the same
stack), with bitwise the same results; only envs whose spaces it does not cover (Dict or Tuple
spaces, integer observations, ``MultiDiscrete`` actions) and batch envs that take a ``transform`` to
apply around each env (Ray's) get the per-env stack.

This module holds the host batch env factories (``process_batch_env``,
``in_process_batch_env``: the ``"process"`` and ``"sync"`` batch envs), ``make`` and the
``gymnasium.make_vec`` registration; it re-exports the names of the other two, so that
``batchppo.envs.make.NAME`` is where every name of ``make``'s API is found. It knows no env
backend: a backend's record builds with these factories (``batchppo.backends.host``), and the
Ray batch env's factory is a backend's, ``batchppo.backends.ray.ray_batch_env``, which ``make``
takes as ``backend=ray_batch_env``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import gymnasium
from gymnasium.vector import AutoresetMode

from batchppo.core.values import positive_int
from batchppo.core.worker_options import RayWorkerOptions, WorkerOptions
from batchppo.envs.batch_env import BatchEnv
from batchppo.envs.env_ids import (
    EnvProbe,
    EnvSource,
    Preprocessing,
    check_env_id,
    checked_raw_env_fn,
    env_source,
    factory_env_id,
    preprocessing,
    probe_env,
)
from batchppo.envs.stack.standard_stack import StandardStack, batch_transform, stacked_env_fn

__all__ = [
    "BatchEnvFactory",
    "EnvProbe",
    "EnvSource",
    "Preprocessing",
    "StandardStack",
    "batch_env_of",
    "batch_transform",
    "check_env_id",
    "env_source",
    "factory_env_id",
    "in_process_batch_env",
    "make",
    "make_env_fn",
    "preprocessing",
    "probe_env",
    "process_batch_env",
    "register_vector_env",
    "vector_entry_point",
]


def make_env_fn(
    env_id: str,
    *,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    preprocess: str | Mapping[str, Any] | Preprocessing | None = None,
    wrappers: Iterable[Any] = (),
    **env_kwargs: Any,
) -> Callable[[], gymnasium.Env]:
    """A function that builds ONE env with the standard wrapper stack (see
    ``batchppo.envs.stack.standard_stack``).

    Args:
        env_id: A Gymnasium id, ``"module:EnvId"`` or ``"module:factory"`` (see
            [`env_source`][batchppo.envs.make.env_source]).
        max_length: Episode step limit (Gymnasium ``TimeLimit``); None keeps the env's own.
        normalize_ranges: Apply [`RangeNormalize`][batchppo.envs.RangeNormalize] (finite bounds to
            ``[-1, 1]``).
        render_mode: Passed to the env's constructor when given (e.g. ``"rgb_array"`` for
            videos); None passes nothing, since envs need not take it unless they render.
        preprocess: What builds each env in place of ``gymnasium.make`` (see
            ``preprocessing``): ``"atari"`` for the standard Atari preprocessing.
        wrappers: Gymnasium wrappers around each env, under the standard stack: import
            paths or ``{path: kwargs}`` mappings, innermost first (a config's
            ``env_wrappers``; ``batchppo.envs.stack.env_wrappers``).
        **env_kwargs: Passed to ``gymnasium.make`` (or the factory).

    Returns:
        A picklable zero-argument callable returning the wrapped env.

    Raises:
        ValueError: Unknown ``env_id`` (with suggestions), a bad ``max_length`` or a
            preprocessing that does not take this id, limit or keywords.
    """
    raw_fn = checked_raw_env_fn(env_id, max_length, render_mode, preprocess, wrappers, env_kwargs)
    return stacked_env_fn(raw_fn, StandardStack(env_id, normalize_ranges))


class BatchEnvFactory(Protocol):
    """Builds the batch env of [`make`][batchppo.envs.make.make]: ``process_batch_env``,
    ``in_process_batch_env``, the Ray backend's ``batchppo.backends.ray.ray_batch_env``, or
    one's own callable taking these arguments.

    It raises a one-line ``ValueError`` (or a ``TypeError`` for options of another type) for
    an argument its batch env cannot honour, before any worker starts.
    """

    def __call__(
        self,
        env_fns: list[Callable[[], gymnasium.Env]],
        *,
        options: Any,
        transform: StandardStack,
        autoreset_mode: AutoresetMode | str,
    ) -> gymnasium.vector.VectorEnv:
        """The batch env of ``env_fns`` (each builds one raw env, without the standard stack,
        which ``transform`` applies: to the batch, or around each env), its workers set by
        ``options`` (a [`WorkerOptions`][batchppo.envs.WorkerOptions], or the subclass the
        factory takes; None: the factory's defaults), handed to the batch env as they are."""
        ...


def process_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    options: WorkerOptions | None = None,
    transform: StandardStack | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
) -> BatchEnv:
    """The ``process`` backend's batch env: a ``BatchEnv`` whose envs step in worker processes.

    Args:
        env_fns: Each builds one raw env.
        options: The ``BatchEnv``'s [`WorkerOptions`][batchppo.envs.WorkerOptions], passed as
            they are; None: their defaults (a worker per CPU, fail fast, no time limit).
        transform: The standard stack, applied to each worker's envs at once where it can be.
        autoreset_mode: ``BatchEnv``'s autoreset mode.
    """
    return BatchEnv(env_fns, options, transform=transform, autoreset_mode=autoreset_mode)


IN_PROCESS = WorkerOptions(num_workers=1, step_in_parent=True)
"""The worker options of ``in_process_batch_env`` by default: every env in the calling
process."""


def in_process_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    options: WorkerOptions | None = None,
    transform: StandardStack | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
) -> BatchEnv:
    """The ``sync`` backend's batch env: a ``BatchEnv`` that steps every env in the calling
    process (``num_workers=1, step_in_parent=True``).

    Args:
        env_fns: Each builds one raw env.
        options: The ``BatchEnv``'s [`WorkerOptions`][batchppo.envs.WorkerOptions] (its
            ``max_restarts``, the restart budget), passed as they are when they place every
            env in the calling process (the ``sync`` backend's ``SyncOptions`` do), else with
            those two fields set so; None: ``IN_PROCESS``.
        transform: The standard stack, applied to the envs at once where it can be.
        autoreset_mode: ``BatchEnv``'s autoreset mode.

    Raises:
        ValueError: A ``step_timeout`` (the calling process cannot bound its own envs), or
            more than one worker.
    """
    options = IN_PROCESS if options is None else options
    if options.step_timeout is not None:
        raise ValueError(
            f"step_timeout={options.step_timeout}: the sync backend steps its envs in this "
            "process, which cannot bound them; use backend='process' (worker processes) for a "
            "timeout."
        )
    if options.num_workers not in (None, 1) or options.envs_per_worker is not None:
        raise ValueError(
            f"num_workers={options.num_workers}, envs_per_worker={options.envs_per_worker}: "
            "the sync backend steps every env in this process; use backend='process' for "
            "workers."
        )
    if (options.num_workers, options.step_in_parent) != (1, True):
        options = dataclasses.replace(options, num_workers=1, step_in_parent=True)
    return BatchEnv(env_fns, options, transform=transform, autoreset_mode=autoreset_mode)


BATCH_ENV_NAMES = ("process", "sync")
"""The batch envs [`make`][batchppo.envs.make.make] takes by name: ``process_batch_env`` and
``in_process_batch_env``."""


def batch_env_of(backend: str | BatchEnvFactory) -> BatchEnvFactory:
    """The batch env ``make(backend=...)`` builds: ``"process"`` (``process_batch_env``),
    ``"sync"`` (``in_process_batch_env``), or ``backend`` itself.

    Raises:
        ValueError: Another name (``"ray"``'s factory is a backend's:
            ``batchppo.backends.ray.ray_batch_env``), or neither a name nor a callable.
    """
    if callable(backend):
        return backend
    if backend == "process":
        return process_batch_env  # read at call time: a test or bench may patch the module's
    if backend == "sync":
        return in_process_batch_env
    if backend == "ray":
        raise ValueError(
            "backend='ray': the Ray batch env's factory is the ray backend's; pass "
            "backend=ray_batch_env (from batchppo.backends.ray import ray_batch_env)."
        )
    raise ValueError(
        f"backend must be one of {BATCH_ENV_NAMES} or a batch env factory; got {backend!r}."
    )


# Worker settings belong in the options object; as keywords they would reach the env's
# constructor and fail there with a message that does not name the fix.
_WORKER_SETTINGS = frozenset(field.name for field in dataclasses.fields(RayWorkerOptions))


def _refuse_worker_settings(env_kwargs: Mapping[str, Any]) -> None:
    misplaced = sorted(_WORKER_SETTINGS.intersection(env_kwargs))
    if misplaced:
        given = ", ".join(f"{name}={env_kwargs[name]!r}" for name in misplaced)
        raise ValueError(
            f"{', '.join(misplaced)}: a worker setting, not an env keyword: pass "
            f"options=WorkerOptions({given}) (batchppo.envs.WorkerOptions)"
        )


def make(
    env_id: str,
    num_envs: int,
    *,
    seed: int | None = None,
    backend: str | BatchEnvFactory = "process",
    options: WorkerOptions | None = None,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    preprocess: str | Mapping[str, Any] | Preprocessing | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    wrappers: Iterable[Any] = (),
    **env_kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """Builds ``num_envs`` envs with the standard wrapper stack as one batch env.

    The envs are the learners', not Gymnasium's as ``gymnasium.make_vec`` gives them (for
    those, ``BatchEnv([lambda: gymnasium.make(env_id)] * num_envs)``, the drop-in for
    ``AsyncVectorEnv``). The standard stack (``batchppo.envs.stack.standard_stack``) changes:

    * ranges (``normalize_ranges``): actions are taken on ``[-1, 1]``, clipped there and mapped
      to the env's bounds (Pendulum's ``[-2, 2]``); the finite bounds of float ``Box``
      observations map to ``[-1, 1]``. Without it, Box actions are clipped to the env's bounds;
    * 32 bits: float64 observations become float32, int64 ones int32, rewards float32, and
      a ``Discrete`` action space's dtype int32 (Gymnasium's: int64); non-finite observations
      or rewards raise;
    * autoreset: ``SAME_STEP`` by default, where the step that ends an episode resets that env,
      returning the next episode's first observation and the finished one's last in the dense
      ``infos["final_obs"]`` (``autoreset_mode`` below; Gymnasium's is ``NEXT_STEP``).

    Examples:
        >>> import numpy as np
        >>> env = make("Pendulum-v1", 16, seed=0, max_length=200,
        ...            options=WorkerOptions(num_workers=2, max_restarts=1))
        >>> env.worker_envs
        [(0, 8), (8, 16)]
        >>> actions = np.zeros((16, 1), np.float32)
        >>> obs, reward, terminated, truncated, final_obs = env.step_arrays(actions)
        >>> obs.shape, obs.dtype
        ((16, 3), dtype('float32'))
        >>> env.close()

    Args:
        env_id: A Gymnasium id, ``"module:EnvId"`` or ``"module:factory"`` (see
            [`env_source`][batchppo.envs.make.env_source]).
        num_envs: Number of envs.
        seed: When given, the envs are reset once with ``seed`` (env ``i`` gets ``seed + i``);
            otherwise call ``reset`` yourself before stepping.
        backend: The batch env to build: ``"process"`` (``process_batch_env``: ``BatchEnv``
            with worker processes), ``"sync"`` (``in_process_batch_env``: the same class with
            every env stepped in the calling process), or a callable taking their arguments (a
            ``BatchEnvFactory``: one's own, or the ray backend's
            ``batchppo.backends.ray.ray_batch_env``, a
            [`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv] with Ray actors as workers).
        options: Where the envs step and how their faults are met, handed to the batch env as
            they are: a [`WorkerOptions`][batchppo.envs.WorkerOptions] (workers, restarts,
            ``step_timeout``, spinning; ``"sync"`` steps every env in the calling process and
            refuses a ``step_timeout``, which it cannot honour), or for ``ray_batch_env`` a
            [`RayWorkerOptions`][batchppo.envs.RayWorkerOptions] (with the Ray
            cluster's settings); None: the batch env's defaults (for ``"process"``, a worker
            per CPU, fail fast, no time limit).
        max_length: Episode step limit; None keeps the registry's.
        normalize_ranges: Map finite bounds to ``[-1, 1]``.
        render_mode: Passed to ``gymnasium.make``.
        preprocess: What builds each env in the workers in place of ``gymnasium.make``, under the
            standard stack: ``"atari"`` (or ``{"name": "atari", **settings}``, or an
            [`AtariStack`][batchppo.envs.AtariStack]) for the standard Atari preprocessing, uint8
            ``(4, 84, 84)`` frames; see ``preprocessing``.
        autoreset_mode: ``BatchEnv``'s autoreset mode: ``SAME_STEP`` (the default here, what
            the learners use, with the dense ``final_obs`` and ``step_arrays``), or Gymnasium's
            ``NEXT_STEP`` (which its observation wrappers such as ``NormalizeObservation``
            need) or ``DISABLED``. Ray's batch env has ``SAME_STEP`` only.
        wrappers: Gymnasium wrappers around each env, built in the workers (see
            ``make_env_fn``).
        **env_kwargs: Passed to ``gymnasium.make`` (or the factory).

    The ``"process"`` and ``"sync"`` backends apply the wrapper stack to the batch (see the
    module docstring), read off the spaces of the envs the workers build: every env is built
    once, and none in the calling process unless ``backend="sync"``. Ray's batch env builds each
    env once too, in its actor, in the per-env stack.

    Returns:
        The batch env (``BatchEnv`` or ``RayBatchEnv``), reset if ``seed`` was given.

    Raises:
        ValueError: Unknown id or batch env name, bad counts, a worker setting given as an env
            keyword (it belongs in ``options``), an argument the batch env cannot
            honour. Raised before any worker starts.
        TypeError: ``options`` of a type the batch env does not take.
    """
    _refuse_worker_settings(env_kwargs)
    batch_env = batch_env_of(backend)
    num_envs = positive_int("num_envs", num_envs)
    raw_fn = checked_raw_env_fn(env_id, max_length, render_mode, preprocess, wrappers, env_kwargs)
    # The batch env reads the raw spaces off its workers' envs and picks the transform (or
    # wraps each env in the stack).
    env = batch_env(
        [raw_fn] * num_envs,
        options=options,
        transform=StandardStack(env_id, normalize_ranges),
        autoreset_mode=autoreset_mode,
    )
    if seed is not None:
        env.reset(seed=seed)
    return env


# --- gymnasium.make_vec ----------------------------------------------------------------------

VECTOR_NAMESPACE = "batchppo"
"""The Gymnasium namespace of the ids [`register_vector_env`][batchppo.envs.register_vector_env]
registers."""


def register_vector_env(env_id: str, vector_id: str | None = None) -> str:
    """Registers a Gymnasium id whose ``gymnasium.make_vec`` builds
    [`make`][batchppo.envs.make.make]'s batch env.

    Examples:
        >>> vector_id = register_vector_env("CartPole-v1")  # "batchppo/CartPole-v1"
        >>> env = gymnasium.make_vec(vector_id, num_envs=8, num_workers=2)
        >>> env.metadata["autoreset_mode"]
        <AutoresetMode.NEXT_STEP: 'NextStep'>
        >>> env.close()

    The id's ``vector_entry_point`` is ``vector_entry_point``: ``make_vec``'s keyword arguments go
    to [`make`][batchppo.envs.make.make] (``seed``, ``backend``, ``options``,
    ``normalize_ranges``, ``autoreset_mode``, ...), the fields of
    [`WorkerOptions`][batchppo.envs.WorkerOptions] (``num_workers``, ...) into its ``options``,
    and the others to the env, as
    ``gymnasium.make``'s do. The autoreset mode defaults to Gymnasium's ``NEXT_STEP`` here, so
    Gymnasium's vector wrappers take the env as they take ``make_vec``'s own; pass
    ``autoreset_mode="SameStep"`` for batchppo's. ``max_episode_steps`` is the time limit (the env's
    own by default). Registering an id twice is allowed (the spec is replaced).

    Args:
        env_id: What [`make`][batchppo.envs.make.make] takes (checked here:
            [`env_source`][batchppo.envs.make.env_source]).
        vector_id: The id to register; default ``"batchppo/<env_id>"`` (the part after
            ``module:`` for ``module:name`` ids).

    Returns:
        The registered id.

    Raises:
        ValueError: ``env_id`` names no env.
    """
    env_source(env_id)
    vector_id = vector_id or f"{VECTOR_NAMESPACE}/{env_id.rpartition(':')[2]}"
    gymnasium.registry.pop(vector_id, None)
    gymnasium.register(
        vector_id,
        entry_point=None,
        vector_entry_point=f"{__name__}:vector_entry_point",
        kwargs={"env_id": env_id},
    )
    return vector_id


_MAKE_KEYWORDS = frozenset({"seed", "backend", "options", "normalize_ranges", "preprocess"})
"""The keywords of ``gymnasium.make_vec`` that ``vector_entry_point`` hands to ``make``."""

_WORKER_KEYWORDS = frozenset(field.name for field in dataclasses.fields(WorkerOptions))
"""The keywords of ``gymnasium.make_vec`` that ``vector_entry_point`` gathers into ``make``'s
``options``: the fields of ``WorkerOptions``."""


def vector_entry_point(
    env_id: str,
    num_envs: int = 1,
    *,
    max_episode_steps: int | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    **kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """The ``vector_entry_point`` of [`register_vector_env`][batchppo.envs.register_vector_env]'s
    ids: [`make`][batchppo.envs.make.make].

    ``gymnasium.make_vec`` passes keywords only, so the fields of
    [`WorkerOptions`][batchppo.envs.WorkerOptions] may be given as keywords here
    (``make_vec(vector_id, num_envs=8, num_workers=2)``): they become ``make``'s ``options``,
    ``WorkerOptions(**those)``, here and nowhere else.

    Args:
        env_id: The env (the registered spec's ``kwargs``).
        num_envs: ``make_vec``'s ``num_envs``.
        max_episode_steps: The time limit (``make``'s ``max_length``).
        autoreset_mode: As in [`make`][batchppo.envs.make.make]; Gymnasium's ``NEXT_STEP`` by
            default.
        **kwargs: [`make`][batchppo.envs.make.make]'s keywords, the fields of
            ``WorkerOptions``, and the env's constructor's.

    Raises:
        TypeError: Both ``options`` and fields of ``WorkerOptions``.
    """
    make_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _MAKE_KEYWORDS}
    worker = {k: kwargs.pop(k) for k in list(kwargs) if k in _WORKER_KEYWORDS}
    if worker:
        if make_kwargs.get("options") is not None:
            raise TypeError(
                f"make_vec got options and {', '.join(worker)}: give the worker settings in "
                "one place, options=WorkerOptions(...)."
            )
        make_kwargs["options"] = WorkerOptions(**worker)
    return make(
        env_id,
        num_envs,
        max_length=max_episode_steps,
        autoreset_mode=autoreset_mode,
        **make_kwargs,
        **kwargs,
    )

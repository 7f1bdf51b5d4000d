"""``make``: a batch of Gymnasium envs with the standard wrapper stack.

The stack of one env, innermost first: the env as built (``gymnasium.make`` with its
``TimeLimit``, or a preprocessing's env), then [`RangeNormalize`][batchppo.envs.RangeNormalize],
Gymnasium's ``ClipAction`` (Box actions without range normalisation) and
[`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit] (``batchppo.envs.standard_stack`` details them).
[`make_env_fn`][batchppo.envs.make_env_fn] builds one env inside it.
[`make`][batchppo.envs.make.make] resolves the id (``batchppo.envs.env_ids``), builds the envs
without the layers after the first, and has the batch env apply them to all the envs of a worker
at once, as array operations (a [`BatchTransform`][batchppo.envs.BatchTransform] read off the
same stack), with bitwise the same results; only envs whose spaces it does not cover (Dict or
Tuple spaces, integer observations, ``MultiDiscrete`` actions) and the ``"ray"`` backend get the
per-env stack.

This module holds the batch env factories (``process_batch_env``, ``in_process_batch_env``,
``ray_batch_env``: what a host backend's record builds with), ``make`` and the
``gymnasium.make_vec`` registration; it re-exports the names of the other two, so that
``batchppo.envs.make.NAME`` is where every name of ``make``'s API is found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import gymnasium
from gymnasium.vector import AutoresetMode

from batchppo.backends import BACKENDS, check_restarts, get_backend
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
from batchppo.envs.standard_stack import StandardStack, batch_transform, stacked_env_fn
from batchppo.envs.worker_options import WorkerOptions

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
    "ray_batch_env",
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
    ``batchppo.envs.standard_stack``).

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
            ``env_wrappers``; ``batchppo.envs.env_wrappers``).
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
    """Builds the batch env of [`make`][batchppo.envs.make.make] (the ``batch_env`` of a host
    backend's record): ``process_batch_env``, ``in_process_batch_env``, ``ray_batch_env``, or
    one's own callable taking these arguments.

    It raises a one-line ``ValueError`` for an argument its batch env cannot honour, before
    any worker starts.
    """

    def __call__(
        self,
        env_fns: list[Callable[[], gymnasium.Env]],
        *,
        num_workers: int | None,
        max_restarts: int,
        transform: StandardStack,
        autoreset_mode: AutoresetMode | str,
        step_timeout: float | None,
        **options: Any,
    ) -> gymnasium.vector.VectorEnv:
        """The batch env of ``env_fns`` (each builds one raw env, without the standard stack,
        which ``transform`` applies: to the batch, or around each env)."""
        ...


def process_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    step_timeout: float | None = None,
    **worker_options: Any,
) -> BatchEnv:
    """The ``process`` backend's batch env: a ``BatchEnv`` whose envs step in worker processes.

    Args:
        env_fns: Each builds one raw env.
        num_workers: Worker processes; None: one per CPU.
        max_restarts: The restart budget (see [`WorkerOptions`][batchppo.envs.WorkerOptions]).
        transform: The standard stack, applied to each worker's envs at once where it can be.
        autoreset_mode: ``BatchEnv``'s autoreset mode.
        step_timeout: Seconds a worker may take to answer; None waits for ever.
        **worker_options: The other fields of ``WorkerOptions`` (``envs_per_worker``,
            ``step_in_parent``, ``spin_us``, ``worker_spin_us``).
    """
    options = WorkerOptions(
        num_workers=num_workers,
        max_restarts=max_restarts,
        step_timeout=step_timeout,
        **worker_options,
    )
    return BatchEnv(env_fns, options, transform=transform, autoreset_mode=autoreset_mode)


def in_process_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    step_timeout: float | None = None,
) -> BatchEnv:
    """The ``sync`` backend's batch env: a ``BatchEnv`` that steps every env in the calling
    process (``num_workers`` is ignored; the other arguments and defaults are ``BatchEnv``'s).

    Raises:
        ValueError: A ``step_timeout``: the calling process cannot bound its own envs.
    """
    del num_workers  # no workers
    if step_timeout is not None:
        raise ValueError(
            f"step_timeout={step_timeout}: the sync backend steps its envs in this process, "
            "which cannot bound them; use backend='process' (worker processes) for a timeout."
        )
    return BatchEnv(
        env_fns,
        WorkerOptions(num_workers=1, step_in_parent=True, max_restarts=max_restarts),
        transform=transform,
        autoreset_mode=autoreset_mode,
    )


def ray_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    step_timeout: float | None = None,
    **options: Any,
) -> gymnasium.vector.VectorEnv:
    """The ``ray`` backend's batch env: a [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv]
    whose actors build each env inside the per-env stack.

    Args:
        env_fns: Each builds one raw env.
        num_workers: Actors; None: the CPUs of the Ray cluster.
        max_restarts: Must be 0: Ray env actors are not restarted.
        transform: The standard stack, applied around each env.
        autoreset_mode: ``SAME_STEP``, the only mode of ``RayBatchEnv``.
        step_timeout: Seconds an actor may take to answer (``RayBatchEnv``).
        **options: ``RayBatchEnv``'s own keyword arguments (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``).

    Raises:
        ValueError: Another autoreset mode, or env restarts asked for.
    """
    mode = AutoresetMode(autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
    if mode is not AutoresetMode.SAME_STEP:
        raise ValueError(
            f"autoreset_mode={autoreset_mode!r}: the ray backend has SAME_STEP only; use "
            "backend='process' or 'sync' for another autoreset mode."
        )
    if max_restarts:
        raise ValueError(
            f"max_restarts={max_restarts}: Ray env actors are not restarted; use "
            "backend='process' or 'sync' for env restarts."
        )
    from batchppo.envs.ray_env import RayBatchEnv

    fns = [stacked_env_fn(fn, transform) for fn in env_fns]
    return RayBatchEnv(fns, num_workers=num_workers, step_timeout=step_timeout, **options)


def batch_env_of(backend: str | BatchEnvFactory) -> BatchEnvFactory:
    """The batch env ``make(backend=...)`` builds: a backend's ``batch_env`` by name (the
    registry's ``Backend.batch_env``), or ``backend`` itself.

    Raises:
        ValueError: A name of no backend with a ``batch_env``, or neither a name nor a
            callable.
    """
    if callable(backend):
        return backend
    record = BACKENDS.get(backend) if isinstance(backend, str) else None
    if record is None or record.batch_env is None:
        known = tuple(name for name, b in BACKENDS.items() if b.batch_env is not None)
        raise ValueError(f"backend must be one of {known}; got {backend!r}.")
    return record.batch_env


def _check_named_backend(
    backend: str, ray_options: Mapping[str, Any] | None, max_restarts: int
) -> None:
    """The checks of the record of a backend given by name: its restarts (``check_restarts``)
    and its options (``Backend.options``) for ``ray_options``."""
    if ray_options and get_backend(backend).options is None:
        takers = [n for n, b in BACKENDS.items() if b.batch_env and b.options is not None]
        allowed = " or ".join(f"backend={name!r}" for name in takers)
        raise ValueError(f"ray_options apply to {allowed} only; got backend={backend!r}.")
    check_restarts(backend, max_restarts)


def make(
    env_id: str,
    num_envs: int,
    *,
    seed: int | None = None,
    backend: str | BatchEnvFactory = "process",
    num_workers: int | None = None,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    ray_options: Mapping[str, Any] | None = None,
    max_restarts: int = 0,
    preprocess: str | Mapping[str, Any] | Preprocessing | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    step_timeout: float | None = None,
    wrappers: Iterable[Any] = (),
    **env_kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """Builds ``num_envs`` envs with the standard wrapper stack as one batch env.

    Examples:
        >>> import numpy as np
        >>> env = make("Pendulum-v1", 16, seed=0, max_length=200)
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
        backend: The batch env to build: a callable taking its arguments (a
            ``BatchEnvFactory``: ``process_batch_env``, ``in_process_batch_env``,
            ``ray_batch_env``, or one's own), or the name of a host backend, whose record gives it
            (``Backend.batch_env``): ``"process"`` (``BatchEnv`` with worker processes),
            ``"sync"`` (the same class with every env stepped in the calling process) or
            ``"ray"`` ([`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv], workers as Ray
            actors).
        num_workers: Units stepping envs (``BatchEnv`` semantics); ignored by ``"sync"``.
        max_length: Episode step limit; None keeps the registry's.
        normalize_ranges: Map finite bounds to ``[-1, 1]``.
        render_mode: Passed to ``gymnasium.make``.
        ray_options: The batch env's own keyword arguments: for ``"ray"``, those of
            [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv] (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``).
        max_restarts: ``BatchEnv``'s restart budget (``"process"`` and ``"sync"`` only): how
            many times an env whose step raised, or whose worker died, is rebuilt and its
            episode truncated; 0 fails fast.
        preprocess: What builds each env in the workers in place of ``gymnasium.make``, under the
            standard stack: ``"atari"`` (or ``{"name": "atari", **settings}``, or an
            [`AtariStack`][batchppo.envs.AtariStack]) for the standard Atari preprocessing, uint8
            ``(4, 84, 84)`` frames; see ``preprocessing``.
        step_timeout: ``"process"`` and ``"ray"``: seconds a worker (or actor) may take to answer a
            step, reset or call before [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] (see
            ``BatchEnv``); None waits for ever. ``"sync"`` refuses it: its envs step in the calling
            process, which cannot bound them.
        autoreset_mode: ``BatchEnv``'s autoreset mode: ``SAME_STEP`` (the default here, what
            the learners use, with the dense ``final_obs`` and ``step_arrays``), or Gymnasium's
            ``NEXT_STEP`` (which its observation wrappers such as ``NormalizeObservation``
            need) or ``DISABLED``. The ``"ray"`` backend has ``SAME_STEP`` only.
        wrappers: Gymnasium wrappers around each env, built in the workers (see
            ``make_env_fn``).
        **env_kwargs: Passed to ``gymnasium.make`` (or the factory).

    The ``"process"`` and ``"sync"`` backends apply the wrapper stack to the batch (see the
    module docstring), read off the spaces of the envs the workers build: every env is built
    once, and none in the calling process unless ``backend="sync"``. The ``"ray"`` backend
    builds each env once too, in its actor, in the per-env stack.

    Returns:
        The batch env (``BatchEnv`` or ``RayBatchEnv``), reset if ``seed`` was given.

    Raises:
        ValueError: Unknown id or backend, bad counts, ``ray_options`` with a backend whose
            batch env takes none, ``max_restarts`` with ``"ray"``. Raised before any worker
            starts.
    """
    batch_env = batch_env_of(backend)
    if isinstance(backend, str):
        _check_named_backend(backend, ray_options, max_restarts)
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int; got {num_envs!r}.")
    raw_fn = checked_raw_env_fn(env_id, max_length, render_mode, preprocess, wrappers, env_kwargs)
    # The batch env reads the raw spaces off its workers' envs and picks the transform (or
    # wraps each env in the stack).
    env = batch_env(
        [raw_fn] * num_envs,
        num_workers=num_workers,
        max_restarts=max_restarts,
        transform=StandardStack(env_id, normalize_ranges),
        autoreset_mode=autoreset_mode,
        step_timeout=step_timeout,
        **(ray_options or {}),
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
    to [`make`][batchppo.envs.make.make] (``seed``, ``backend``, ``num_workers``,
    ``normalize_ranges``, ``autoreset_mode``, ...) and the others to the env, as
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


_MAKE_KEYWORDS = frozenset(
    {
        "seed",
        "backend",
        "num_workers",
        "normalize_ranges",
        "ray_options",
        "max_restarts",
        "preprocess",
        "step_timeout",
    }
)


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

    Args:
        env_id: The env (the registered spec's ``kwargs``).
        num_envs: ``make_vec``'s ``num_envs``.
        max_episode_steps: The time limit (``make``'s ``max_length``).
        autoreset_mode: As in [`make`][batchppo.envs.make.make]; Gymnasium's ``NEXT_STEP`` by
            default.
        **kwargs: [`make`][batchppo.envs.make.make]'s keywords, and the env's constructor's.
    """
    make_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _MAKE_KEYWORDS}
    return make(
        env_id,
        num_envs,
        max_length=max_episode_steps,
        autoreset_mode=autoreset_mode,
        **make_kwargs,
        **kwargs,
    )

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
Tuple spaces, integer observations, ``MultiDiscrete`` actions) and batch envs that take a
``transform`` to apply around each env (Ray's) get the per-env stack.

This module holds the host batch env factories (``process_batch_env``,
``in_process_batch_env``: the ``"process"`` and ``"sync"`` batch envs), ``make`` and the
``gymnasium.make_vec`` registration; it re-exports the names of the other two, so that
``batchppo.envs.make.NAME`` is where every name of ``make``'s API is found. It knows no env
backend: a backend's record builds with these factories (``batchppo.backends.host``), and the
Ray batch env's factory is a backend's, ``batchppo.backends.ray.ray_batch_env``, which ``make``
takes as ``backend=ray_batch_env``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import gymnasium
from gymnasium.vector import AutoresetMode

from batchppo.core.values import positive_int
from batchppo.core.worker_defaults import MAX_RESTARTS
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
    """Builds the batch env of [`make`][batchppo.envs.make.make]: ``process_batch_env``,
    ``in_process_batch_env``, the Ray backend's ``batchppo.backends.ray.ray_batch_env``, or
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
    max_restarts: int = MAX_RESTARTS,
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
    max_restarts: int = MAX_RESTARTS,
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
    batch_env_kwargs: Mapping[str, Any] | None = None,
    max_restarts: int = MAX_RESTARTS,
    preprocess: str | Mapping[str, Any] | Preprocessing | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    step_timeout: float | None = None,
    wrappers: Iterable[Any] = (),
    **env_kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """Builds ``num_envs`` envs with the standard wrapper stack as one batch env.

    The envs are the learners', not Gymnasium's as ``gymnasium.make_vec`` gives them (for
    those, ``BatchEnv([lambda: gymnasium.make(env_id)] * num_envs)``, the drop-in for
    ``AsyncVectorEnv``). The standard stack (``batchppo.envs.standard_stack``) changes:

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
        backend: The batch env to build: ``"process"`` (``process_batch_env``: ``BatchEnv``
            with worker processes), ``"sync"`` (``in_process_batch_env``: the same class with
            every env stepped in the calling process), or a callable taking their arguments (a
            ``BatchEnvFactory``: one's own, or the ray backend's
            ``batchppo.backends.ray.ray_batch_env``, a
            [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv] with Ray actors as workers).
        num_workers: Units stepping envs (``BatchEnv`` semantics); ignored by ``"sync"``.
        max_length: Episode step limit; None keeps the registry's.
        normalize_ranges: Map finite bounds to ``[-1, 1]``.
        render_mode: Passed to ``gymnasium.make``.
        batch_env_kwargs: The batch env factory's own keyword arguments (a ``backend``
            callable's): for ``ray_batch_env``, those of
            [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv] (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``); for ``process_batch_env``, the other fields
            of ``WorkerOptions``. The named batch envs take none.
        max_restarts: ``BatchEnv``'s restart budget (not Ray's): how
            many times an env whose step raised, or whose worker died, is rebuilt and its
            episode truncated; 0 fails fast.
        preprocess: What builds each env in the workers in place of ``gymnasium.make``, under the
            standard stack: ``"atari"`` (or ``{"name": "atari", **settings}``, or an
            [`AtariStack`][batchppo.envs.AtariStack]) for the standard Atari preprocessing, uint8
            ``(4, 84, 84)`` frames; see ``preprocessing``.
        step_timeout: ``"process"`` and Ray's: seconds a worker (or actor) may take to answer a
            step, reset or call before [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] (see
            ``BatchEnv``); None waits for ever. ``"sync"`` refuses it: its envs step in the calling
            process, which cannot bound them.
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
        ValueError: Unknown id or batch env name, bad counts, ``batch_env_kwargs`` with a
            named batch env, an argument the batch env cannot honour. Raised before any worker
            starts.
        TypeError: ``ray_options``, the former name of ``batch_env_kwargs``.
    """
    _refuse_ray_options(env_kwargs)
    batch_env = _checked_batch_env(backend, batch_env_kwargs)
    num_envs = positive_int("num_envs", num_envs)
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
        **(batch_env_kwargs or {}),
    )
    if seed is not None:
        env.reset(seed=seed)
    return env


def _refuse_ray_options(env_kwargs: Mapping[str, Any]) -> None:
    """Refuses ``ray_options`` (old ``batch_env_kwargs``) before it reaches the env's factory."""
    if "ray_options" in env_kwargs:
        raise TypeError(
            "make() got ray_options: it is now batch_env_kwargs (the batch env factory's own "
            "keyword arguments)."
        )


def _checked_batch_env(
    backend: str | BatchEnvFactory, batch_env_kwargs: Mapping[str, Any] | None
) -> BatchEnvFactory:
    """``batch_env_of(backend)``, refusing ``batch_env_kwargs`` for a named one (it takes none)."""
    batch_env = batch_env_of(backend)
    if isinstance(backend, str) and batch_env_kwargs:
        raise ValueError(
            f"batch_env_kwargs {dict(batch_env_kwargs)}: the {backend!r} batch env takes none; "
            "they are the keyword arguments of a batch env factory (backend=ray_batch_env of "
            "batchppo.backends.ray, or one's own)."
        )
    return batch_env


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
        "batch_env_kwargs",
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


def __getattr__(name: str) -> Any:
    """A one-line error for the name that left this module (``ray_batch_env``)."""
    if name == "ray_batch_env":
        # ImportError, not AttributeError: ``from ... import`` keeps its message.
        raise ImportError(
            "batchppo.envs.make.ray_batch_env moved to the ray backend: from "
            "batchppo.backends.ray import ray_batch_env"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

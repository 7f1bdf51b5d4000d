"""``make``: a batch of Gymnasium envs with the standard wrapper stack.

The stack of one env, innermost first:

1. ``gymnasium.make(env_id, max_episode_steps=max_length, ...)`` (Gymnasium's ``TimeLimit``);
2. :class:`~batchppo.envs.wrappers.RangeNormalize` (when ``normalize_ranges``), which clips
   actions to ``[-1, 1]`` before mapping them to the env's bounds; float ``Box``
   observations, and each float ``Box`` leaf of Dict and Tuple ones, map to ``[-1, 1]`` on
   their finite dims; integer, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` ones pass
   unchanged;
3. Gymnasium's ``ClipAction`` (Box actions, only without range normalisation): clips to the
   env's own bounds;
4. :class:`~batchppo.envs.wrappers.ConvertTo32Bit` (float32 obs and reward, int32 discrete
   actions, non-finite values raise; leaf by leaf for Dict and Tuple observations, as for a
   flat observation of each leaf's kind).

:func:`make_env_fn` builds this stack around each env. :func:`make` builds the envs without
layers 2-4 and has the batch env apply them to all the envs of a worker at once, as array
operations (a :class:`~batchppo.envs.batch_transform.BatchTransform` read off the same stack),
with bitwise the same results; only envs whose spaces it does not cover (Dict or Tuple
spaces, integer observations, ``MultiDiscrete`` actions) and the ``"ray"`` backend get the
per-env stack.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
from gymnasium import spaces
from gymnasium.wrappers import ClipAction

from batchppo.envs.batch_env import BatchEnv
from batchppo.envs.batch_transform import BatchTransform, SpacesOnly
from batchppo.envs.wrappers import ConvertTo32Bit, RangeNormalize

__all__ = ["StandardStack", "batch_transform", "check_env_id", "make", "make_env_fn"]

BACKENDS = ("process", "sync", "ray")


def check_env_id(env_id: str) -> None:
    """Raises ValueError when ``env_id`` is not registered, suggesting close matches.

    Args:
        env_id: A Gymnasium id such as ``"Pendulum-v1"``, or ``"module:EnvName-v0"``, which
            imports ``module`` (that registers the id) first, as ``gymnasium.make`` does.
    """
    if ":" in env_id:
        module, env_id = env_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(
                f"env id {module}:{env_id}: cannot import {module!r} ({exc})"
            ) from None
    if env_id in gymnasium.registry:
        return
    close = difflib.get_close_matches(env_id, list(gymnasium.registry.keys()), n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(
        f"Unknown env id {env_id!r}: not in gymnasium.registry.{hint} (Ids of packages that "
        "register on import, e.g. MuJoCo's, need that package installed.)"
    )


def make_env_fn(
    env_id: str,
    *,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    **env_kwargs: Any,
) -> Callable[[], gymnasium.Env]:
    """A function that builds ONE env with the standard wrapper stack (see module docstring).

    Args:
        env_id: Gymnasium id.
        max_length: Episode step limit (Gymnasium ``TimeLimit``); None keeps the registry's.
        normalize_ranges: Apply :class:`RangeNormalize` (finite bounds to ``[-1, 1]``).
        render_mode: Passed to ``gymnasium.make`` (e.g. ``"rgb_array"`` for videos).
        **env_kwargs: Passed to ``gymnasium.make``.

    Returns:
        A picklable zero-argument callable returning the wrapped env.

    Raises:
        ValueError: Unknown ``env_id`` (with suggestions) or a bad ``max_length``.
    """
    check_env_id(env_id)
    if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"max_length must be a positive int or None; got {max_length!r}.")

    raw_fn = _raw_env_fn(env_id, max_length, render_mode, env_kwargs)
    stack = StandardStack(env_id, normalize_ranges)

    def env_fn() -> gymnasium.Env:
        return stack.wrap(raw_fn())

    return env_fn


def _raw_env_fn(
    env_id: str, max_length: int | None, render_mode: str | None, env_kwargs: dict[str, Any]
) -> Callable[[], gymnasium.Env]:
    """A function that builds one env without the stack (``gymnasium.make``'s own layers)."""

    def raw_fn() -> gymnasium.Env:
        return gymnasium.make(
            env_id, max_episode_steps=max_length, render_mode=render_mode, **env_kwargs
        )

    return raw_fn


def _stack(env: gymnasium.Env, env_id: str, normalize_ranges: bool) -> gymnasium.Env:
    """The standard stack (layers 2-4 of the module docstring) around ``env``."""
    clipped = False
    if normalize_ranges:
        env = RangeNormalize(env)
        clipped = env.rescales_actions  # it clips the actions it rescales to [-1, 1]
    if isinstance(env.action_space, spaces.Box) and not clipped:
        env = ClipAction(env)
    return ConvertTo32Bit(env, env_id=env_id)


@dataclasses.dataclass(frozen=True)
class StandardStack:
    """The standard stack of :func:`make_env_fn` as a
    :class:`~batchppo.envs.batch_transform.TransformFactory` (what :func:`make` gives
    ``BatchEnv``): the batch transform where it covers the raw envs' spaces, else the per-env
    stack.

    Attributes:
        env_id: The id the stack's errors name.
        normalize_ranges: As in :func:`make_env_fn`.
    """

    env_id: str
    normalize_ranges: bool = True

    def for_spaces(
        self, observation_space: gymnasium.Space, action_space: gymnasium.Space
    ) -> BatchTransform | None:
        """The batch transform for raw envs with these spaces (see :func:`batch_transform`)."""
        return batch_transform(self.env_id, observation_space, action_space, self.normalize_ranges)

    def wrap(self, env: gymnasium.Env) -> gymnasium.Env:
        """The per-env stack (layers 2-4 of the module docstring) around ``env``."""
        return _stack(env, self.env_id, self.normalize_ranges)


def batch_transform(
    env_id: str,
    observation_space: gymnasium.Space,
    action_space: gymnasium.Space,
    normalize_ranges: bool = True,
) -> BatchTransform | None:
    """The standard stack of :func:`make_env_fn` as a transform a batch env applies at once.

    Args:
        env_id: The id the stack's errors name.
        observation_space: The raw envs' observation space.
        action_space: The raw envs' action space.
        normalize_ranges: As in :func:`make_env_fn`.

    Returns:
        The :class:`~batchppo.envs.batch_transform.BatchTransform` for
        ``BatchEnv(raw_env_fns, transform=...)``, or None for spaces it does not cover.
    """
    if not BatchTransform.covers(observation_space, action_space):
        return None
    stack = _stack(SpacesOnly(observation_space, action_space), env_id, normalize_ranges)
    return BatchTransform.of_stack(stack)


def make(
    env_id: str,
    num_envs: int,
    *,
    seed: int | None = None,
    backend: str = "process",
    num_workers: int | None = None,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    ray_options: Mapping[str, Any] | None = None,
    max_restarts: int = 0,
    step_timeout: float | None = None,
    **env_kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """Builds ``num_envs`` envs with the standard wrapper stack as one batch env.

    Example:
        >>> import numpy as np
        >>> env = make("Pendulum-v1", 16, seed=0, max_length=200)
        >>> actions = np.zeros((16, 1), np.float32)
        >>> obs, reward, terminated, truncated, final_obs = env.step_arrays(actions)
        >>> env.close()

    Args:
        env_id: Gymnasium id.
        num_envs: Number of envs.
        seed: When given, the envs are reset once with ``seed`` (env ``i`` gets ``seed + i``);
            otherwise call ``reset`` yourself before stepping.
        backend: ``"process"`` (:class:`BatchEnv` with worker processes), ``"sync"`` (the same
            class with every env stepped in the calling process) or ``"ray"``
            (:class:`~batchppo.envs.ray_env.RayBatchEnv`, workers as Ray actors).
        num_workers: Units stepping envs (``BatchEnv`` semantics); ignored by ``"sync"``.
        max_length: Episode step limit; None keeps the registry's.
        normalize_ranges: Map finite bounds to ``[-1, 1]``.
        render_mode: Passed to ``gymnasium.make``.
        ray_options: ``"ray"`` only: keyword arguments of
            :class:`~batchppo.envs.ray_env.RayBatchEnv` (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``).
        max_restarts: ``BatchEnv``'s restart budget (``"process"`` and ``"sync"`` only): how
            many times an env whose step raised, or whose worker died, is rebuilt and its
            episode truncated; 0 fails fast.
        step_timeout: ``"process"`` and ``"ray"``: seconds a worker (or actor) may take to
            answer a step, reset or call before :class:`~batchppo.envs.EnvTimeoutError`
            (see ``BatchEnv``); None waits for ever. ``"sync"`` refuses it: its envs step
            in the calling process, which cannot bound them.
        **env_kwargs: Passed to ``gymnasium.make``.

    The ``"process"`` and ``"sync"`` backends apply the wrapper stack to the batch (see the
    module docstring), read off the spaces of the envs the workers build: every env is built
    once, and none in the calling process unless ``backend="sync"``. The ``"ray"`` backend
    builds each env once too, in its actor, in the per-env stack.

    Returns:
        The batch env (``BatchEnv`` or ``RayBatchEnv``), reset if ``seed`` was given.

    Raises:
        ValueError: Unknown id or backend, bad counts, ``ray_options`` with another backend,
            ``max_restarts`` with ``"ray"``. Raised before any worker starts.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}.")
    if ray_options and backend != "ray":
        raise ValueError(f"ray_options apply to backend='ray' only; got backend={backend!r}.")
    if max_restarts and backend == "ray":
        raise ValueError(
            f"max_restarts={max_restarts}: env restarts are for the process and sync backends "
            "only; the ray backend fails fast."
        )
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int; got {num_envs!r}.")
    if step_timeout is not None and backend == "sync":
        raise ValueError(
            f"step_timeout={step_timeout}: the sync backend steps its envs in this process, "
            "which cannot bound them; use backend='process' (worker processes) for a timeout."
        )
    fn = make_env_fn(
        env_id,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        render_mode=render_mode,
        **env_kwargs,
    )
    if backend == "ray":
        fns, transform = [fn] * num_envs, None
    else:  # BatchEnv reads the raw spaces off its workers' envs and picks the transform
        fns = [_raw_env_fn(env_id, max_length, render_mode, env_kwargs)] * num_envs
        transform = StandardStack(env_id, normalize_ranges)
    if backend == "process":
        env = BatchEnv(
            fns,
            num_workers=num_workers,
            max_restarts=max_restarts,
            transform=transform,
            step_timeout=step_timeout,
        )
    elif backend == "sync":
        env = BatchEnv(
            fns,
            num_workers=1,
            step_in_parent=True,
            max_restarts=max_restarts,
            transform=transform,
        )
    else:
        from batchppo.envs.ray_env import RayBatchEnv

        env = RayBatchEnv(
            fns, num_workers=num_workers, step_timeout=step_timeout, **(ray_options or {})
        )
    if seed is not None:
        env.reset(seed=seed)
    return env

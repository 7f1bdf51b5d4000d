"""The standard wrapper stack of [`make`][batchppo.envs.make.make], applied to a batch of envs at
once.

Per env, the stack ([`RangeNormalize`][batchppo.envs.RangeNormalize], Gymnasium's ``ClipAction``,
[`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit]) costs a few Python calls and small NumPy calls at
every step of every env: on Pendulum about half of what the env's own step costs. A
[`BatchTransform`][batchppo.envs.BatchTransform] holds the same maps, read off such a stack, and
``EnvGroup`` applies them to all the envs of a worker at once: one NumPy expression maps (and clips)
the actions of all its envs before they step, one maps the observations of all of them after, and
one sum checks them and the rewards for non-finite values. The results are bitwise those of the
per-env stack: the same ``batchppo.core.ranges.RangeMap`` expressions run elementwise in the same
dtypes, and the values are converted to 32 bits by the same casts.

The finiteness check keeps [`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit]'s guarantees: a NaN or
infinite observation (as normalised, before the conversion) or reward raises the same
``ValueError``, naming the env id and the step of the episode, raised by the env that returned it
(its index in the batch is named by the batch env). It is checked once per step over the whole
batch; only when that check fails are the envs looked at one by one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import ClipAction

from batchppo.core.ranges import RangeMap
from batchppo.envs.errors import SpaceMismatchError
from batchppo.envs.stack.env_group import space_difference
from batchppo.envs.stack.wrappers import (
    ConvertTo32Bit,
    RangeNormalize,
    non_finite_obs_message,
    non_finite_reward_message,
)

__all__ = [
    "BatchTransform",
    "SpacesOnly",
    "TransformFactory",
    "resolve_transform",
    "wrapped_env_fn",
]


class SpacesOnly(gymnasium.Env):
    """An env that has only spaces: what a wrapper stack is built over to read its spaces.

    Args:
        observation_space: The observation space it reports.
        action_space: The action space it reports.
    """

    def __init__(self, observation_space: gymnasium.Space, action_space: gymnasium.Space):
        self.observation_space = observation_space
        self.action_space = action_space


@runtime_checkable
class TransformFactory(Protocol):
    """A wrapper stack chosen once the raw envs' spaces are known (what ``make()`` passes).

    [`BatchEnv`][batchppo.envs.BatchEnv] reads the raw envs' spaces from the envs its workers build
    (no env is built for it in the calling process), then asks ``for_spaces`` for the
    [`BatchTransform`][batchppo.envs.BatchTransform] to apply to the batch. Where that is None
    (spaces a transform does not cover), every env is wrapped in ``wrap`` instead, as the per-env
    stack. It travels to the workers with cloudpickle.
    """

    def for_spaces(
        self, observation_space: gymnasium.Space, action_space: gymnasium.Space
    ) -> BatchTransform | None:
        """The batch transform for raw envs with these spaces, or None: use ``wrap``."""
        ...

    def wrap(self, env: gymnasium.Env) -> gymnasium.Env:
        """The per-env stack around ``env``."""
        ...


def _build_wrapped(
    env_fn: Callable[[], gymnasium.Env], wrap: Callable[[gymnasium.Env], gymnasium.Env]
) -> gymnasium.Env:
    return wrap(env_fn())


def wrapped_env_fn(
    env_fn: Callable[[], gymnasium.Env], wrap: Callable[[gymnasium.Env], gymnasium.Env]
) -> Callable[[], gymnasium.Env]:
    """A function that builds ``env_fn()`` wrapped in ``wrap`` (to rebuild a wrapped env)."""
    return functools.partial(_build_wrapped, env_fn, wrap)


@dataclasses.dataclass(frozen=True, eq=False)
class BatchTransform:
    """What a standard wrapper stack does to actions, observations and rewards, as batch maps.

    Built by [`of_stack`][batchppo.envs.BatchTransform.of_stack] from a stack over an env with the
    raw envs' spaces; picklable, so that it travels to the worker processes with the env functions.
    Applied to ``K`` envs at once by ``EnvGroup`` (see the module docstring).

    Attributes:
        env_id: The name the errors use (``ConvertTo32Bit``'s).
        raw_spaces: ``(observation_space, action_space)`` of the raw envs it applies to.
        spaces: ``(observation_space, action_space)`` the stack reports: what the batch env
            reports and what the agent sees.
        act_steps: What happens to an action on its way in, outermost wrapper first:
            ``("cast", dtype)`` (``ConvertTo32Bit``), ``("clip", low, high)``
            (``ClipAction``), ``("range", map, clip)`` (``RangeNormalize``).
        obs_maps: The range maps observations go through, innermost wrapper first.
        discrete: Whether actions are ``Discrete`` (they reach the envs as Python ints).
    """

    env_id: str
    raw_spaces: tuple[gymnasium.Space, gymnasium.Space]
    spaces: tuple[gymnasium.Space, gymnasium.Space]
    act_steps: tuple[tuple[Any, ...], ...]
    obs_maps: tuple[RangeMap, ...]
    discrete: bool

    @classmethod
    def of_stack(cls, stack: gymnasium.Env) -> BatchTransform | None:
        """Reads the maps off a wrapper stack, or None when its layers cannot be batched.

        The stack is ``ConvertTo32Bit`` outermost over any of ``RangeNormalize`` and
        ``ClipAction``, over an env whose spaces are those of the raw envs. Observations
        must be a float ``Box``, actions a float ``Box`` or ``Discrete``.

        Args:
            stack: The stack (over an env that only needs the raw spaces).

        Returns:
            The transform, or None for other layers or spaces (the per-env stack then has to
            be used).
        """
        layers = []
        env = stack
        while isinstance(env, gymnasium.Wrapper):
            layers.append(env)
            env = env.env
        raw = (env.observation_space, env.action_space)
        if not layers or type(layers[0]) is not ConvertTo32Bit or not cls.covers(*raw):
            return None
        act_steps: list[tuple[Any, ...]] = []
        obs_maps: list[RangeMap] = []
        for layer in layers:
            if type(layer) is ConvertTo32Bit:
                if layer is not layers[0]:
                    return None
                if layer.act_dtype is not None:
                    act_steps.append(("cast", np.dtype(layer.act_dtype)))
            elif type(layer) is RangeNormalize:
                if layer.act_map is not None:
                    act_steps.append(("range", layer.act_map, layer.clip_actions))
                if layer.leaf_maps is not None:  # per-leaf maps of a Dict/Tuple space
                    return None
                if layer.obs_map is not None:
                    obs_maps.insert(0, layer.obs_map)
            elif type(layer) is ClipAction:
                inner = layer.env.action_space
                act_steps.append(("clip", inner.low, inner.high))
            else:
                return None
        return cls(
            env_id=layers[0].env_id,
            raw_spaces=raw,
            spaces=(stack.observation_space, stack.action_space),
            act_steps=tuple(act_steps),
            obs_maps=tuple(obs_maps),
            discrete=isinstance(raw[1], spaces.Discrete),
        )

    @staticmethod
    def covers(observation_space: gymnasium.Space, action_space: gymnasium.Space) -> bool:
        """Whether envs with these spaces can have a transform: a float ``Box`` of
        observations, and a float ``Box`` or a ``Discrete`` of actions."""
        if not (isinstance(observation_space, spaces.Box) and observation_space.dtype.kind == "f"):
            return False
        if isinstance(action_space, spaces.Discrete):
            return True
        return isinstance(action_space, spaces.Box) and action_space.dtype.kind == "f"

    def actions(self, agent: np.ndarray) -> Any:
        """The actions each env's ``step`` gets, for the agent actions of ``K`` envs.

        Args:
            agent: ``(K, *action_shape)`` actions in the transformed action space.

        Returns:
            A fresh ``(K, *shape)`` array in the raw envs' terms (an env may keep what it is
            given), or a list of ``K`` Python ints for ``Discrete`` actions.
        """
        if self.discrete:
            return agent.tolist()
        a = agent
        for step in self.act_steps:
            kind = step[0]
            if kind == "cast":
                a = np.asarray(a, dtype=step[1])
            elif kind == "clip":
                a = np.clip(a, step[1], step[2])
            else:
                a = step[1].denormalize(a, clip=step[2])
        return a.copy() if a is agent else a

    def observations(self, obs: np.ndarray) -> np.ndarray:
        """Range-normalises the observations of ``K`` envs (no check, no conversion yet).

        Args:
            obs: ``(K, *obs_shape)`` observations as the raw envs returned them.

        Returns:
            The observations as ``ConvertTo32Bit`` checks them (in NumPy's result dtype of
            the observations and the maps; storing them into the 32-bit arrays converts
            them as ``ConvertTo32Bit`` does).
        """
        for ranges in self.obs_maps:
            obs = ranges.normalize(obs)
        return obs

    def observation(self, obs: Any, step: int = 0) -> np.ndarray:
        """One env's observation, normalised and checked (resets: the rare path).

        Args:
            obs: The observation the raw env returned.
            step: The step of its episode (0: a reset), for the error message.

        Returns:
            The normalised observation (converted when it is stored).

        Raises:
            ValueError: The observation is NaN or infinite (after normalisation).
        """
        out = self.observations(np.asarray(obs))
        if not np.isfinite(out).all():
            raise ValueError(non_finite_obs_message(self.env_id, step, out))
        return out

    def first_error(
        self,
        rewards: Sequence[Any],
        step_obs: Sequence[np.ndarray],
        reset_obs: dict[int, np.ndarray],
        steps: Sequence[int],
        skip: set[int],
    ) -> list[tuple[int, str]]:
        """Finds the envs whose step returned a non-finite value, with their error messages.

        The slow path, taken only when the batch check failed. It checks, per env and in the
        order ``ConvertTo32Bit`` does: the reward, the step's observation, then the
        observation of the reset that followed (same-step autoreset).

        Args:
            rewards: The reward each env returned.
            step_obs: The normalised observation each env's step returned (None: the env was
                reset instead of stepped, as in ``NEXT_STEP`` mode).
            reset_obs: The normalised reset observation of the envs that were reset.
            steps: Each env's step of the episode for that step.
            skip: Local indices not to check (envs that raised).

        Returns:
            ``(local index, message)`` of each such env, in index order; empty when every
            value is finite (the batch check failed on an overflow of the 32-bit reward or of
            a sum).
        """
        errors = []
        for j, reward in enumerate(rewards):
            if j in skip:
                continue
            message = None
            obs = step_obs[j]
            if obs is not None and not math.isfinite(reward):
                message = non_finite_reward_message(self.env_id, steps[j], reward)
            elif obs is not None and not np.isfinite(obs).all():
                message = non_finite_obs_message(self.env_id, steps[j], obs)
            elif j in reset_obs and not np.isfinite(reset_obs[j]).all():
                message = non_finite_obs_message(self.env_id, 0, reset_obs[j])
            if message is not None:
                errors.append((j, message))
        return errors


def resolve_transform(
    transform: BatchTransform | TransformFactory | None,
    raw: tuple[gymnasium.Space, gymnasium.Space],
    expected: tuple[gymnasium.Space, gymnasium.Space],
) -> tuple[
    BatchTransform | None,
    Callable[[gymnasium.Env], gymnasium.Env] | None,
    tuple[gymnasium.Space, gymnasium.Space],
]:
    """What a batch env's ``transform`` argument makes of raw envs with env 0's spaces ``raw``.

    Args:
        transform: The argument: a ``BatchTransform``, a ``TransformFactory`` or None.
        raw: Env 0's ``(observation, action)`` spaces.
        expected: The spaces every env must match (env 0's, or those of a custom
            ``observation_mode``): the batch env's without a transform.

    Returns:
        ``(batch, wrap, spaces)``: the batch transform (or None), the per-env stack of a factory
        that gave none (or None), and the ``(observation, action)`` spaces the batch env reports.

    Raises:
        SpaceMismatchError: A ``BatchTransform`` built for other spaces than env 0's.
        ValueError: ``transform`` is neither a ``BatchTransform`` nor a ``TransformFactory``.
    """
    if transform is None:
        return None, None, expected
    if isinstance(transform, BatchTransform):
        _check_transform_spaces(transform, raw)
        return transform, None, transform.spaces
    if isinstance(transform, TransformFactory):
        batch = transform.for_spaces(*raw)
        if batch is not None:
            return batch, None, batch.spaces
        wrapped = transform.wrap(SpacesOnly(*raw))
        return None, transform.wrap, (wrapped.observation_space, wrapped.action_space)
    raise ValueError(
        "transform must be a BatchTransform or a TransformFactory (such as "
        f"batchppo.envs.make.StandardStack); got {type(transform).__name__}."
    )


def _check_transform_spaces(
    transform: BatchTransform, raw: tuple[gymnasium.Space, gymnasium.Space]
) -> None:
    """Raises ``SpaceMismatchError`` unless env 0's spaces ``raw`` are those ``transform``
    applies to."""
    labels = ("observation", "action")
    for label, space, expected in zip(labels, raw, transform.raw_spaces, strict=True):
        if space != expected:
            raise SpaceMismatchError(
                f"env 0 has {label} space {space}, but the transform applies to {expected} "
                f"({space_difference(space, expected)}); build the transform for these envs."
            )

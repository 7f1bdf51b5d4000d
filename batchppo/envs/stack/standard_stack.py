"""The standard wrapper stack of [`make`][batchppo.envs.make.make], per env or for a whole batch.

The stack of one env, innermost first:

1. ``gymnasium.make(env_id, max_episode_steps=max_length, ...)`` (Gymnasium's ``TimeLimit``), or,
   with ``preprocess=``, the env that preprocessing builds (``"atari"``:
   ``batchppo.envs.stack.atari``);
2. [`RangeNormalize`][batchppo.envs.RangeNormalize] (when ``normalize_ranges``), which clips actions
   to ``[-1, 1]`` before mapping them to the env's bounds; float ``Box`` observations, and each
   float ``Box`` leaf of Dict and Tuple ones, map to ``[-1, 1]`` on their finite dims; integer,
   ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` ones pass unchanged;
3. Gymnasium's ``ClipAction`` (Box actions, only without range normalisation): clips to the
   env's own bounds;
4. [`ConvertTo32Bit`][batchppo.envs.ConvertTo32Bit] (float64 obs to float32 and int64 obs to int32,
   every other dtype kept: uint8 frames stay uint8; float32 rewards, int32 discrete actions;
   non-finite values raise; leaf by leaf for Dict and Tuple observations, as for a flat observation
   of each leaf's kind).

``StandardStack.wrap`` puts layers 2-4 around one env. ``batch_transform`` reads the same layers off
as a [`BatchTransform`][batchppo.envs.BatchTransform], which a batch env applies to all the envs of
a worker at once, as array operations, with bitwise the same results; ``StandardStack`` offers both
to a batch env (a ``TransformFactory``), which picks once its envs' spaces are known.
[`make`][batchppo.envs.make.make] re-exports these names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import gymnasium
from gymnasium import spaces
from gymnasium.wrappers import ClipAction

from batchppo.envs.stack.batch_transform import BatchTransform, SpacesOnly
from batchppo.envs.stack.wrappers import ConvertTo32Bit, RangeNormalize

__all__ = ["StandardStack", "batch_transform"]


def stacked_env_fn(
    raw_fn: Callable[[], gymnasium.Env], stack: StandardStack
) -> Callable[[], gymnasium.Env]:
    """A function that builds ``raw_fn``'s env inside ``stack``'s per-env wrappers."""

    def env_fn() -> gymnasium.Env:
        return stack.wrap(raw_fn())

    return env_fn


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
    """The standard stack of [`make_env_fn`][batchppo.envs.make_env_fn] as a ``TransformFactory``
    (what [`make`][batchppo.envs.make.make] gives ``BatchEnv``): the batch transform where it covers
    the raw envs' spaces, else the per-env stack.

    Attributes:
        env_id: The id the stack's errors name.
        normalize_ranges: As in [`make_env_fn`][batchppo.envs.make_env_fn].
    """

    env_id: str
    normalize_ranges: bool = True

    def for_spaces(
        self, observation_space: gymnasium.Space, action_space: gymnasium.Space
    ) -> BatchTransform | None:
        """The batch transform for raw envs with these spaces (see
        [`batch_transform`][batchppo.envs.stack.standard_stack.batch_transform])."""
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
    """The standard stack of [`make_env_fn`][batchppo.envs.make_env_fn] as a transform a batch env
    applies at once.

    Args:
        env_id: The id the stack's errors name.
        observation_space: The raw envs' observation space.
        action_space: The raw envs' action space.
        normalize_ranges: As in [`make_env_fn`][batchppo.envs.make_env_fn].

    Returns:
        The [`BatchTransform`][batchppo.envs.BatchTransform] for ``BatchEnv(raw_env_fns,
        transform=...)``, or None for spaces it does not cover.
    """
    if not BatchTransform.covers(observation_space, action_space):
        return None
    stack = _stack(SpacesOnly(observation_space, action_space), env_id, normalize_ranges)
    return BatchTransform.of_stack(stack)

"""The ``jumanji`` backend's env: [`JumanjiEnv`][batchppo.backends.JumanjiEnv], a Jumanji env as a
batched [`Env`][batchppo.core.Env], ``vmap``-ed over the batch, with our own step counter for the
time limit and same-step auto-reset inside the compiled step. Needs the optional ``jumanji``
package.

Jumanji's API: ``env.reset(key) -> (state, timestep)``, ``env.step(state, action) -> (state,
timestep)``, a ``TimeStep(step_type, reward, discount, observation, extras)``, and
``observation_spec`` / ``action_spec`` as ``jumanji.specs``. The specs map to the spaces of
``batchppo.core.spaces`` (``jumanji_spaces``):

* ``DiscreteArray`` -> ``Discrete``; ``MultiDiscreteArray`` (1-D) -> ``MultiDiscrete``;
* ``BoundedArray`` -> ``Box`` of its dtype and bounds; ``Array`` -> an unbounded ``Box``;
* a nested ``Spec`` (Jumanji's observations are NamedTuples, such as Snake's ``Observation(grid,
  step_count, action_mask)``) -> a dict of its fields, so an observation reaches the policy as a
  dict of arrays; every field is kept, an ``action_mask`` included (an input of the network; the
  policy's distribution is not masked by it).

An episode ends where ``timestep.last()``: a termination where its discount is 0, a truncation
otherwise (Jumanji's ``truncation``); our own ``max_length`` cuts episodes as truncations too.

The backend's record and id check live in ``batchppo.backends.jumanji``, which imports this module
when it builds an env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from batchppo.backends.factories import call_factory, expect_api, is_factory_id
from batchppo.core import spaces
from batchppo.core.env import EnvSpec, StepResult
from batchppo.core.pure_env import (
    DEFAULT_RESET_RATIO,
    PureJaxEnv,
    TimedState,
    check_autoreset,
    check_max_length,
    check_num_envs,
    check_reset_ratio,
)
from batchppo.core.ranges import (
    denormalize_action,
    maps_dtype,
    normalized_bounds,
    range_normalize_obs,
)

if TYPE_CHECKING:
    from batchppo.envs.make import EnvProbe

__all__ = ["JumanjiEnv", "build_jumanji_env", "jumanji_spaces", "probe_jumanji_env"]

# Jumanji's own batching and restarts: batchppo batches and restarts the env itself.
_OWN_WRAPPERS = ("VmapWrapper", "AutoResetWrapper", "VmapAutoResetWrapper")


def build_jumanji_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> Any:
    """The Jumanji env of ``env_id``: ``jumanji.make(env_id, **env_kwargs)`` for a Jumanji id,
    the factory's product for a ``module:factory`` (``batchppo.backends.factories``).

    Raises:
        ValueError: The id is unknown, the factory returned another API, or the env is wrapped
            in Jumanji's own batching or restarts (one line each).
    """
    if is_factory_id(env_id):
        env = call_factory(env_id, env_kwargs)
        expect_api(env_id, env, "jumanji")
    else:
        from batchppo.backends.jumanji import check_jumanji_id

        check_jumanji_id(env_id)
        import jumanji

        env = jumanji.make(env_id, **dict(env_kwargs or {}))
    _check_unwrapped(env_id, env)
    return env


def _check_unwrapped(env_id: str, env: Any) -> None:
    """Refuses Jumanji's ``VmapWrapper`` and ``AutoResetWrapper`` around the env."""
    inner = env
    while inner is not None:
        name = type(inner).__name__
        if name in _OWN_WRAPPERS:
            raise ValueError(
                f"env {env_id!r}: the env is wrapped in Jumanji's {name}; return it without "
                "(batchppo batches the env and restarts finished episodes itself)"
            )
        inner = vars(inner).get("_env")


def jumanji_spaces(env: Any, who: str = "env") -> tuple[Any, Any]:
    """The observation and action spaces (``batchppo.core.spaces``) of a Jumanji env's specs.

    Args:
        env: A Jumanji env (its ``observation_spec`` and ``action_spec`` are read).
        who: Who the env is, the messages' first words (``env 'Snake-v1'``).

    Returns:
        ``(observation_space, action_space)``: a nested ``Spec`` becomes a dict of its fields.

    Raises:
        UnsupportedSpaceError: A spec the env API cannot carry (one line: the spec, where, what
            works), or an action that is not one leaf.
    """
    obs_space = _space_of(env.observation_spec, f"{who}: observation spec", "")
    action_space = _space_of(env.action_spec, f"{who}: action spec", "")
    leaf = spaces.single(action_space)
    if leaf is None or (isinstance(leaf, spaces.Box) and not leaf.is_float):
        raise _unsupported(
            env.action_spec,
            f"{who}: action spec",
            "",
            "one DiscreteArray, MultiDiscreteArray or float BoundedArray or Array",
        )
    return obs_space, action_space


def _space_of(spec: Any, origin: str, path: str) -> Any:
    """The space tree of one Jumanji spec (``jumanji_spaces``)."""
    from jumanji import specs

    if isinstance(spec, specs.MultiDiscreteArray):
        nvec = np.asarray(spec.num_values)
        if nvec.ndim != 1:
            raise _unsupported(spec, origin, path, "a MultiDiscreteArray of rank 1")
        return spaces.MultiDiscrete(tuple(int(n) for n in nvec))
    if isinstance(spec, specs.DiscreteArray):
        return spaces.Discrete(int(spec.num_values))
    if isinstance(spec, specs.BoundedArray):
        return spaces.box(spec.shape, spec.dtype, spec.minimum, spec.maximum)
    if isinstance(spec, specs.Array):
        return spaces.box(spec.shape, spec.dtype)
    if isinstance(spec, specs.Spec):
        fields = _fields(spec)
        if not fields:
            raise _unsupported(spec, origin, path, "a Spec with fields")
        return {name: _space_of(child, origin, f"{path}[{name!r}]") for name, child in fields}
    raise _unsupported(spec, origin, path, "jumanji.specs")


def _fields(spec: Any) -> list[tuple[str, Any]]:
    """The named child specs of a nested ``Spec`` (as ``jumanji.specs`` itself reads them)."""
    from jumanji import specs

    return [
        (name, child)
        for name, child in vars(spec).items()
        if isinstance(child, specs.Spec) and not name.startswith("_")
    ]


def _unsupported(spec: Any, origin: str, path: str, needed: str) -> spaces.UnsupportedSpaceError:
    where = f" at {path}" if path else ""
    name = getattr(spec, "name", "")
    return spaces.UnsupportedSpaceError(
        f"{origin}: {type(spec).__name__} {name!r}{where} is not supported (needs "
        f"{needed}); map it to a supported spec in a wrapper of the env (jumanji.wrappers.Wrapper)"
    )


def probe_jumanji_env(
    env_id: str, *, normalize_ranges: bool, env_kwargs: Mapping[str, Any]
) -> EnvProbe:
    """The ``jumanji`` backend's start-up check (``Backend.probe``): one env built, before a run
    dir is made, with every check ``JumanjiEnv`` makes of it but the time limit (which needs the
    config's ``max_length``); nothing is compiled.

    Args:
        env_id: A Jumanji id or a ``module:factory``.
        normalize_ranges: Not read: the spaces are the env's own (range normalisation
            changes float bounds only, which the start-up checks do not read).
        env_kwargs: As ``make_jumanji_env`` takes them.

    Returns:
        The env's spaces, as Jumanji maps its specs to Gymnasium's
        (``jumanji.specs.jumanji_specs_to_gym_spaces``), and its ``time_limit``.

    Raises:
        ValueError: One line, as ``JumanjiEnv`` raises it.
    """
    from jumanji.specs import jumanji_specs_to_gym_spaces

    from batchppo.envs.make import EnvProbe

    env = build_jumanji_env(env_id, dict(env_kwargs))
    _check_scalar_steps(env_id, env)
    jumanji_spaces(env, f"env {env_id!r}")
    limit = getattr(env, "time_limit", None)
    return EnvProbe(
        observation_space=jumanji_specs_to_gym_spaces(env.observation_spec),
        action_space=jumanji_specs_to_gym_spaces(env.action_spec),
        time_limit=int(limit) if isinstance(limit, int | np.integer) else None,
    )


class JumanjiEnv(PureJaxEnv):
    """A Jumanji environment as a batched [`Env`][batchppo.core.Env].

    Observations are the observation spec's tree, a nested ``Spec`` as a dict of its fields
    (``jumanji_spaces``). ``terminated`` is ``timestep.last()`` with a discount of 0;
    ``truncated`` is ``last()`` with a nonzero discount (Jumanji's ``truncation``), or our step
    count reaching ``max_length`` before the env ended. Most Jumanji envs end at their own
    ``time_limit`` with a discount of 0 (Snake, Maze): those ends stay terminations, as the env
    declares them; a ``max_length`` under the env's ``time_limit`` cuts its episodes as
    truncations instead. ``timestep.extras`` is not read.

    Args:
        env_id: A Jumanji id (``Snake-v1``, ``Game2048-v1``: ``jumanji.make``), or
            ``module:factory`` returning a ``jumanji.Environment`` (``jumanji:make`` with
            ``env_kwargs={"id": "Snake-v1"}``), called with ``env_kwargs``.
        num_envs: Batch size.
        max_length: Time limit in steps; None uses the env's ``time_limit``.
        normalize_ranges: Rescale the finite dims of float Box observation leaves, and a float
            Box action, to [-1, 1] (``batchppo.core.ranges``, as the host wrapper does leaf by
            leaf).
        env_kwargs: Keywords of ``jumanji.make`` (the env's constructor) or of the factory.
        autoreset: How finished envs restart (`AUTORESET_MODES`): ``select`` (the default, as
            for gymnax), ``cond`` (the reset only at steps where an episode ended: for envs
            whose reset draws an expensive instance), ``first`` or ``optimistic``
            (``reset_ratio`` envs share each step's fresh resets).
        reset_ratio: Envs per fresh reset with ``autoreset="optimistic"``.

    Raises:
        ValueError: An unknown id, a factory of another API, specs the env API cannot carry,
            a reward or discount that is not a scalar (a multi-agent env: wrap it in
            ``jumanji.wrappers.MultiToSingleWrapper``), or no time limit at all.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        max_length: int | None = None,
        normalize_ranges: bool = True,
        env_kwargs: Mapping[str, Any] | None = None,
        autoreset: str = "select",
        reset_ratio: int = DEFAULT_RESET_RATIO,
    ) -> None:
        env = build_jumanji_env(env_id, env_kwargs)
        _check_scalar_steps(env_id, env)
        self._env = env
        self._env_id = env_id
        self._num_envs = check_num_envs(num_envs)
        self._autoreset = check_autoreset(autoreset)
        self._reset_ratio = check_reset_ratio(reset_ratio)
        self._max_length = _time_limit_of(env_id, env, check_max_length(max_length))
        self._normalize = bool(normalize_ranges)
        self._raw_obs_space, self._raw_action_space = jumanji_spaces(env, f"env {env_id!r}")
        self._spec = EnvSpec.from_spaces(
            jax.tree.map(self._normalized_leaf, self._raw_obs_space),
            self._normalized_leaf(self._raw_action_space),
        )

    def __repr__(self) -> str:
        return (
            f"JumanjiEnv({self._env_id!r}, num_envs={self._num_envs}, "
            f"max_length={self._max_length}, normalize_ranges={self._normalize})"
        )

    def _maps(self, leaf: spaces.Leaf) -> bool:
        """Whether range normalisation rescales ``leaf`` (a float Box, normalisation on)."""
        return self._normalize and isinstance(leaf, spaces.Box) and maps_dtype(leaf.dtype)

    def _normalized_leaf(self, leaf: spaces.Leaf) -> spaces.Leaf:
        if not self._maps(leaf):
            return leaf
        return spaces.Box(leaf.shape, leaf.dtype, *normalized_bounds(leaf.low, leaf.high))

    def _observe(self, observation: Any) -> Any:
        """A batch of Jumanji observations as the tree of ``spec.obs_space``."""
        tree = _as_tree(self._env.observation_spec, observation)

        def leaf(space: spaces.Leaf, x: jax.Array) -> jax.Array:
            if self._maps(space):
                return range_normalize_obs(x, space.low, space.high).astype(space.dtype)
            return jnp.asarray(x, space.dtype)

        return jax.tree.map(leaf, self._raw_obs_space, tree)

    def _env_action(self, action: jax.Array) -> jax.Array:
        space = self._raw_action_space
        action = spaces.cast_actions(self._spec.action_space, action, self._num_envs, "JumanjiEnv")
        if self._maps(space):
            action = denormalize_action(action, space.low, space.high)
        return jnp.asarray(action, self._env.action_spec.dtype)

    def _reset_all(self, key: jax.Array, count: int | None = None) -> tuple[Any, Any]:
        """Fresh resets of ``count`` envs (every env by default): ``(env_state, obs)``."""
        keys = jax.random.split(key, self._num_envs if count is None else count)
        env_state, timestep = jax.vmap(self._env.reset)(keys)
        return env_state, self._observe(timestep.observation)

    def reset(self, key: jax.Array) -> tuple[TimedState, Any]:
        """Resets every env; returns ``(state, obs)``."""
        env_state, obs = self._reset_all(key)
        return self._fresh_state(env_state, (env_state, obs)), obs

    def step(self, state: TimedState, action: Any, key: jax.Array) -> StepResult:
        """Steps every env; finished episodes restart in the same step."""
        env_state, timestep = jax.vmap(self._env.step)(state.env_state, self._env_action(action))
        last = timestep.last().reshape(self._num_envs)
        ends = last & (jnp.reshape(timestep.discount, (self._num_envs,)) == 0)
        time, truncated, _ = self._time_limit(state.time, ends)
        # A last step with a nonzero discount is the env's own cut (Jumanji's truncation).
        truncated = truncated | (last & ~ends)
        done = ends | truncated
        final_obs = self._observe(timestep.observation)
        env_state, next_obs = self._restart(
            done, state, lambda count: self._reset_all(key, count), (env_state, final_obs)
        )
        return StepResult(
            state=state.replace(env_state=env_state, time=jnp.where(done, 0, time)),
            obs=next_obs,
            reward=jnp.asarray(timestep.reward, jnp.float32).reshape(self._num_envs),
            terminated=ends,
            truncated=truncated,
            final_obs=final_obs,
        )


def _as_tree(spec: Any, value: Any) -> Any:
    """``value`` (a Jumanji observation: NamedTuples or dataclasses of arrays) as a dict tree of
    the structure ``_space_of`` gives ``spec``."""
    from jumanji import specs

    if isinstance(spec, specs.Array):
        return value
    return {name: _as_tree(child, getattr(value, name)) for name, child in _fields(spec)}


def _check_scalar_steps(env_id: str, env: Any) -> None:
    """Refuses an env whose reward or discount is not one scalar per step (multi-agent)."""
    for what in ("reward", "discount"):
        shape = tuple(getattr(env, f"{what}_spec").shape)
        if shape != ():
            raise ValueError(
                f"env {env_id!r}: its {what} has shape {shape}, one per agent; batchppo trains "
                "one agent per env: wrap it in jumanji.wrappers.MultiToSingleWrapper in a factory"
            )


def _time_limit_of(env_id: str, env: Any, max_length: int | None) -> int:
    """``max_length``, or the env's own ``time_limit`` where it is None."""
    if max_length is not None:
        return max_length
    own = getattr(env, "time_limit", None)
    if isinstance(own, int | np.integer) and own >= 1:
        return int(own)
    raise ValueError(
        f"env {env_id!r} has no time_limit of its own; set max_length (--set max_length=N)"
    )

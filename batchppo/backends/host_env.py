"""The host backends' env: [`HostEnv`][batchppo.backends.HostEnv], a Gymnasium ``VectorEnv`` in
same-step auto-reset mode (such as ``batchppo.envs.BatchEnv``) called through
``jax.experimental.io_callback`` so that it runs inside ``jit`` and ``lax.scan``: the
``InGraphBatchEnv`` of the original Batch PPO. Also the conversion of Gymnasium spaces into the
core's space trees (``from_gymnasium``). A host env's exceptions are kept and handed to the
learner through the core's env protocol (``take_error``; ``batchppo.core.env.raise_env_error``),
so no learner imports this module.

The records of the host backends (``process``, ``sync``, ``ray``) live in ``batchppo.backends.host``
and ``batchppo.backends.ray``; their builder imports this module when it builds an env.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from batchppo.core import spaces
from batchppo.core.env import EnvSpec, StepResult, is_env_error, mark_env_error
from batchppo.core.pure_env import check_num_envs
from batchppo.envs.final_obs import final_obs_from_infos

if TYPE_CHECKING:
    from batchppo.envs.env_ids import EnvProbe
    from batchppo.envs.episode_metrics import EpisodeInfoRecorder

__all__ = [
    "HostEnv",
    "from_gymnasium",
    "host_call",
    "spec_from_spaces",
    "wrap_host_env",
]


def from_gymnasium(space: Any, origin: str = "env", path: str = "") -> Any:
    """The space tree (``batchppo.core.spaces``) of a Gymnasium space.

    Args:
        space: A Gymnasium space.
        origin: Who asks, for the error message (``"observation space"``, ...).
        path: Where ``space`` sits in an enclosing space (recursion).

    Returns:
        A leaf spec or a dict/tuple of them (Dict keys keep their names).

    Raises:
        UnsupportedSpaceError: Text, Graph, Sequence, OneOf, a Discrete with ``start != 0``
            or a MultiDiscrete of rank other than 1 (one line naming it and its path).
    """
    from gymnasium import spaces as gs

    if isinstance(space, gs.Box):
        return spaces.box(space.shape, space.dtype, space.low, space.high)
    if isinstance(space, gs.Discrete):
        if int(space.start) != 0:
            raise spaces.unsupported(space, path, origin)
        return spaces.Discrete(int(space.n))
    if isinstance(space, gs.MultiDiscrete):
        if space.nvec.ndim != 1 or np.any(np.asarray(space.start) != 0):
            raise spaces.unsupported(space, path, origin)
        return spaces.MultiDiscrete(tuple(int(n) for n in space.nvec))
    if isinstance(space, gs.MultiBinary):
        if len(space.shape) != 1:
            raise spaces.unsupported(space, path, origin)
        return spaces.MultiBinary(int(space.shape[0]))
    if isinstance(space, gs.Dict):
        return {k: from_gymnasium(s, origin, f"{path}[{k!r}]") for k, s in space.spaces.items()}
    if isinstance(space, gs.Tuple):
        return tuple(from_gymnasium(s, origin, f"{path}[{i}]") for i, s in enumerate(space))
    raise spaces.unsupported(space, path, origin)


def spec_from_spaces(obs_space: Any, act_space: Any) -> EnvSpec:
    """EnvSpec of one env of a Gymnasium vector env (any space of ``batchppo.core.spaces``).

    Raises:
        UnsupportedSpaceError: A space the env API does not carry (one line naming it).
    """
    return EnvSpec.from_spaces(
        from_gymnasium(obs_space, "HostEnv observation space"),
        from_gymnasium(act_space, "HostEnv action space"),
    )


def probe_gymnasium(
    env_id: str,
    *,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    wrappers: Any = (),
) -> EnvProbe:
    """The start-up check of the host backends whose envs ``batchppo.envs.make`` builds
    (``Backend.probe``): ``batchppo.envs.make.probe_env`` (one env built, reset and closed), and
    its spaces checked as ``HostEnv`` takes them (``spec_from_spaces``).

    Raises:
        ValueError: One line, as ``probe_env`` raises it, or a space the learners cannot take
            (``UnsupportedSpaceError``).
    """
    from batchppo.envs.make import probe_env

    probe = probe_env(
        env_id, normalize_ranges=normalize_ranges, env_kwargs=env_kwargs, wrappers=wrappers
    )
    spec_from_spaces(probe.observation_space, probe.action_space)
    return probe


def _final_obs_tree(space: Any, obs: Any, infos: Mapping[str, Any]) -> Any:
    """The dense final obs of a Dict/Tuple observation from Gymnasium's same-step infos.

    ``batchppo.envs.final_obs.final_obs_from_infos`` per leaf: ``obs`` where no episode ended, else
    a copy whose ended rows hold the leaf of ``infos["final_obs"][i]``.
    """
    if spaces.is_leaf(space):
        return final_obs_from_infos(obs, infos, space.dtype)
    mask = infos.get("_final_obs")
    if mask is None or not np.any(mask):
        return obs
    rows = np.flatnonzero(mask)

    def fill(sub: Any, batch: Any, finals: list[Any]) -> Any:
        if spaces.is_leaf(sub):
            out = np.array(batch, sub.dtype)
            out[rows] = np.stack([np.asarray(f, sub.dtype) for f in finals])
            return out
        keys = sub.keys() if isinstance(sub, dict) else range(len(sub))
        filled = {k: fill(sub[k], batch[k], [f[k] for f in finals]) for k in keys}
        return filled if isinstance(sub, dict) else tuple(filled[k] for k in keys)

    return fill(space, obs, [infos["final_obs"][i] for i in rows])


def _host_action_dtypes(space: Any) -> Any:
    """The tree of a Gymnasium action space with each leaf replaced by a dtype-only spec."""
    from gymnasium import spaces as gs

    if isinstance(space, gs.Dict):
        return {k: _host_action_dtypes(s) for k, s in space.spaces.items()}
    if isinstance(space, gs.Tuple):
        return tuple(_host_action_dtypes(s) for s in space.spaces)
    return spaces.DtypeOnly(np.dtype(space.dtype))


def _check_same_step(vector_env: Any) -> None:
    from gymnasium.vector import AutoresetMode

    mode = getattr(vector_env, "metadata", {}).get("autoreset_mode")
    if mode is not None and mode != AutoresetMode.SAME_STEP and str(mode) != "same-step":
        raise ValueError(
            f"HostEnv needs a vector env in same-step auto-reset mode, got {mode!r}; create it "
            "with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP."
        )


_JAX_CALLBACK_LOGGER = "jax._src.callback"  # logs each failed io_callback with its traceback


class _EnvErrorLogFilter(logging.Filter):
    """Drops JAX's log of an ``io_callback`` that failed with a host env's exception.

    JAX logs every callback exception with its traceback before the compiled call fails;
    ``raise_env_error`` raises that exception, traceback included, to the caller, and its
    ``JaxRuntimeError`` repeats the traceback too, so the log would only print it twice.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not is_env_error(error)


def _quiet_jax_callback_log() -> None:
    logger = logging.getLogger(_JAX_CALLBACK_LOGGER)
    if not any(isinstance(f, _EnvErrorLogFilter) for f in logger.filters):
        logger.addFilter(_EnvErrorLogFilter())


def host_call(host_fn: Any, result_structs: Any, state: jax.Array, *args: Any) -> tuple[Any, Any]:
    """``host_fn(*args)`` on the host from inside a compiled program, after every host call whose
    env state ``state`` descends from: the one home of how a host env's calls are ordered.

    The call goes through ``io_callback`` and hands ``state`` (the env's int32 step counter) back
    unchanged beside ``host_fn``'s result, so the next call, which takes the state this one
    returned, cannot start before it: calls on one env are chained by their data, whatever the
    policy does with the observations. On the CPU the callback is also ``ordered`` (a token
    through the program, and from program to program, as JAX orders effects). On an accelerator
    it is not: XLA's GPU compiler (jaxlib 0.11.2) aborts on programs where the ordered
    callback's token meets stacked uint8 frames (the ``frames`` form of
    ``bench/investigations/callback_repro.py`` reproduces it); there the device runs one
    program at a time, and within a program the chain orders the calls.

    Args:
        host_fn: The host function (NumPy in, NumPy out).
        result_structs: ``jax.ShapeDtypeStruct`` tree of its result.
        state: The env state the call follows (int32 step counters, of any shape).
        *args: ``host_fn``'s arguments.

    Returns:
        ``(state, result)``: ``state`` as the call handed it back, and ``host_fn``'s result.
    """

    def call(counter: np.ndarray, *host_args: Any) -> tuple[np.ndarray, Any]:
        return np.asarray(counter, np.int32), host_fn(*host_args)

    ordered = jax.default_backend() == "cpu"
    counter = jax.ShapeDtypeStruct(jnp.shape(state), jnp.int32)
    return io_callback(call, (counter, result_structs), state, *args, ordered=ordered)


class HostEnv:
    """A Gymnasium ``VectorEnv`` (same-step auto-reset) as a functional Env usable under jit.

    ``reset`` and ``step`` call the vector env through ``jax.experimental.io_callback``
    (``host_env.host_call``: one callback per step moving obs, reward, flags and final obs
    together), so a whole ``rollout`` over host envs compiles into one XLA program, as the
    original's ``InGraphBatchEnv`` put host envs into the TensorFlow graph. The env state is a
    step counter that chains the calls by their data; the real state lives on the host.

    Observation and action spaces are trees (``batchppo.core.spaces``): every observation leaf keeps
    its dtype (64-bit narrowed to 32-bit), so a uint8 frame crosses the ``io_callback`` as uint8;
    rewards become float32, actions each leaf's dtype. Non-finite float observations or rewards
    raise ``ValueError`` naming the env index and the field. An exception raised in ``host_reset``
    or ``host_step`` (the env's own, re-raised by ``BatchEnv`` with the worker's traceback, or
    ``WorkerDiedError``) is marked (``is_env_error``) and kept: a compiled call reports it as JAX's
    ``JaxRuntimeError``, and the core's ``raise_env_error`` takes the kept original
    ([`take_error`][batchppo.backends.HostEnv.take_error], the env protocol's ``KeepsErrors``)
    and raises it in its place. A
    ``BatchEnv`` with ``max_restarts`` restarts the env instead (its episode ends truncated;
    [`restarts`][batchppo.backends.HostEnv.restarts] counts the restarts).

    ``reset(key)`` reseeds the vector env with a seed drawn from ``key``
    ([`seed_from_key`][batchppo.backends.HostEnv.seed_from_key]), so runs are reproducible from the
    key alone.

    When the vector env has a ``step_arrays(actions) -> (obs, reward, terminated, truncated,
    final_obs)`` method (``batchppo.envs.BatchEnv``) it is used; otherwise ``step`` and the
    ``final_obs`` / ``_final_obs`` infos of Gymnasium's same-step mode.

    Args:
        vector_env: The vector env; HostEnv does not own it unless ``close`` is called.
        check_finite: Reject non-finite observations and rewards.
        take_games: Returns the raw scores of the games that ended since its last call (Atari
            envs: [`take_games`][batchppo.backends.HostEnv.take_games]); None: the envs report
            none.
    """

    def __init__(
        self,
        vector_env: Any,
        *,
        check_finite: bool = True,
        take_games: Callable[[], np.ndarray] | None = None,
    ) -> None:
        _check_same_step(vector_env)
        _quiet_jax_callback_log()
        self._env = vector_env
        self._num_envs = check_num_envs(vector_env.num_envs)
        self._spec = spec_from_spaces(
            vector_env.single_observation_space, vector_env.single_action_space
        )
        self._check_finite = bool(check_finite)
        self._take_games = take_games
        self._error: Exception | None = None  # the last exception of a host call, untaken
        self._obs_space = self._spec.obs_space
        self._nested_obs = not spaces.is_leaf(self._obs_space)
        self._float_leaves = [
            (i, path)
            for i, (leaf, path) in enumerate(
                zip(spaces.leaves(self._obs_space), spaces.leaf_paths(self._obs_space), strict=True)
            )
            if np.issubdtype(leaf.dtype, np.floating)
        ]
        # The vector env's own action dtypes (int64 Discrete, say), leaf by leaf.
        self._action_dtypes = _host_action_dtypes(vector_env.single_action_space)
        step_arrays = getattr(vector_env, "step_arrays", None)
        self._step_arrays = step_arrays if callable(step_arrays) else None
        self._recorder: EpisodeInfoRecorder | None = None
        n = self._num_envs
        self._obs_struct = spaces.structs(self._obs_space, (n,))
        self._step_structs = (
            self._obs_struct,
            jax.ShapeDtypeStruct((n,), jnp.float32),
            jax.ShapeDtypeStruct((n,), jnp.bool_),
            jax.ShapeDtypeStruct((n,), jnp.bool_),
            self._obs_struct,
        )

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one env."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return self._num_envs

    @property
    def vector_env(self) -> Any:
        """The wrapped vector env."""
        return self._env

    @property
    def restarts(self) -> int:
        """Envs the vector env restarted so far (``BatchEnv.restarts``; 0 if it has none)."""
        return int(getattr(self._env, "restarts", 0))

    def close(self) -> None:
        """Closes the wrapped vector env."""
        self._env.close()

    def record_infos(self, recorder: EpisodeInfoRecorder | None) -> None:
        """Feeds the vector env's infos to ``recorder`` from the next reset on; None stops.

        While a recorder is set, steps go through the vector env's ``step`` (infos included)
        instead of its ``step_arrays`` fast path.
        """
        self._recorder = recorder

    @property
    def reports_games(self) -> bool:
        """Whether [`take_games`][batchppo.backends.HostEnv.take_games] reports games."""
        return self._take_games is not None

    def take_games(self, state: Any = None) -> np.ndarray:
        """The raw scores (all lives, before clipping) of the Atari games that ended since the
        last call, float64; empty where the envs report none (``reports_games``). ``state``,
        the env state (which the fused envs keep their games in), is unused: the envs keep
        them on the host."""
        del state
        if self._take_games is None:
            return np.zeros(0)
        return np.asarray(self._take_games(), np.float64)

    def take_error(self) -> Exception | None:
        """The exception the last failed ``host_reset`` / ``host_step`` raised, if not taken yet.

        Inside a compiled program such an exception reaches the caller only as JAX's
        ``JaxRuntimeError``; this is the original (see ``raise_env_error``).
        """
        error, self._error = self._error, None
        return error

    @staticmethod
    def host_call(
        host_fn: Any, result_structs: Any, state: jax.Array, *args: Any
    ) -> tuple[Any, Any]:
        """``host_fn(*args)`` on the host from inside a compiled program, ordered after the
        calls ``state`` descends from, as this env's own steps are (the module's
        ``host_call``): for a learner that calls its own host functions on this env's batch
        (the stacked seeds' shared env) without importing this module."""
        return host_call(host_fn, result_structs, state, *args)

    def _keep_error(self, error: Exception) -> None:
        mark_env_error(error)
        self._error = error

    def __repr__(self) -> str:
        return f"HostEnv({self._env!r}, num_envs={self._num_envs})"

    @staticmethod
    def seed_from_key(key: jax.Array) -> jax.Array:
        """The int32 seed that ``reset(key)`` passes to ``vector_env.reset(seed=...)``."""
        return jax.random.randint(key, (), 0, np.iinfo(np.int32).max, dtype=jnp.int32)

    # -- host side ---------------------------------------------------------------------------

    def _finite(self, name: str, value: np.ndarray) -> None:
        if np.isfinite(value).all():
            return
        bad = ~np.isfinite(value.reshape(self._num_envs, -1)).all(axis=1)
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"HostEnv: non-finite {name} from env {index} of {self._num_envs} "
            f"(value {value[index]!r}); fix the env or wrap it to keep {name} finite."
        )

    def host_reset(self, seed: np.ndarray | int) -> np.ndarray:
        """Resets the vector env on the host with ``seed``; returns float32 observations.

        An exception it raises is marked and kept (see
        [`take_error`][batchppo.backends.HostEnv.take_error]).
        """
        try:
            return self._host_reset(seed)
        except Exception as error:
            self._keep_error(error)
            raise

    def _observations(self, obs: Any) -> Any:
        """``obs`` in the observation space's structure and leaf dtypes."""
        return spaces.cast(self._obs_space, obs)

    def _finite_obs(self, name: str, obs: Any) -> None:
        if not self._nested_obs:
            if self._float_leaves:
                self._finite(name, obs)
            return
        flat = spaces.flatten(self._obs_space, obs)
        for i, path in self._float_leaves:
            self._finite(f"{name}{path}", flat[i])

    def _host_reset(self, seed: np.ndarray | int) -> Any:
        obs, infos = self._env.reset(seed=int(seed))
        if self._recorder is not None:
            self._recorder.reset(infos)
        obs = self._observations(obs)
        if self._check_finite:
            self._finite_obs("observation", obs)
        return obs

    def host_step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Steps the vector env on the host (what ``step`` calls back into).

        Returns:
            ``(obs, reward, terminated, truncated, final_obs)`` NumPy arrays; float32
            observations and rewards, checked finite unless ``check_finite=False``.

        Raises:
            Exception: What the vector env raised (marked and kept, see
                [`take_error`][batchppo.backends.HostEnv.take_error]), or ``ValueError`` for
                non-finite values.
        """
        try:
            return self._host_step(action)
        except Exception as error:
            self._keep_error(error)
            raise

    def _host_step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        action = spaces.cast(self._action_dtypes, action)
        if self._step_arrays is not None and self._recorder is None:
            obs, reward, terminated, truncated, final_obs = self._step_arrays(action)
        else:
            obs, reward, terminated, truncated, infos = self._env.step(action)
            final_obs = _final_obs_tree(self._obs_space, obs, infos)
            if self._recorder is not None:
                self._recorder.step(infos, terminated, truncated)
        obs = self._observations(obs)
        reward = np.asarray(reward, np.float32)
        final_obs = self._observations(final_obs)
        if self._check_finite:
            self._finite_obs("observation", obs)
            self._finite_obs("final observation", final_obs)
            self._finite("reward", reward)
        return (
            obs,
            reward,
            np.asarray(terminated, np.bool_),
            np.asarray(truncated, np.bool_),
            final_obs,
        )

    # -- traced side ---------------------------------------------------------------------------

    def reset(self, key: jax.Array) -> tuple[jax.Array, Any]:
        """Resets the vector env with a seed drawn from ``key``; returns ``(state, obs)``."""
        start = jnp.zeros((), jnp.int32)
        return host_call(self.host_reset, self._obs_struct, start, self.seed_from_key(key))

    def step(self, state: jax.Array, action: Any, key: jax.Array) -> StepResult:
        """Steps the vector env on the host (the key is unused: host envs own their RNG)."""
        del key
        action = spaces.cast_actions(self._spec.action_space, action, self._num_envs, "HostEnv")
        state, host_result = host_call(self.host_step, self._step_structs, state, action)
        return self.step_result(state, host_result)

    @staticmethod
    def step_result(state: jax.Array, host_result: tuple[Any, ...]) -> StepResult:
        """The [`StepResult`][batchppo.core.StepResult] of a step that ``host_step`` made from
        ``state``.

        The one home of the env state's meaning (a step counter), for
        [`step`][batchppo.backends.HostEnv.step] and for rollouts that call ``host_step`` themselves
        ([`HostLoop`][batchppo.backends.HostLoop]).

        Args:
            state: The env state before the step.
            host_result: What ``host_step`` returned, ``(obs, reward, terminated, truncated,
                final_obs)``.
        """
        obs, reward, terminated, truncated, final_obs = host_result
        return StepResult(
            state=state + 1,
            obs=obs,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


def wrap_host_env(
    vector_env: Any,
    *,
    check_finite: bool = True,
    take_games: Callable[[], np.ndarray] | None = None,
) -> HostEnv:
    """``HostEnv(vector_env, check_finite=..., take_games=...)``, closing ``vector_env`` when
    that fails (a host backend's builder owns the batch env it starts)."""
    try:
        return HostEnv(vector_env, check_finite=check_finite, take_games=take_games)
    except Exception:
        vector_env.close()
        raise

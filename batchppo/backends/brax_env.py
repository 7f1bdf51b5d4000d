"""The ``brax`` backend's env: [`BraxEnv`][batchppo.backends.BraxEnv], a Brax (or MuJoCo-MJX through
Brax) env as a batched [`Env`][batchppo.core.Env], ``vmap``-ed over the batch with our own step
counter for the time limit and same-step auto-reset. Needs the optional ``brax`` package.

The backend's record and id check live in ``batchppo.backends.brax``, which imports this module when
it builds an env.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchppo.backends.factories import call_factory, expect_api, is_factory_id
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
from batchppo.core.wording import unknown_id_message

__all__ = ["BraxEnv"]


class BraxEnv(PureJaxEnv):
    """A Brax environment (any Brax backend, ``mjx`` included) as a batched Env.

    Brax marks time-limit ends with ``info['truncation']`` in its ``EpisodeWrapper``; this
    adapter does the same bookkeeping itself on the raw env: ``truncated`` when the step count
    reaches ``max_length`` and the env's own ``done`` is not set, ``terminated`` when Brax's
    ``done`` is set. Finished envs restart in the same step with a fresh random reset.
    Brax actions are already in [-1, 1]; they are clipped there, as range normalisation does.

    Args:
        env_name: A Brax env name (``ant``, ``halfcheetah``, ``hopper``, ``inverted_pendulum``...),
            or ``module:factory`` returning an env with Brax's API, called with ``env_kwargs``
            (``batchppo.backends.factories``).
        num_envs: Batch size.
        max_length: Time limit in steps.
        backend: Brax physics backend (``generalized``, ``positional``, ``spring``, ``mjx``);
            None uses the env's default.
        autoreset: How finished envs restart (`AUTORESET_MODES`):
            ``cond`` (the default: a Brax reset is expensive, so it runs only at steps where an
            episode ended), ``select`` (at every step; the same values) or ``first`` (each env
            from its first reset's state, as Brax's own training does: faster where episodes
            end often, less diverse starts) or ``optimistic`` (``reset_ratio`` envs share each
            step's fresh resets).
        reset_ratio: Envs per fresh reset with ``autoreset="optimistic"``.
        **env_kwargs: Passed to ``brax.envs.get_environment``.
    """

    def __init__(
        self,
        env_name: str,
        num_envs: int,
        *,
        max_length: int = 1000,
        backend: str | None = None,
        autoreset: str = "cond",
        reset_ratio: int = DEFAULT_RESET_RATIO,
        **env_kwargs: Any,
    ) -> None:
        try:
            from brax import envs as brax_envs
        except ImportError as error:
            raise ImportError(
                "BraxEnv needs the optional 'brax' package (pip install brax); it is not "
                f"importable here ({error})."
            ) from error
        if backend is not None:
            env_kwargs["backend"] = backend
        try:
            if is_factory_id(env_name):
                self._env = call_factory(env_name, env_kwargs)
                expect_api(env_name, self._env, "brax")
            else:
                self._env = brax_envs.get_environment(env_name, **env_kwargs)
        except KeyError:
            known = sorted(getattr(brax_envs, "_envs", {}))
            raise ValueError(
                unknown_id_message("Brax env", env_name, known, f"Valid envs: {', '.join(known)}")
            ) from None
        self._env_name = env_name
        self._autoreset = check_autoreset(autoreset)
        self._reset_ratio = check_reset_ratio(reset_ratio)
        self._num_envs = check_num_envs(num_envs)
        max_length = check_max_length(max_length)
        self._max_length = 1000 if max_length is None else max_length
        # One env's reset, jitted so that JAX traces it once, for the shape below and for
        # every program that resets (the first reset, the restarts): a pipeline's reset is a
        # long trace. Not Brax's own ``observation_size``: it runs a reset op by op, each
        # operation compiled on its own.
        self._reset_one = jax.jit(self._env.reset)
        # The key is made inside the abstract trace too, so that nothing runs on the device.
        obs = jax.eval_shape(lambda: self._reset_one(jax.random.key(0))).obs
        if isinstance(obs, jax.ShapeDtypeStruct):
            obs_shape: tuple[int, ...] = (int(obs.shape[-1]),)
        else:
            obs_size = self._env.observation_size
            obs_shape = (obs_size,) if isinstance(obs_size, int) else tuple(obs_size)
        act_shape = (int(self._env.action_size),)
        self._spec = EnvSpec(
            obs_shape=obs_shape,
            obs_dtype=jnp.float32,
            action_shape=act_shape,
            action_dtype=jnp.float32,
            discrete=False,
            action_low=-np.ones(act_shape, np.float32),
            action_high=np.ones(act_shape, np.float32),
        )

    def __repr__(self) -> str:
        return (
            f"BraxEnv({self._env_name!r}, num_envs={self._num_envs}, max_length={self._max_length})"
        )

    def _reset_all(self, key: jax.Array, count: int | None = None) -> Any:
        """Fresh resets of ``count`` envs (every env by default)."""
        keys = jax.random.split(key, self._num_envs if count is None else count)
        return jax.vmap(self._reset_one)(keys)

    def reset(self, key: jax.Array) -> tuple[TimedState, jax.Array]:
        """Resets every env; returns ``(state, obs)``."""
        env_state = self._reset_all(key)
        state = self._fresh_state(env_state, env_state)
        return state, env_state.obs.astype(jnp.float32)

    def step(self, state: TimedState, action: jax.Array, key: jax.Array) -> StepResult:
        """Steps every env; finished episodes restart in the same step."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        env_state = jax.vmap(self._env.step)(state.env_state, action)
        terminated = env_state.done.astype(jnp.bool_)
        time, truncated, _ = self._time_limit(state.time, terminated)
        if "truncation" in env_state.info:
            # A wrapped env may cut episodes itself; its truncation is not a termination.
            own_cut = env_state.info["truncation"].astype(jnp.bool_)
            truncated = truncated | own_cut
            terminated = terminated & ~own_cut
        done = terminated | truncated
        final_obs = env_state.obs.astype(jnp.float32)

        fresh = lambda count: self._reset_all(key, count)  # noqa: E731
        next_state = self._restart(done, state, fresh, env_state)
        return StepResult(
            state=state.replace(env_state=next_state, time=jnp.where(done, 0, time)),
            obs=next_state.obs.astype(jnp.float32),
            reward=env_state.reward.astype(jnp.float32),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )

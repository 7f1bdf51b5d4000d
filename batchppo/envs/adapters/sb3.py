"""``BatchVecEnv``: a Stable-Baselines3 ``VecEnv`` over [`BatchEnv`][batchppo.envs.BatchEnv].

SB3's algorithms accept only its own ``VecEnv`` API, so a [`BatchEnv`][batchppo.envs.BatchEnv] (a
Gymnasium ``VectorEnv``) cannot be handed to them directly.
[`BatchVecEnv`][batchppo.envs.adapters.sb3.BatchVecEnv] takes the same list of env functions as
SB3's ``SubprocVecEnv`` and steps the envs in BatchEnv's shared-memory workers, so the swap is one
line:

```python
vec_env = SubprocVecEnv([make_env] * 8)        # before
vec_env = BatchVecEnv([make_env] * 8)          # after
model = PPO("MlpPolicy", vec_env).learn(100_000)
```

SB3's ``VecEnv`` contract, as ``DummyVecEnv`` and ``SubprocVecEnv`` keep it: ``step_wait`` returns
``(obs, rewards, dones, infos)`` with ``dones = terminated | truncated`` and ``infos`` a list of one
dict per env; where an episode ended, the env has already been reset, ``obs`` holds the new
episode's first observation, ``infos[i]`` is the info of the episode's last step with
``"terminal_observation"`` (its last observation) added, and the reset's info goes to
``reset_infos[i]``. Every ``infos[i]`` holds ``"TimeLimit.truncated"`` (truncated and not
terminated). ``reset()`` returns the observations only, applying the seeds of ``seed`` and the
options of ``set_options`` once. BatchEnv's ``SAME_STEP`` autoreset is this contract; its dense
``final_obs`` gives the terminal observations.

Needs the optional extra ``sb3`` (``pip install "batchppo[sb3]"``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector.utils import concatenate, create_empty_array

from batchppo.core.worker_options import WorkerOptions
from batchppo.envs.adapters.indexed import IndexedEnvFn
from batchppo.envs.batch_env import BatchEnv

try:
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnv,
        VecEnvIndices,
        VecEnvObs,
        VecEnvStepReturn,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"batchppo.envs.adapters.sb3 needs stable-baselines3 ({exc}); install it with "
        '`pip install "batchppo[sb3]"`.'
    ) from exc

__all__ = ["BatchVecEnv", "unbatch_infos"]

# The key of the env info where BatchEnv marks an env it restarted after a crash; it belongs
# with the step that reports the truncation, not with the reset.
_RESTARTED = "env_restarted"


def _info_keys(info: dict[str, Any]) -> list[str]:
    """The data keys of a batched info dict: all but the ``_key`` masks of other keys."""
    return [key for key in info if not (key.startswith("_") and key[1:] in info)]


def unbatch_infos(info: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Splits a Gymnasium-batched info dict into one dict per env (SB3's form).

    Env ``i`` gets ``key`` where the mask ``info["_" + key][i]`` is True (every env when a
    key has no mask); nested batched dicts are split the same way. Numeric and bool columns
    give Python scalars (``tolist``), other columns their elements.

    Args:
        info: ``{key: array of num_envs, "_key": bool mask, ...}``, as a vector env returns.
        num_envs: Batch size.

    Returns:
        ``num_envs`` dicts, empty where an env had no info.
    """
    rows: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    if not info:
        return rows
    for key in _info_keys(info):
        value = info[key]
        mask = info.get("_" + key)
        if isinstance(value, dict):
            column: Sequence[Any] = unbatch_infos(value, num_envs)
        elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype != object:
            column = value.tolist()
        else:
            column = value
        for i in range(num_envs):
            if mask is None or mask[i]:
                rows[i][key] = column[i]
    return rows


def _row(tree: Any, i: int) -> Any:
    """Env ``i``'s entry of a batched observation (dicts and tuples of arrays)."""
    if isinstance(tree, dict):
        return {key: _row(value, i) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_row(value, i) for value in tree)
    return tree[i]


class BatchVecEnv(VecEnv):
    """An SB3 ``VecEnv`` whose envs step in [`BatchEnv`][batchppo.envs.BatchEnv]'s shared-memory
    workers.

    A drop-in for ``SubprocVecEnv(env_fns, start_method)``: the same arguments, the same
    ``step``/``reset``/``infos`` contract (see the module docstring), ``seed``,
    ``set_options``, ``get_attr``/``set_attr``/``env_method``/``env_is_wrapped`` with
    ``indices``, ``render`` and ``get_images``. Unlike ``SubprocVecEnv`` (one process per
    env, every step pickled through a pipe), ``K`` envs share a worker and a step moves no
    Python object between processes.

    Differences from ``SubprocVecEnv``, on purpose: rewards are float32 (as in
    ``DummyVecEnv``); ``reset`` while a step is pending raises
    ``gymnasium.error.AlreadyPendingCallError`` (call ``step_wait`` first); when
    ``set_options`` gives different options to different envs, the envs are reset in
    one batch per distinct options, and envs whose options are ``{}`` then get ``{}``
    instead of no options; numeric info values come back as Python scalars (an env's
    ``np.float64`` info is a ``float``: infos are batched in the workers and split again
    here). ``env_fns`` must return ``gymnasium.Env`` instances (SB3's conversion of old
    ``gym`` envs is not applied) whose ``reset`` takes the keyword ``seed``, and
    ``options`` as Gymnasium's does: every reset passes both (``DummyVecEnv`` passes
    ``options`` only once ``set_options`` gave some), but to an env whose ``reset`` takes
    ``seed`` only, ``options`` only when given, as ``SubprocVecEnv`` does; an env whose
    ``reset`` takes no ``seed`` is refused when the workers start.

    Examples:
        >>> import gymnasium
        >>> from stable_baselines3 import PPO
        >>> from batchppo.envs.adapters.sb3 import BatchVecEnv
        >>> vec_env = BatchVecEnv([lambda: gymnasium.make("Pendulum-v1")] * 8)
        >>> model = PPO("MlpPolicy", vec_env, n_steps=64).learn(512)
        >>> vec_env.close()

    Args:
        env_fns: One callable per env returning a new ``gymnasium.Env``.
        start_method: The workers' start method, as in ``SubprocVecEnv``: ``"forkserver"``
            (None, the default) or ``"spawn"``; ``"fork"`` raises a ``ValueError`` (a fork of
            a process running threads can deadlock).
        worker_options: The [`WorkerOptions`][batchppo.envs.WorkerOptions] of the
            ``BatchEnv``, passed as they are (workers, envs per worker, ``step_in_parent``, the
            restart budget ``max_restarts``: an env whose step raises, or whose worker dies, is
            rebuilt and its episode reported as truncated; ``step_timeout``, spinning); None:
            their defaults (a worker per CPU, fail fast).
        daemon: The workers' ``daemon`` flag; False for envs that start processes.

    The other BatchEnv settings are fixed by SB3's contract: ``SAME_STEP`` autoreset, fresh
    observation arrays (``copy=True``), every env's observation space equal to env 0's.

    Raises:
        ValueError: Two env functions returned the same env instance (each must build its
            own), an env's ``reset`` takes no ``seed`` or ``options`` keyword, or a bad
            BatchEnv argument.
    """

    def __init__(
        self,
        env_fns: Iterable[Callable[[], gymnasium.Env]],
        start_method: str | None = None,
        *,
        worker_options: WorkerOptions | None = None,
        daemon: bool = True,
    ):
        env_fns = list(env_fns)
        self.batch_env = BatchEnv(
            [IndexedEnvFn(fn, i) for i, fn in enumerate(env_fns)],
            worker_options,
            context=start_method,
            daemon=daemon,
            autoreset_mode="SameStep",  # SB3's terminal_observation comes from final_obs
        )
        self.closed = False
        try:
            self._check_envs()
            super().__init__(
                len(env_fns),
                self.batch_env.single_observation_space,
                self.batch_env.single_action_space,
            )
        except BaseException:
            self.close()
            raise

    def _check_envs(self) -> None:
        """Each env is its own instance, and its ``reset`` takes ``seed`` and ``options``."""
        seen: dict[tuple[int, int], int] = {}
        for i, (pid, env_id, missing) in enumerate(self._op("describe", None)):
            key = (pid, env_id)
            if key in seen:
                raise ValueError(
                    f"env_fns[{seen[key]}] and env_fns[{i}] returned the same env instance; "
                    "each function must build a new env (e.g. `lambda: gymnasium.make(id)`, "
                    "not `lambda: env`)."
                )
            seen[key] = i
            if "seed" in missing:  # one without `options` gets them only when given
                raise ValueError(
                    f"env_fns[{i}] returned an env whose reset() takes no `seed` argument, "
                    "which BatchVecEnv passes; give it Gymnasium's signature "
                    "`reset(self, *, seed=None, options=None)`."
                )

    # ------------------------------------------------------------------ stepping

    def step_async(self, actions: Any) -> None:
        """Starts stepping every env with ``actions``.

        Args:
            actions: A batch of actions (an array with the envs along axis 0, or a dict or
                tuple of such arrays for Dict/Tuple action spaces), or a list of one action
                per env.
        """
        if isinstance(actions, list):
            space = self.action_space
            actions = concatenate(space, actions, create_empty_array(space, self.num_envs))
        self.batch_env.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        """Waits for the step; resets the envs whose episode ended (see the module docstring).

        Returns:
            ``(obs, rewards, dones, infos)``: rewards float32, dones bool, infos a list of
            dicts.
        """
        obs, reward, terminated, truncated, info = self.batch_env.step_wait()
        final_obs = info.pop("final_obs")
        info.pop("_final_obs")
        final_info = info.pop("final_info", None)
        info.pop("_final_info", None)
        dones = terminated | truncated
        rows = unbatch_infos(info, self.num_envs)
        finals = unbatch_infos(final_info or {}, self.num_envs)
        time_limit = (truncated & ~terminated).tolist()
        infos = []
        for i, done in enumerate(dones.tolist()):
            if done:
                step_info = finals[i]
                if _RESTARTED in rows[i]:
                    step_info[_RESTARTED] = rows[i].pop(_RESTARTED)
                step_info["terminal_observation"] = _row(final_obs, i)
                self.reset_infos[i] = rows[i]
            else:
                step_info = rows[i]
            step_info["TimeLimit.truncated"] = time_limit[i]
            infos.append(step_info)
        return obs, reward, dones, infos

    def reset(self) -> VecEnvObs:
        """Resets every env with the seeds of ``seed`` and options of ``set_options``.

        Both apply to this reset only.

        Returns:
            The first observations.

        Raises:
            ValueError: An env's options hold the key ``"reset_mask"``, which BatchEnv
                reads as Gymnasium's partial-reset mask.
        """
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        groups = self._option_groups()
        if len(groups) == 1:
            obs, info = self.batch_env.reset(seed=seeds, options=groups[0][0] or None)
            self.reset_infos = unbatch_infos(info, self.num_envs)
        else:
            for options, mask in groups:
                obs, info = self.batch_env.reset(
                    seed=seeds, options={**options, "reset_mask": mask}
                )
                rows = unbatch_infos(info, self.num_envs)
                for i in np.flatnonzero(mask):
                    self.reset_infos[i] = rows[i]
        self._reset_seeds()
        self._reset_options()
        return obs

    def _option_groups(self) -> list[tuple[dict[str, Any], np.ndarray]]:
        """The envs' pending options, grouped: ``(options, mask of the envs that get them)``."""
        groups: list[tuple[dict[str, Any], np.ndarray]] = []
        for i, options in enumerate(self._options):
            options = options or {}
            if "reset_mask" in options:
                raise ValueError(
                    f"the options of env {i} hold the key 'reset_mask', which BatchEnv reads "
                    "as Gymnasium's partial-reset mask; rename that option."
                )
            for group_options, mask in groups:
                if group_options == options:
                    mask[i] = True
                    break
            else:
                mask = np.zeros(self.num_envs, bool)
                mask[i] = True
                groups.append((options, mask))
        return groups

    def close(self) -> None:
        """Stops the workers; closing twice is fine."""
        if not self.closed:
            self.batch_env.close()
            self.closed = True

    # ------------------------------------------------------------------ per-env calls

    def _targets(self, indices: VecEnvIndices) -> list[int]:
        num_envs = self.batch_env.num_envs  # also before VecEnv.__init__ has run
        if indices is None:
            return list(range(num_envs))
        return [int(i) % num_envs for i in ([indices] if isinstance(indices, int) else indices)]

    def _op(
        self,
        op: str,
        indices: VecEnvIndices,
        name: Any = None,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> list[Any]:
        """Runs ``op`` on the envs named by ``indices``; their results, in ``indices`` order."""
        targets = self._targets(indices)
        chosen = None if indices is None else frozenset(targets)
        results = self.batch_env.call("batchppo_sb3_op", op, chosen, name, args, kwargs or {})
        return [results[i] for i in targets]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Attribute ``attr_name`` of each env in ``indices`` (through its wrappers)."""
        return self._op("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets attribute ``attr_name`` of each env in ``indices`` (its outermost wrapper)."""
        self._op("set_attr", indices, attr_name, (value,))

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Calls method ``method_name`` of each env in ``indices``; their results."""
        return self._op("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(
        self, wrapper_class: type[gymnasium.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether each env in ``indices`` is wrapped in ``wrapper_class``."""
        return self._op("is_wrapped", indices, wrapper_class)

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Each env's frame (``render_mode="rgb_array"``); Nones and a warning otherwise."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but get_images needs 'rgb_array'.",
                stacklevel=2,
            )
            return [None] * self.num_envs
        return list(self.batch_env.render())

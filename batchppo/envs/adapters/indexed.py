"""Envs that know their index in a batch, for per-index calls (SB3's ``indices``).

[`BatchEnv`][batchppo.envs.BatchEnv] calls a method on every env of the batch; SB3's ``env_method``,
``get_attr``, ``set_attr`` and ``env_is_wrapped`` name a subset of envs.
[`BatchVecEnv`][batchppo.envs.adapters.sb3.BatchVecEnv] builds each env through ``IndexedEnvFn``, so
that one BatchEnv ``call`` reaches only the targets. This module does not import Stable-Baselines3,
so the workers that unpickle these classes do not load it (nor torch).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

import gymnasium

__all__ = ["IndexedEnv", "IndexedEnvFn", "missing_reset_keywords"]


class IndexedEnv(gymnasium.Wrapper):
    """Wraps env ``index`` of a ``BatchVecEnv`` so that SB3's per-index calls reach it.

    BatchEnv calls a method on every env of the batch; SB3's ``env_method``, ``get_attr``,
    ``set_attr`` and ``env_is_wrapped`` name a subset of envs (``indices``). Each env knows
    its index here and acts only when it is among the targets. The wrapper stays off the hot
    path: ``step`` and ``reset`` are the wrapped env's own bound methods.
    """

    def __init__(self, env: gymnasium.Env, index: int):
        super().__init__(env)
        self.batchppo_sb3_index = index
        self.step = env.step  # type: ignore[method-assign]
        self.reset = env.reset  # type: ignore[method-assign]
        if missing_reset_keywords(env) == ["options"]:  # reset(seed) only, as SubprocVecEnv takes
            self.reset = _options_when_given(env.reset)  # type: ignore[method-assign]

    def batchppo_sb3_op(
        self, op: str, targets: frozenset[int] | None, name: Any, args: tuple, kwargs: dict
    ) -> Any:
        """Runs SB3 operation ``op`` on the wrapped env if this env is among ``targets``.

        The operations do what ``DummyVecEnv`` does to each of its envs.

        Returns:
            The operation's result, or None when this env is not a target.
        """
        if targets is not None and self.batchppo_sb3_index not in targets:
            return None
        env = self.env
        if op == "get_attr":
            return env.get_wrapper_attr(name)
        if op == "set_attr":
            setattr(env, name, args[0])
            return None
        if op == "env_method":
            return env.get_wrapper_attr(name)(*args, **kwargs)
        if op == "is_wrapped":
            # SB3's env_util.is_wrapped, without importing SB3 (and torch) in the worker.
            while isinstance(env, gymnasium.Wrapper):
                if isinstance(env, name):
                    return True
                env = env.env
            return False
        if op == "describe":
            return os.getpid(), id(env), missing_reset_keywords(env)
        raise ValueError(f"unknown BatchVecEnv operation {op!r}")


def missing_reset_keywords(env: gymnasium.Env) -> list[str]:
    """Which of ``seed`` and ``options`` the env's ``reset`` cannot take as keywords.

    BatchEnv resets an env with ``reset(seed=..., options=...)``, as Gymnasium's vector envs
    do. An env whose ``reset`` has no such parameter (nor ``**kwargs``), as old ``gym`` envs
    had, would fail there with a ``TypeError``; a ``reset`` whose signature cannot be read
    is taken to accept both.

    Args:
        env: The env (its outermost wrapper: the ``reset`` BatchEnv calls).

    Returns:
        The missing keywords, in the order ``seed``, ``options``; empty when both are taken.
    """
    try:
        parameters = inspect.signature(env.reset).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return []
    return [
        name
        for name in ("seed", "options")
        if name not in parameters or parameters[name].kind is inspect.Parameter.POSITIONAL_ONLY
    ]


def _options_when_given(reset: Callable[..., Any]) -> Callable[..., Any]:
    """A ``reset(seed=None, options=None)`` over an env's ``reset`` that takes ``seed`` only:
    it passes ``options`` only when some are given, as SB3's ``SubprocVecEnv`` does, where the
    env's own ``TypeError`` then says that it takes none."""

    def reset_with_seed(*, seed: int | None = None, options: dict | None = None) -> Any:
        if options is None:
            return reset(seed=seed)
        return reset(seed=seed, options=options)

    return reset_with_seed


class IndexedEnvFn:
    """Builds env ``index`` from the user's function and wraps it in ``IndexedEnv``."""

    def __init__(self, env_fn: Callable[[], gymnasium.Env], index: int):
        self.env_fn = env_fn
        self.index = index

    def __call__(self) -> gymnasium.Env:
        return IndexedEnv(self.env_fn(), self.index)

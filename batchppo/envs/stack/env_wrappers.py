"""Gymnasium wrappers named in a config (``env_wrappers``), applied where each env is built.

A config names them as rl-zoo's ``env_wrapper`` does: a list whose entries are an import path
(``minigrid.wrappers.ImgObsWrapper``, or ``module:name``) or a one-key mapping of a path to
its keyword arguments (``{gymnasium.wrappers.TimeAwareObservation: {flatten: true}}``). Each
is a class or function called as ``wrapper(env, **kwargs)``, innermost first, around the env
as built (its own time limit included) and under batchppo's standard stack, in every worker
process and in the evaluation and video envs alike.

Two built-in names pick the keys of a Dict observation with Gymnasium's
``FilterObservation``: ``{keep_keys: [image, direction]}`` keeps those keys and
``{drop_keys: [mission]}`` keeps the others (a list, or ``{keys: [...]}``).

``wrapper_specs`` checks the entries where a run starts, before anything is made: each
path imports to a callable whose signature takes the env and the keyword arguments; every
problem is one ``ValueError`` line naming the entry and the fix.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import gymnasium
from gymnasium.wrappers import FilterObservation

__all__ = ["WrapperSpec", "apply_wrappers", "drop_keys", "keep_keys", "wrapper_specs"]


def keep_keys(env: gymnasium.Env, keys: Sequence[str]) -> gymnasium.Env:
    """Keeps the keys ``keys`` of a Dict observation (Gymnasium's ``FilterObservation``).

    Raises:
        ValueError: The observation is not a Dict, or a key is not one of its keys.
    """
    names = _dict_keys(env, "keep_keys")
    unknown = [key for key in keys if key not in names]
    if unknown or not keys:
        raise ValueError(
            f"env_wrappers: keep_keys {list(keys)}: the observation's keys are {names}; "
            "keep one or more of them"
        )
    return FilterObservation(env, list(keys))


def drop_keys(env: gymnasium.Env, keys: Sequence[str]) -> gymnasium.Env:
    """Keeps every key of a Dict observation but ``keys`` (Gymnasium's ``FilterObservation``).

    Raises:
        ValueError: The observation is not a Dict, a key is not one of its keys, or no key
            would be left.
    """
    names = _dict_keys(env, "drop_keys")
    unknown = [key for key in keys if key not in names]
    kept = [name for name in names if name not in keys]
    if unknown or not kept:
        raise ValueError(
            f"env_wrappers: drop_keys {list(keys)}: the observation's keys are {names}; drop "
            "some of them and keep at least one"
        )
    return FilterObservation(env, kept)


def _dict_keys(env: gymnasium.Env, name: str) -> list[str]:
    space = env.observation_space
    if not isinstance(space, gymnasium.spaces.Dict):
        raise ValueError(
            f"env_wrappers: {name} needs a Dict observation; this env's is {space}: drop "
            f"{name} from env_wrappers"
        )
    return list(space.spaces)


BUILTIN: dict[str, Callable[..., gymnasium.Env]] = {"keep_keys": keep_keys, "drop_keys": drop_keys}
"""The built-in wrappers by name: their keyword is ``keys``, which a bare list gives."""


@dataclasses.dataclass(frozen=True)
class WrapperSpec:
    """One wrapper of ``env_wrappers``: picklable, resolved where the env is built.

    Attributes:
        path: A built-in name (``BUILTIN``) or an import path (``package.module.Name``
            or ``package.module:Name``).
        kwargs: Its keyword arguments besides the env.
    """

    path: str
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def resolve(self) -> Callable[..., gymnasium.Env]:
        """The class or function the path names.

        Raises:
            ValueError: It does not import, or is not callable.
        """
        if self.path in BUILTIN:
            return BUILTIN[self.path]
        module, _, name = self.path.rpartition(":") if ":" in self.path else _split(self.path)
        try:
            target: Any = importlib.import_module(module)
            for part in name.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError, ValueError) as error:
            raise ValueError(
                f"env_wrappers: cannot import {self.path!r} ({type(error).__name__}: {error}): "
                f"give a wrapper's import path such as 'minigrid.wrappers.ImgObsWrapper' (its "
                f"package installed), or one of {sorted(BUILTIN)}"
            ) from error
        if not callable(target):
            raise ValueError(
                f"env_wrappers: {self.path!r} is a {type(target).__name__}, not a wrapper class "
                "or function called with the env"
            )
        return target

    def check(self) -> None:
        """Resolves the path and binds the env and the keyword arguments to its signature.

        Raises:
            ValueError: One line naming the entry, its signature and the fix.
        """
        target = self.resolve()
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return  # a callable whose signature cannot be read (a builtin): taken as it is
        try:
            signature.bind(None, **self.kwargs)
        except TypeError as error:
            raise ValueError(
                f"env_wrappers: {self.path}{signature} cannot be called with the env and "
                f"{dict(self.kwargs)} ({error}): fix its keyword arguments"
            ) from None

    def apply(self, env: gymnasium.Env) -> gymnasium.Env:
        """``wrapper(env, **kwargs)``."""
        return self.resolve()(env, **self.kwargs)


def _split(path: str) -> tuple[str, str, str]:
    """``package.module.Name`` as ``(package.module, ".", Name)``; refuses a bare name."""
    module, dot, name = path.rpartition(".")
    if not module or not name:
        raise ValueError(
            f"env_wrappers: {path!r} is not an import path: give 'package.module.Name' (or "
            f"'package.module:Name'), or one of {sorted(BUILTIN)}"
        )
    return module, dot, name


def _spec(entry: Any) -> WrapperSpec:
    """One entry of ``env_wrappers`` as a spec (its structure only; nothing imported)."""
    if isinstance(entry, WrapperSpec):
        return entry
    if isinstance(entry, str) and entry:
        return WrapperSpec(entry)
    if isinstance(entry, Mapping) and len(entry) == 1:
        ((path, kwargs),) = entry.items()
        if path in BUILTIN and isinstance(kwargs, (list, tuple)):
            kwargs = {"keys": list(kwargs)}
        if isinstance(path, str) and path and (kwargs is None or isinstance(kwargs, Mapping)):
            return WrapperSpec(path, dict(kwargs or {}))
    raise ValueError(
        f"env_wrappers: entry {entry!r}: give an import path ('minigrid.wrappers.ImgObsWrapper')"
        " or a one-key mapping of a path to its keyword arguments ({path: {name: value}}; "
        "{keep_keys: [key, ...]} and {drop_keys: [key, ...]} for Dict observations)"
    )


def wrapper_specs(entries: Iterable[Any] | None, check: bool = False) -> tuple[WrapperSpec, ...]:
    """The specs of a config's ``env_wrappers``, innermost first.

    Args:
        entries: Import paths, one-key mappings ``{path: kwargs}`` or specs; None: none.
        check: Also import each path and bind its keyword arguments (``WrapperSpec.check``).

    Raises:
        ValueError: One line naming the entry and the fix.
    """
    if entries is None:
        return ()
    if isinstance(entries, (str, Mapping)):
        entries = [entries]
    specs = tuple(_spec(entry) for entry in entries)
    if check:
        for spec in specs:
            spec.check()
    return specs


def apply_wrappers(env: gymnasium.Env, specs: Sequence[WrapperSpec]) -> gymnasium.Env:
    """``env`` inside ``specs``' wrappers, the first innermost."""
    for spec in specs:
        env = spec.apply(env)
    return env

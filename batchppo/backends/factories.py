"""Pure-JAX envs of any library by ``module:factory``: the env id rule the fused backends share.

An env id ``"module:factory"`` names a callable of an importable module; it is called with the
run's ``env_kwargs`` and returns an env object. Which fused backend runs it follows from the
object's API, which each backend's record reads (``Backend.detect``;
[`factory_backend`][batchppo.backends.factory_backend] asks them in turn); the built-ins take:

* gymnax's (``reset_env``, ``step_env`` and ``default_params``, as every
  ``gymnax.environments.environment.Environment``; Craftax's envs share it), or a tuple
  ``(env, params)`` as ``gymnax.make`` returns: the ``gymnax`` backend
  ([`GymnaxEnv`][batchppo.backends.GymnaxEnv]).
* Brax's (``reset(rng)`` and ``step(state, action)`` returning a state with ``obs``,
  ``reward`` and ``done``, plus ``action_size`` and ``observation_size``; MuJoCo Playground's
  ``MjxEnv`` has the same methods): the ``brax`` backend ([`BraxEnv`][batchppo.backends.BraxEnv]).
* Jumanji's (``reset(key)`` and ``step(state, action)`` returning ``(state, timestep)``, and
  ``observation_spec`` and ``action_spec`` as spec objects, not methods as dm_env's), as every
  ``jumanji.Environment``: the ``jumanji`` backend ([`JumanjiEnv`][batchppo.backends.JumanjiEnv]).

Anything else (a ``gymnasium.Env``) is for the host backends, which resolve such ids
themselves (``batchppo.envs.make.env_source``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from batchppo.core.backends import factory_backend
from batchppo.core.wording import import_env_module, unknown_id_message

__all__ = [
    "call_factory",
    "check_registered_id",
    "expect_api",
    "is_factory_id",
    "resolve_factory",
]


def is_factory_id(env_id: str) -> bool:
    """Whether ``env_id`` has the ``module:factory`` form."""
    return isinstance(env_id, str) and ":" in env_id


def resolve_factory(env_id: str) -> Callable[..., Any]:
    """The callable an env id ``"module:factory"`` names, imported (the factory is not called);
    a script's ``"__main__:factory"`` is ``batchppo.envs.env_ids.script_factory``'s.

    Raises:
        ValueError: One line naming the problem and the fix: a module that cannot be imported,
            a name it lacks, or a name that is not callable.
    """
    module_name, _, name = env_id.partition(":")
    if not module_name or not name:
        raise ValueError(f"env {env_id!r}: give 'module:factory' (a callable of the module)")
    if module_name == "__main__":
        # A script's own factory: the script's, or the one its run dir recorded by value.
        from batchppo.envs.env_ids import script_factory

        return script_factory(env_id)
    target: Any = import_env_module(env_id, module_name)
    for part in name.split("."):
        if not hasattr(target, part):
            raise ValueError(f"env {env_id!r}: {module_name} has no {name!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(
            f"env {env_id!r}: {module_name}.{name} is a {type(target).__name__}, not a callable "
            "that returns an env"
        )
    return target


def check_registered_id(
    env_id: str, what: str, registered: Callable[[], Iterable[str]], tested: Sequence[str]
) -> None:
    """Raises a one-line ``ValueError`` when ``env_id`` is neither a ``module:factory`` that
    resolves (``resolve_factory``; the factory is not called) nor one of a library's ids: the
    id check of the fused backends whose library keeps a registry (gymnax, Jumanji).

    Args:
        env_id: The id to check.
        what: The kind of id, as the message names it (``"gymnax env id"``).
        registered: The library's ids, in the order the message lists them; called (importing
            the library) only for an id that is not a factory's.
        tested: The ids batchppo's tests train on, listed after them.
    """
    if is_factory_id(env_id):
        resolve_factory(env_id)
        return
    known = list(registered())
    if env_id not in known:
        where = f"Valid ids: {', '.join(known)} (tested with batchppo: {', '.join(tested)})"
        raise ValueError(unknown_id_message(what, env_id, known, where))


def call_factory(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> Any:
    """The env that the factory ``env_id`` returns when called with ``env_kwargs``.

    Raises:
        ValueError: The id does not resolve (``resolve_factory``), or the call raised.
    """
    factory = resolve_factory(env_id)
    try:
        return factory(**dict(env_kwargs or {}))
    except Exception as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"env {env_id!r}: calling it with env_kwargs {dict(env_kwargs or {})} raised "
            f"{type(error).__name__}: {first}"
        ) from error


def expect_api(env_id: str, product: Any, api: str) -> None:
    """Raises a one-line ``ValueError`` unless backend ``api`` runs ``product``
    (``factory_backend``)."""
    found = factory_backend(product)
    if found != api:
        has = f"{found}'s API" if found else f"a {type(product).__name__}"
        raise ValueError(
            f"env {env_id!r}: the {api} backend runs envs with {api}'s API, and the factory "
            f"returned {has}; set backend={found or 'process'} (or leave the config out: "
            "`batchppo train --env` picks the backend from the env)"
        )

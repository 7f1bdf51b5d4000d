"""Env ids: what an id names, how one raw env of it is built, and the start-up probe.

An id is a registered Gymnasium id, ``"module:EnvId"`` (the module registers it) or
``"module:factory"`` (a callable returning a ``gymnasium.Env``); ``env_source`` resolves it once,
in the calling process, into a picklable ``EnvSource`` that the workers build their envs from. A
raw env is the env as built (its own time limit), or the env a preprocessing builds
(``"atari"``), inside a config's ``env_wrappers``, without the standard stack
(``batchppo.envs.stack.standard_stack``). ``probe_env`` builds one env of an id with the stack,
resets it and closes it: the check a run makes before anything else, each problem one line naming
its fix. [`make`][batchppo.envs.make.make] re-exports these names.

A class or function of a script run as a file (``python train.py``, ``python -c``, a notebook)
is ``"__main__:name"``: no other process can import it by that name, so it travels by value.
``env_source`` puts the callable itself in the ``EnvSource``, which reaches the workers with
cloudpickle (by value, as for anything of ``__main__``); a run dir records it with cloudpickle
(``env.pkl``), and a process that loads the run (``batchppo train --resume``, ``evaluate``,
``visualize``) holds it again with ``hold_script_factory`` (``script_factory``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import gymnasium
from gymnasium.wrappers import TimeLimit

from batchppo.core.values import optional_positive_int
from batchppo.core.wording import did_you_mean, first_line, import_env_module, unknown_id_message
from batchppo.envs.mujoco_log import route_mujoco_warnings
from batchppo.envs.stack.atari import PREPROCESSING, import_ale
from batchppo.envs.stack.env_wrappers import apply_wrappers, wrapper_specs
from batchppo.envs.stack.standard_stack import StandardStack

__all__ = [
    "EnvProbe",
    "EnvSource",
    "Preprocessing",
    "check_env_id",
    "env_source",
    "factory_env_id",
    "preprocessing",
    "probe_env",
]

# Id namespaces whose envs register when a package is imported: imported on first use, as
# "module:id" would be.
_NAMESPACE_IMPORTS = {"ALE": import_ale}


@runtime_checkable
class Preprocessing(Protocol):
    """A preprocessing that builds each raw env of ``make`` (e.g.
    [`AtariStack`][batchppo.envs.AtariStack]): it runs where the env lives, under the standard
    stack. It travels to the workers with cloudpickle."""

    def check(self, env_id: str, max_length: int | None, env_kwargs: Mapping[str, Any]) -> None:
        """Raises ValueError for an id, a time limit or keywords it cannot take."""
        ...

    def make(
        self, env_id: str, render_mode: str | None, env_kwargs: Mapping[str, Any]
    ) -> gymnasium.Env:
        """Builds one env with the preprocessing."""
        ...


def preprocessing(value: str | Mapping[str, Any] | Preprocessing | None) -> Preprocessing | None:
    """The preprocessing ``make(preprocess=value)`` applies.

    Args:
        value: None (none), a name (``"atari"``: [`AtariStack`][batchppo.envs.AtariStack] with its
            defaults), a mapping ``{"name": "atari", **settings}`` (the form a config's
            ``env_kwargs`` can hold) or a ``Preprocessing`` object.

    Raises:
        ValueError: An unknown name, a mapping without ``name``, or bad settings.
    """
    if value is None or isinstance(value, Preprocessing):
        return value
    given, settings = value, {}
    if isinstance(value, Mapping):
        settings = dict(value)
        value = settings.pop("name", None)
    if not isinstance(value, str) or value not in PREPROCESSING:
        raise ValueError(
            f"preprocess must be None, one of {sorted(PREPROCESSING)}, a mapping "
            f"{{'name': NAME, **settings}} or a Preprocessing object; got {given!r}."
        )
    try:
        return PREPROCESSING[value](**settings)
    except TypeError as exc:
        raise ValueError(f"preprocess={value!r}: {exc}.") from None


# --- Env ids: the one home of the rule -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EnvSource:
    """What an env id names, resolved: a registered id or a factory (see
    [`env_source`][batchppo.envs.make.env_source]).

    Picklable, so a batch env's workers build their envs from it.

    Attributes:
        env_id: The id as given.
        factory: ``"module:name"`` of a callable that returns a ``gymnasium.Env``; None for a
            registered id (built by ``gymnasium.make(env_id)``).
        path: The ``sys.path`` entry the id's module was imported from in the resolving
            process (None without a module): a worker process adds it before importing.
        value: The factory itself, for a script's ``"__main__:name"`` (``script_factory``),
            which no worker could import by name: it travels by value. None otherwise.
    """

    env_id: str
    factory: str | None = None
    path: str | None = None
    value: Callable[..., Any] | None = None

    def build(
        self,
        *,
        max_length: int | None = None,
        render_mode: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> gymnasium.Env:
        """One env, without the standard stack.

        ``render_mode`` reaches the constructor only when given: envs need not accept it
        unless they render. A factory's env gets Gymnasium's ``TimeLimit`` for
        ``max_length``, as ``gymnasium.make`` gives a registered one.

        Raises:
            TypeError: A factory returned something else than a ``gymnasium.Env``.
        """
        kwargs = dict(env_kwargs or {})
        if render_mode is not None:
            kwargs["render_mode"] = render_mode
        if self.path is not None and self.path not in sys.path:
            sys.path.append(self.path)
        if self.factory is None:
            _import_namespace(self.env_id)
            _import_entry_point(self.env_id)
            route_mujoco_warnings()
            return gymnasium.make(self.env_id, max_episode_steps=max_length, **kwargs)
        factory = self.value
        if factory is None:
            factory = _attribute(*self.factory.split(":", 1))
        route_mujoco_warnings()
        env = factory(**kwargs)
        if not isinstance(env, gymnasium.Env):
            raise TypeError(
                f"env {self.env_id!r}: {self.factory} returned {type(env).__name__}, not a "
                "gymnasium.Env: return the env instance"
            )
        return env if max_length is None else TimeLimit(env, max_length)


def _import_namespace(env_id: str) -> None:
    """Imports the package that registers ``env_id``'s namespace (``ALE/``: ``ale_py``) when
    the id is not registered yet, as ``module:EnvId`` would."""
    namespace = env_id.split("/", 1)[0] if "/" in env_id else None
    if namespace in _NAMESPACE_IMPORTS and env_id not in gymnasium.registry:
        _NAMESPACE_IMPORTS[namespace]()


def _import_entry_point(env_id: str) -> None:
    """Imports the module of a registered id's entry point, which ``gymnasium.make`` is about to
    import, so that ``route_mujoco_warnings`` finds the ``mujoco`` it imports before the env
    compiles its model (``batchppo.envs.mujoco_log``)."""
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    spec = gymnasium.registry.get(name)
    if spec is not None and isinstance(spec.entry_point, str):
        importlib.import_module(spec.entry_point.partition(":")[0])


def _attribute(module: str, qualname: str) -> Any:
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _import_root(module: Any, name: str) -> str | None:
    """The ``sys.path`` entry that ``module`` (imported as ``name``) was found under."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    depth = name.count(".") + (2 if path.stem == "__init__" else 1)
    return str(path.parents[depth - 1])


def _unknown_id(env_id: str) -> ValueError:
    return ValueError(
        unknown_id_message(
            "Gymnasium env id",
            env_id,
            gymnasium.registry,
            "See `gymnasium.pprint_registry()` for the valid ids; an id that a module registers is "
            "given as 'module:EnvId', and an unregistered env as 'module:factory'",
        )
    )


def env_source(env_id: str) -> EnvSource:
    """Resolves an env id; raises a one-line ``ValueError`` naming the problem and the fix.

    An id is one of:

    * a registered Gymnasium id, ``"Pendulum-v1"``;
    * ``"module:EnvId"``: ``module`` is imported first (it registers ``EnvId``), as
      ``gymnasium.make`` does;
    * ``"module:factory"``: a callable of ``module`` (a function, or a ``gymnasium.Env``
      class) that returns a ``gymnasium.Env``, for envs that are not registered; it is called
      with ``env_kwargs``.

    The module is imported here, in the calling process; ``batchppo train`` makes the
    working directory importable first, as ``python -m`` does.

    Raises:
        ValueError: An unknown id, a module that cannot be imported, a name that is neither
            a registered id nor a callable of the module.
    """
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env {env_id!r}: give an env id string (e.g. 'Pendulum-v1')")
    if is_script_env_id(env_id):
        return EnvSource(env_id, factory=env_id, value=script_factory(env_id))
    if ":" not in env_id:
        _import_namespace(env_id)
        if env_id in gymnasium.registry:
            return EnvSource(env_id)
        raise _unknown_id(env_id)
    module_name, _, name = env_id.partition(":")
    module = import_env_module(env_id, module_name)
    path = _import_root(module, module_name)
    if name in gymnasium.registry:
        return EnvSource(env_id, path=path)
    try:
        value = _attribute(module_name, name)
    except AttributeError:
        known = [k for k in gymnasium.registry if gymnasium.registry[k].namespace is None]
        choices = [*dir(module), *known]
        raise ValueError(
            f"env {env_id!r}: {name!r} is neither an env id that {module_name} registers nor "
            f"a name in {module_name}.{did_you_mean(name, choices)} Give 'module:EnvId' or "
            "'module:factory'"
        ) from None
    if not callable(value):
        raise ValueError(
            f"env {env_id!r}: {module_name}.{name} is a {type(value).__name__}, not a callable "
            "that returns a gymnasium.Env"
        )
    return EnvSource(env_id, factory=f"{module_name}:{name}", path=path)


def check_env_id(env_id: str) -> None:
    """Raises a one-line ``ValueError`` when ``env_id`` names no env (see
    [`env_source`][batchppo.envs.make.env_source]).

    The one check of Gymnasium env ids: the host backends' record
    ([`batchppo.backends.host.check_gymnasium_id`][batchppo.backends.check_gymnasium_id]) calls it
    too.
    """
    env_source(env_id)


def factory_env_id(factory: Callable[..., Any]) -> str:
    """The env id ``"module:qualname"`` of an env factory, for a run's ``config.yaml``.

    A run records its env as a string that a resume (or ``batchppo evaluate``) resolves again:
    a function or class at the top level of an importable module is recorded by name; one of a
    script run as a file (``python train.py``) as ``"__main__:name"``, which travels by value
    (``script_factory``; a run dir records it in ``env.pkl``). A factory of a script run as
    ``python -m pkg.script`` is recorded under ``pkg.script``.

    Raises:
        ValueError: A factory that cannot be found again by name (a lambda, a nested function,
            a ``functools.partial``).
    """
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if module == SCRIPT_MODULE:
        spec = getattr(sys.modules.get(SCRIPT_MODULE), "__spec__", None)
        module = spec.name if spec is not None else SCRIPT_MODULE
    shown = qualname or repr(factory)
    fix = (
        "define it at the top level of your script or of a module (e.g. myenvs.py) and pass "
        "it, or pass 'module:name'; the factory's arguments go in env_kwargs"
    )
    if not module or not qualname or "<" in qualname:
        raise ValueError(
            f"env factory {shown}: cannot be recorded in the run's config.yaml (a lambda, a "
            f"nested function or a partial has no name to find it by): {fix}"
        )
    try:
        found = _attribute(module, qualname)
    except (ImportError, AttributeError):
        found = None
    if found is not factory:
        raise ValueError(
            f"env factory {shown}: {module}:{qualname} does not import back to it: {fix}"
        )
    return f"{module}:{qualname}"


# --- A script's own envs: by value ------------------------------------------------------------

SCRIPT_MODULE = "__main__"
"""The module of a script run as a file: its env ids are ``"__main__:name"``."""

_RECORDED: dict[str, Callable[..., Any]] = {}


def is_script_env_id(env_id: str) -> bool:
    """Whether ``env_id`` names a callable of a script run as a file (``"__main__:name"``)."""
    return isinstance(env_id, str) and env_id.startswith(f"{SCRIPT_MODULE}:")


def _runs_a_script() -> bool:
    """Whether this process runs a script as a file (``python train.py``, ``python -c``, a
    console script such as ``batchppo``); not ``python -m``, whose ``__main__`` has a spec."""
    main = sys.modules.get(SCRIPT_MODULE)
    return main is not None and getattr(main, "__spec__", None) is None


def script_factory(env_id: str) -> Callable[..., Any]:
    """The callable a script's id ``"__main__:name"`` names: the script's own while this
    process runs a script that defines ``name``, else the one a run dir recorded
    (``hold_script_factory``).

    Raises:
        ValueError: One line: neither is here (the id came without the script or its run dir).
    """
    name = env_id.partition(":")[2]
    if _runs_a_script():
        try:
            found = _attribute(SCRIPT_MODULE, name)
        except AttributeError:
            found = None
        # Defined by the script, not imported into it (a console script's ``main``).
        if callable(found) and getattr(found, "__module__", None) == SCRIPT_MODULE:
            return found
    if env_id in _RECORDED:
        return _RECORDED[env_id]
    raise ValueError(
        f"env {env_id!r}: {name} of a script run as a file, which this process does not run "
        "and no run dir recorded here: train it from that script, or resume, evaluate or "
        "visualize its run dir (which holds it by value in env.pkl)"
    )


def hold_script_factory(env_id: str, factory: Callable[..., Any]) -> None:
    """Holds ``factory``, loaded by value from a run dir, as what ``env_id`` (``"__main__:name"``)
    names in this process where the script itself does not define it (``script_factory``)."""
    _RECORDED[env_id] = factory


def _raised_at(error: BaseException) -> str:
    """Where ``error`` was raised: `` at FILE:LINE (`EXPRESSION`)`` of its last frame, the
    file shortened to its path under ``site-packages/`` or the working directory; empty
    without a traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    path = last.filename.rpartition("site-packages/")[2]
    cwd = os.getcwd() + os.sep
    if path.startswith(cwd):
        path = path[len(cwd) :]
    source = f" (`{last.line.strip()}`)" if last.line else ""
    return f" at {path}:{last.lineno}{source}"


# --- Start-up checks -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EnvProbe:
    """One env of an id, built and closed to check it before a run starts.

    Attributes:
        observation_space: Its observation space under the standard stack.
        action_space: Its action space under the standard stack.
        time_limit: Its own episode step limit (registry or ``TimeLimit``), None without one.
    """

    observation_space: gymnasium.Space
    action_space: gymnasium.Space
    time_limit: int | None


def _time_limit(env: gymnasium.Env) -> int | None:
    layer: Any = env
    while True:
        if isinstance(layer, TimeLimit):
            return int(layer._max_episode_steps)
        if not isinstance(layer, gymnasium.Wrapper):
            spec = getattr(layer, "spec", None)
            return getattr(spec, "max_episode_steps", None)
        layer = layer.env


def probe_env(
    env_id: str,
    *,
    normalize_ranges: bool = True,
    env_kwargs: Mapping[str, Any] | None = None,
    wrappers: Iterable[Any] = (),
) -> EnvProbe:
    """Builds one env of ``env_id`` (its own time limit, ``wrappers``, the standard stack),
    reads its spaces, resets it once (seed 0) and closes it: the start-up check of a run,
    before anything else is made. The run's batch env is not reset before the learner's first
    reset, so this is where an env whose reset raises stops a run from starting.

    ``wrappers`` are a config's ``env_wrappers``
    (``batchppo.envs.stack.env_wrappers.wrapper_specs``: their paths imported and their keyword
    arguments bound before the env is built).

    Raises:
        ValueError: One line naming the problem and its fix: the id
            ([`env_source`][batchppo.envs.make.env_source]), the constructor (keyword arguments it
            does not take, arguments it lacks, its own exception), a factory that returns no
            ``gymnasium.Env``, a missing optional package, a reset that raises. The original
            exception is the ``__cause__``.
    """
    source = env_source(env_id)
    specs = wrapper_specs(wrappers, check=True)
    kwargs = dict(env_kwargs or {})
    pre = preprocessing(kwargs.pop("preprocess", None))
    if pre is not None:
        pre.check(env_id, None, kwargs)
    try:
        raw = _raw_env_fn(source, None, None, kwargs, pre)()
    except gymnasium.error.DependencyNotInstalled as error:
        raise ValueError(f"cannot build {env_id!r}: {first_line(error)}") from error
    except TypeError as error:
        raise ValueError(_constructor_type_error(env_id, kwargs, error)) from error
    except Exception as error:
        raise ValueError(
            f"env {env_id!r}: its constructor raised {first_line(error)}{_raised_at(error)}; "
            "fix the env (or env_kwargs)"
        ) from error
    try:
        raw = apply_wrappers(raw, specs)
    except Exception as error:
        with contextlib.suppress(Exception):
            raw.close()
        if str(error).startswith("env_wrappers:"):  # keep_keys or drop_keys: the fix named
            raise ValueError(f"env {env_id!r}: {error}") from error
        raise ValueError(
            f"env {env_id!r}: a wrapper of env_wrappers raised {first_line(error)}"
            f"{_raised_at(error)}; fix env_wrappers"
        ) from error
    try:
        try:
            limit = _time_limit(raw)
            env = StandardStack(env_id, normalize_ranges).wrap(raw)
        except Exception as error:
            raise ValueError(
                f"env {env_id!r}: its spaces are not supported: {first_line(error)}"
            ) from error
        _check_reset(env, env_id)
        return EnvProbe(env.observation_space, env.action_space, limit)
    finally:
        # A failing close says nothing about the run: not the error raised.
        with contextlib.suppress(Exception):
            raw.close()


def _check_reset(env: gymnasium.Env, env_id: str) -> None:
    """Resets the probe's ``env`` once; a one-line ValueError when its reset raises."""
    try:
        env.reset(seed=0)
    except Exception as error:
        raise ValueError(
            f"env {env_id!r}: its reset raised {first_line(error)}{_raised_at(error)}; fix "
            "the env (or env_kwargs)"
        ) from error


def _constructor_type_error(env_id: str, kwargs: Mapping[str, Any], error: TypeError) -> str:
    text = str(error)
    if str(error).startswith(f"env {env_id!r}:"):  # a factory that returned no env
        return text
    if "unexpected keyword argument" in text:
        return (
            f"env {env_id!r}: its constructor does not take an argument of env_kwargs "
            f"{kwargs} ({first_line(error)}): fix env_kwargs (--set 'env_kwargs={{...}}')"
        )
    if "missing" in text and "required" in text:
        return (
            f"env {env_id!r}: its constructor needs arguments that env_kwargs {kwargs} does not "
            f"give ({first_line(error)}): set them, e.g. --set 'env_kwargs={{name: value}}'"
        )
    return (
        f"env {env_id!r}: its constructor raised {first_line(error)}{_raised_at(error)}; fix "
        "the env or env_kwargs"
    )


def checked_raw_env_fn(
    env_id: str,
    max_length: int | None,
    render_mode: str | None,
    preprocess: str | Mapping[str, Any] | Preprocessing | None,
    wrappers: Iterable[Any],
    env_kwargs: dict[str, Any],
) -> Callable[[], gymnasium.Env]:
    """``_raw_env_fn`` of ``env_id`` once the id, the time limit and the preprocessing are
    checked (one-line ``ValueError``s, before any env is built)."""
    source = env_source(env_id)
    max_length = optional_positive_int("max_length", max_length, "the env's own")
    pre = preprocessing(preprocess)
    if pre is not None:
        pre.check(env_id, max_length, env_kwargs)
    return _raw_env_fn(source, max_length, render_mode, env_kwargs, pre, wrappers)


def _raw_env_fn(
    source: EnvSource,
    max_length: int | None,
    render_mode: str | None,
    env_kwargs: dict[str, Any],
    pre: Preprocessing | None = None,
    wrappers: Iterable[Any] = (),
) -> Callable[[], gymnasium.Env]:
    """A function that builds one env without the stack (``gymnasium.make``'s own layers, or
    the preprocessing's env), inside the config's ``wrappers``."""
    specs = wrapper_specs(wrappers)

    def raw_fn() -> gymnasium.Env:
        if pre is not None:
            env = pre.make(source.env_id, render_mode, env_kwargs)
        else:
            env = source.build(
                max_length=max_length, render_mode=render_mode, env_kwargs=env_kwargs
            )
        return apply_wrappers(env, specs)

    return raw_fn

"""``make``: a batch of Gymnasium envs with the standard wrapper stack.

The stack of one env, innermost first:

1. ``gymnasium.make(env_id, max_episode_steps=max_length, ...)`` (Gymnasium's ``TimeLimit``), or,
   with ``preprocess=``, the env that preprocessing builds (``"atari"``: ``batchppo.envs.atari``);
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

[`make_env_fn`][batchppo.envs.make_env_fn] builds this stack around each env.
[`make`][batchppo.envs.make.make] builds the envs without layers 2-4 and has the batch env apply
them to all the envs of a worker at once, as array operations (a
[`BatchTransform`][batchppo.envs.BatchTransform] read off the same stack), with bitwise the same
results; only envs whose spaces it does not cover (Dict or Tuple spaces, integer observations,
``MultiDiscrete`` actions) and the ``"ray"`` backend get the per-env stack.
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
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import ClipAction, TimeLimit

from batchppo.backends import BACKENDS, check_restarts, get_backend
from batchppo.backends.factories import first_line, import_env_module
from batchppo.core.wording import did_you_mean, unknown_id_message
from batchppo.envs.atari import PREPROCESSING, import_ale
from batchppo.envs.batch_env import BatchEnv
from batchppo.envs.batch_transform import BatchTransform, SpacesOnly
from batchppo.envs.env_wrappers import apply_wrappers, wrapper_specs
from batchppo.envs.worker_options import WorkerOptions
from batchppo.envs.wrappers import ConvertTo32Bit, RangeNormalize

__all__ = [
    "BatchEnvFactory",
    "EnvProbe",
    "EnvSource",
    "Preprocessing",
    "StandardStack",
    "batch_env_of",
    "batch_transform",
    "check_env_id",
    "env_source",
    "factory_env_id",
    "in_process_batch_env",
    "make",
    "make_env_fn",
    "preprocessing",
    "probe_env",
    "ray_batch_env",
    "register_vector_env",
    "vector_entry_point",
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
    """

    env_id: str
    factory: str | None = None
    path: str | None = None

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
            return gymnasium.make(self.env_id, max_episode_steps=max_length, **kwargs)
        env = _attribute(*self.factory.split(":", 1))(**kwargs)
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

    A run records its env as a string that a resume (or ``batchppo evaluate``) imports
    again, so the factory must be reachable by name: a function or class at the top level of
    an importable module. A factory of a script run as ``python -m pkg.script`` is recorded
    under ``pkg.script``.

    Raises:
        ValueError: A factory that cannot be imported again by name (a lambda, a nested
            function, a ``functools.partial``, a function of a script run as a file).
    """
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else None
    shown = qualname or repr(factory)
    fix = (
        "define it at the top level of a module (e.g. myenvs.py) and pass it, or pass "
        "'module:name'; the factory's arguments go in env_kwargs"
    )
    if not module or not qualname or "<" in qualname:
        raise ValueError(
            f"env factory {shown}: cannot be recorded in the run's config.yaml (a lambda, a "
            f"nested function, a partial or a function of a script run as a file cannot be "
            f"imported again): {fix}"
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

    ``wrappers`` are a config's ``env_wrappers`` (``batchppo.envs.env_wrappers.wrapper_specs``:
    their paths imported and their keyword arguments bound before the env is built).

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


def make_env_fn(
    env_id: str,
    *,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    preprocess: str | Mapping[str, Any] | Preprocessing | None = None,
    wrappers: Iterable[Any] = (),
    **env_kwargs: Any,
) -> Callable[[], gymnasium.Env]:
    """A function that builds ONE env with the standard wrapper stack (see module docstring).

    Args:
        env_id: A Gymnasium id, ``"module:EnvId"`` or ``"module:factory"`` (see
            [`env_source`][batchppo.envs.make.env_source]).
        max_length: Episode step limit (Gymnasium ``TimeLimit``); None keeps the env's own.
        normalize_ranges: Apply [`RangeNormalize`][batchppo.envs.RangeNormalize] (finite bounds to
            ``[-1, 1]``).
        render_mode: Passed to the env's constructor when given (e.g. ``"rgb_array"`` for
            videos); None passes nothing, since envs need not take it unless they render.
        preprocess: What builds each env in place of ``gymnasium.make`` (see
            ``preprocessing``): ``"atari"`` for the standard Atari preprocessing.
        wrappers: Gymnasium wrappers around each env, under the standard stack: import
            paths or ``{path: kwargs}`` mappings, innermost first (a config's
            ``env_wrappers``; ``batchppo.envs.env_wrappers``).
        **env_kwargs: Passed to ``gymnasium.make`` (or the factory).

    Returns:
        A picklable zero-argument callable returning the wrapped env.

    Raises:
        ValueError: Unknown ``env_id`` (with suggestions), a bad ``max_length`` or a
            preprocessing that does not take this id, limit or keywords.
    """
    raw_fn = _checked_raw_env_fn(env_id, max_length, render_mode, preprocess, wrappers, env_kwargs)
    return _stacked(raw_fn, StandardStack(env_id, normalize_ranges))


def _checked_raw_env_fn(
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
    if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"max_length must be a positive int or None; got {max_length!r}.")
    pre = preprocessing(preprocess)
    if pre is not None:
        pre.check(env_id, max_length, env_kwargs)
    return _raw_env_fn(source, max_length, render_mode, env_kwargs, pre, wrappers)


def _stacked(
    raw_fn: Callable[[], gymnasium.Env], stack: StandardStack
) -> Callable[[], gymnasium.Env]:
    """A function that builds ``raw_fn``'s env inside ``stack``'s per-env wrappers."""

    def env_fn() -> gymnasium.Env:
        return stack.wrap(raw_fn())

    return env_fn


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
        [`batch_transform`][batchppo.envs.make.batch_transform])."""
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


class BatchEnvFactory(Protocol):
    """Builds the batch env of [`make`][batchppo.envs.make.make] (the ``batch_env`` of a host
    backend's record): ``process_batch_env``, ``in_process_batch_env``, ``ray_batch_env``, or
    one's own callable taking these arguments.

    It raises a one-line ``ValueError`` for an argument its batch env cannot honour, before
    any worker starts.
    """

    def __call__(
        self,
        env_fns: list[Callable[[], gymnasium.Env]],
        *,
        num_workers: int | None,
        max_restarts: int,
        transform: StandardStack,
        autoreset_mode: AutoresetMode | str,
        step_timeout: float | None,
        **options: Any,
    ) -> gymnasium.vector.VectorEnv:
        """The batch env of ``env_fns`` (each builds one raw env, without the standard stack,
        which ``transform`` applies: to the batch, or around each env)."""
        ...


def process_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    step_timeout: float | None = None,
    **worker_options: Any,
) -> BatchEnv:
    """The ``process`` backend's batch env: a ``BatchEnv`` whose envs step in worker processes.

    Args:
        env_fns: Each builds one raw env.
        num_workers: Worker processes; None: one per CPU.
        max_restarts: The restart budget (see [`WorkerOptions`][batchppo.envs.WorkerOptions]).
        transform: The standard stack, applied to each worker's envs at once where it can be.
        autoreset_mode: ``BatchEnv``'s autoreset mode.
        step_timeout: Seconds a worker may take to answer; None waits for ever.
        **worker_options: The other fields of ``WorkerOptions`` (``envs_per_worker``,
            ``step_in_parent``, ``spin_us``, ``worker_spin_us``).
    """
    options = WorkerOptions(
        num_workers=num_workers,
        max_restarts=max_restarts,
        step_timeout=step_timeout,
        **worker_options,
    )
    return BatchEnv(env_fns, options, transform=transform, autoreset_mode=autoreset_mode)


def in_process_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    step_timeout: float | None = None,
) -> BatchEnv:
    """The ``sync`` backend's batch env: a ``BatchEnv`` that steps every env in the calling
    process (``num_workers`` is ignored; the other arguments and defaults are ``BatchEnv``'s).

    Raises:
        ValueError: A ``step_timeout``: the calling process cannot bound its own envs.
    """
    del num_workers  # no workers
    if step_timeout is not None:
        raise ValueError(
            f"step_timeout={step_timeout}: the sync backend steps its envs in this process, "
            "which cannot bound them; use backend='process' (worker processes) for a timeout."
        )
    return BatchEnv(
        env_fns,
        WorkerOptions(num_workers=1, step_in_parent=True, max_restarts=max_restarts),
        transform=transform,
        autoreset_mode=autoreset_mode,
    )


def ray_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    step_timeout: float | None = None,
    **options: Any,
) -> gymnasium.vector.VectorEnv:
    """The ``ray`` backend's batch env: a [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv]
    whose actors build each env inside the per-env stack.

    Args:
        env_fns: Each builds one raw env.
        num_workers: Actors; None: the CPUs of the Ray cluster.
        max_restarts: Must be 0: Ray env actors are not restarted.
        transform: The standard stack, applied around each env.
        autoreset_mode: ``SAME_STEP``, the only mode of ``RayBatchEnv``.
        step_timeout: Seconds an actor may take to answer (``RayBatchEnv``).
        **options: ``RayBatchEnv``'s own keyword arguments (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``).

    Raises:
        ValueError: Another autoreset mode, or env restarts asked for.
    """
    mode = AutoresetMode(autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
    if mode is not AutoresetMode.SAME_STEP:
        raise ValueError(
            f"autoreset_mode={autoreset_mode!r}: the ray backend has SAME_STEP only; use "
            "backend='process' or 'sync' for another autoreset mode."
        )
    if max_restarts:
        raise ValueError(
            f"max_restarts={max_restarts}: Ray env actors are not restarted; use "
            "backend='process' or 'sync' for env restarts."
        )
    from batchppo.envs.ray_env import RayBatchEnv

    fns = [_stacked(fn, transform) for fn in env_fns]
    return RayBatchEnv(fns, num_workers=num_workers, step_timeout=step_timeout, **options)


def batch_env_of(backend: str | BatchEnvFactory) -> BatchEnvFactory:
    """The batch env ``make(backend=...)`` builds: a backend's ``batch_env`` by name (the
    registry's ``Backend.batch_env``), or ``backend`` itself.

    Raises:
        ValueError: A name of no backend with a ``batch_env``, or neither a name nor a
            callable.
    """
    if callable(backend):
        return backend
    record = BACKENDS.get(backend) if isinstance(backend, str) else None
    if record is None or record.batch_env is None:
        known = tuple(name for name, b in BACKENDS.items() if b.batch_env is not None)
        raise ValueError(f"backend must be one of {known}; got {backend!r}.")
    return record.batch_env


def _check_named_backend(
    backend: str, ray_options: Mapping[str, Any] | None, max_restarts: int
) -> None:
    """The checks of the record of a backend given by name: its restarts (``check_restarts``)
    and its options (``Backend.options``) for ``ray_options``."""
    if ray_options and get_backend(backend).options is None:
        takers = [n for n, b in BACKENDS.items() if b.batch_env and b.options is not None]
        allowed = " or ".join(f"backend={name!r}" for name in takers)
        raise ValueError(f"ray_options apply to {allowed} only; got backend={backend!r}.")
    check_restarts(backend, max_restarts)


def make(
    env_id: str,
    num_envs: int,
    *,
    seed: int | None = None,
    backend: str | BatchEnvFactory = "process",
    num_workers: int | None = None,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    render_mode: str | None = None,
    ray_options: Mapping[str, Any] | None = None,
    max_restarts: int = 0,
    preprocess: str | Mapping[str, Any] | Preprocessing | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    step_timeout: float | None = None,
    wrappers: Iterable[Any] = (),
    **env_kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """Builds ``num_envs`` envs with the standard wrapper stack as one batch env.

    Examples:
        >>> import numpy as np
        >>> env = make("Pendulum-v1", 16, seed=0, max_length=200)
        >>> actions = np.zeros((16, 1), np.float32)
        >>> obs, reward, terminated, truncated, final_obs = env.step_arrays(actions)
        >>> obs.shape, obs.dtype
        ((16, 3), dtype('float32'))
        >>> env.close()

    Args:
        env_id: A Gymnasium id, ``"module:EnvId"`` or ``"module:factory"`` (see
            [`env_source`][batchppo.envs.make.env_source]).
        num_envs: Number of envs.
        seed: When given, the envs are reset once with ``seed`` (env ``i`` gets ``seed + i``);
            otherwise call ``reset`` yourself before stepping.
        backend: The batch env to build: a callable taking its arguments (a
            ``BatchEnvFactory``: ``process_batch_env``, ``in_process_batch_env``,
            ``ray_batch_env``, or one's own), or the name of a host backend, whose record gives it
            (``Backend.batch_env``): ``"process"`` (``BatchEnv`` with worker processes),
            ``"sync"`` (the same class with every env stepped in the calling process) or
            ``"ray"`` ([`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv], workers as Ray
            actors).
        num_workers: Units stepping envs (``BatchEnv`` semantics); ignored by ``"sync"``.
        max_length: Episode step limit; None keeps the registry's.
        normalize_ranges: Map finite bounds to ``[-1, 1]``.
        render_mode: Passed to ``gymnasium.make``.
        ray_options: The batch env's own keyword arguments: for ``"ray"``, those of
            [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv] (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``).
        max_restarts: ``BatchEnv``'s restart budget (``"process"`` and ``"sync"`` only): how
            many times an env whose step raised, or whose worker died, is rebuilt and its
            episode truncated; 0 fails fast.
        preprocess: What builds each env in the workers in place of ``gymnasium.make``, under the
            standard stack: ``"atari"`` (or ``{"name": "atari", **settings}``, or an
            [`AtariStack`][batchppo.envs.AtariStack]) for the standard Atari preprocessing, uint8
            ``(4, 84, 84)`` frames; see ``preprocessing``.
        step_timeout: ``"process"`` and ``"ray"``: seconds a worker (or actor) may take to answer a
            step, reset or call before [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] (see
            ``BatchEnv``); None waits for ever. ``"sync"`` refuses it: its envs step in the calling
            process, which cannot bound them.
        autoreset_mode: ``BatchEnv``'s autoreset mode: ``SAME_STEP`` (the default here, what
            the learners use, with the dense ``final_obs`` and ``step_arrays``), or Gymnasium's
            ``NEXT_STEP`` (which its observation wrappers such as ``NormalizeObservation``
            need) or ``DISABLED``. The ``"ray"`` backend has ``SAME_STEP`` only.
        wrappers: Gymnasium wrappers around each env, built in the workers (see
            ``make_env_fn``).
        **env_kwargs: Passed to ``gymnasium.make`` (or the factory).

    The ``"process"`` and ``"sync"`` backends apply the wrapper stack to the batch (see the
    module docstring), read off the spaces of the envs the workers build: every env is built
    once, and none in the calling process unless ``backend="sync"``. The ``"ray"`` backend
    builds each env once too, in its actor, in the per-env stack.

    Returns:
        The batch env (``BatchEnv`` or ``RayBatchEnv``), reset if ``seed`` was given.

    Raises:
        ValueError: Unknown id or backend, bad counts, ``ray_options`` with a backend whose
            batch env takes none, ``max_restarts`` with ``"ray"``. Raised before any worker
            starts.
    """
    batch_env = batch_env_of(backend)
    if isinstance(backend, str):
        _check_named_backend(backend, ray_options, max_restarts)
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int; got {num_envs!r}.")
    raw_fn = _checked_raw_env_fn(env_id, max_length, render_mode, preprocess, wrappers, env_kwargs)
    # The batch env reads the raw spaces off its workers' envs and picks the transform (or
    # wraps each env in the stack).
    env = batch_env(
        [raw_fn] * num_envs,
        num_workers=num_workers,
        max_restarts=max_restarts,
        transform=StandardStack(env_id, normalize_ranges),
        autoreset_mode=autoreset_mode,
        step_timeout=step_timeout,
        **(ray_options or {}),
    )
    if seed is not None:
        env.reset(seed=seed)
    return env


# --- gymnasium.make_vec ----------------------------------------------------------------------

VECTOR_NAMESPACE = "batchppo"
"""The Gymnasium namespace of the ids [`register_vector_env`][batchppo.envs.register_vector_env]
registers."""


def register_vector_env(env_id: str, vector_id: str | None = None) -> str:
    """Registers a Gymnasium id whose ``gymnasium.make_vec`` builds
    [`make`][batchppo.envs.make.make]'s batch env.

    Examples:
        >>> vector_id = register_vector_env("CartPole-v1")  # "batchppo/CartPole-v1"
        >>> env = gymnasium.make_vec(vector_id, num_envs=8, num_workers=2)
        >>> env.metadata["autoreset_mode"]
        <AutoresetMode.NEXT_STEP: 'NextStep'>
        >>> env.close()

    The id's ``vector_entry_point`` is ``vector_entry_point``: ``make_vec``'s keyword arguments go
    to [`make`][batchppo.envs.make.make] (``seed``, ``backend``, ``num_workers``,
    ``normalize_ranges``, ``autoreset_mode``, ...) and the others to the env, as
    ``gymnasium.make``'s do. The autoreset mode defaults to Gymnasium's ``NEXT_STEP`` here, so
    Gymnasium's vector wrappers take the env as they take ``make_vec``'s own; pass
    ``autoreset_mode="SameStep"`` for batchppo's. ``max_episode_steps`` is the time limit (the env's
    own by default). Registering an id twice is allowed (the spec is replaced).

    Args:
        env_id: What [`make`][batchppo.envs.make.make] takes (checked here:
            [`env_source`][batchppo.envs.make.env_source]).
        vector_id: The id to register; default ``"batchppo/<env_id>"`` (the part after
            ``module:`` for ``module:name`` ids).

    Returns:
        The registered id.

    Raises:
        ValueError: ``env_id`` names no env.
    """
    env_source(env_id)
    vector_id = vector_id or f"{VECTOR_NAMESPACE}/{env_id.rpartition(':')[2]}"
    gymnasium.registry.pop(vector_id, None)
    gymnasium.register(
        vector_id,
        entry_point=None,
        vector_entry_point=f"{__name__}:vector_entry_point",
        kwargs={"env_id": env_id},
    )
    return vector_id


_MAKE_KEYWORDS = frozenset(
    {
        "seed",
        "backend",
        "num_workers",
        "normalize_ranges",
        "ray_options",
        "max_restarts",
        "preprocess",
        "step_timeout",
    }
)


def vector_entry_point(
    env_id: str,
    num_envs: int = 1,
    *,
    max_episode_steps: int | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    **kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """The ``vector_entry_point`` of [`register_vector_env`][batchppo.envs.register_vector_env]'s
    ids: [`make`][batchppo.envs.make.make].

    Args:
        env_id: The env (the registered spec's ``kwargs``).
        num_envs: ``make_vec``'s ``num_envs``.
        max_episode_steps: The time limit (``make``'s ``max_length``).
        autoreset_mode: As in [`make`][batchppo.envs.make.make]; Gymnasium's ``NEXT_STEP`` by
            default.
        **kwargs: [`make`][batchppo.envs.make.make]'s keywords, and the env's constructor's.
    """
    make_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _MAKE_KEYWORDS}
    return make(
        env_id,
        num_envs,
        max_length=max_episode_steps,
        autoreset_mode=autoreset_mode,
        **make_kwargs,
        **kwargs,
    )

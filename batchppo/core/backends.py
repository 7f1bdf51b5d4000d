"""The registry of env backends: one [`Backend`][batchppo.backends.Backend] record each, in
[`BACKENDS`][batchppo.backends.BACKENDS].

A record holds what every backend has: its name, its ``make``, its checks (``check_env_id``,
``probe``), whether its envs step on the host or fuse with the learner, its restarts and its
``options``. The lists of backend names, checks and branches of the package's lower layers are
derived from these records: ``PPOConfig``'s validation,
[`batchppo.backends.make_env`][batchppo.backends.make_env], the trainer's choice between a fused
(pure-JAX) and a host rollout, the experiment's env checks. What only one consumer needs of a
backend lives with that consumer, in a table keyed by backend name: the backend a trained policy is
loaded with (``batchppo.experiment.artifacts.loading``), the Gymnasium env ``batchppo visualize``
renders (``batchppo.experiment.artifacts.visualize``) and the env mapping ``batchppo export`` folds
into its model (``batchppo.experiment.artifacts.export``), so no backend module points up at the
experiment.

This module is the pure half: records and lookups, importing nothing of a backend (the wording
of its messages is ``batchppo.core.wording``'s). The
backends register themselves: each built-in one is a module of
[`batchppo.backends`][batchppo.backends] that calls [`register`][batchppo.backends.register] when
imported, and importing that package imports them all, so code that reads the registry (configs, the
trainer, the CLI) imports ``batchppo.backends``. A record reaches the heavy code of its backend only
when called, so the registry and the backend modules import nothing heavy: no JAX, Flax, gymnax,
Gymnasium or Ray until a backend is used, and parsing a config stays light.

Adding a backend is one module with its code and its record:
[`register`][batchppo.backends.register] it (from a module of
[`batchppo.backends`][batchppo.backends] for a built-in backend, from anywhere for a plug-in), and
every check and branch takes it up.

A user's package adds backends without any import by its user: an entry point of the group
``batchppo.backends`` (``ENTRY_POINT_GROUP``) names a module whose import registers its records,
or an object that is a record, or a callable returning records (or registering them itself).
``BACKENDS`` is a [`Registry`][batchppo.core.registry.Registry], the type of the package's
registries: it loads the group once, lazily, the first time a lookup misses or the full list of
backends is read (``get_backend``, ``names``, iterating or searching ``BACKENDS``), so
``backend: mybackend`` in a config validates and trains from the command line. An entry point
that fails to load is skipped with a one-line
[`EntryPointWarning`][batchppo.core.registry.EntryPointWarning].

Examples:
    >>> import batchppo.backends  # registers the built-in backends
    >>> get_backend("gymnax").fused
    True
    >>> names(host=True)
    ('process', 'sync', 'ray', 'ale')
"""

from __future__ import annotations

import dataclasses
import importlib.util
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from batchppo.core.registry import Registry
from batchppo.core.values import coerce, is_fixed, type_name
from batchppo.core.wording import did_you_mean, prose

if TYPE_CHECKING:
    from batchppo.core.env import Env

__all__ = [
    "BACKENDS",
    "ENTRY_POINT_GROUP",
    "LEARNED",
    "OPTIONAL_PACKAGES",
    "Backend",
    "FactoryRecipe",
    "MakeEnv",
    "Requirement",
    "factory_backend",
    "factory_package",
    "get_backend",
    "names",
    "register",
    "requirement",
]

ENTRY_POINT_GROUP = "batchppo.backends"
"""The entry-point group through which installed packages add backends."""

LEARNED: Mapping[str, Any] = types.MappingProxyType({"learned": True})
"""The ``metadata`` of an option (``dataclasses.field(default=..., metadata=LEARNED)``) that
changes what a run learns, not only where or how fast its envs run: how finished envs restart,
the physics. A resumed run may not change it, and comparisons of runs count it
([`learned_options`][batchppo.backends.Backend.learned_options])."""


class Requirement(NamedTuple):
    """A package that a backend or an env needs and that may not be installed.

    Attributes:
        module: The module that is checked (found without importing it): ``"mujoco"``.
        name: What ``batchppo list`` says a preset needs: the project's extra
            (``"batchppo[mujoco]"``), or the package where no extra holds it.
        install: The command that installs it.
    """

    module: str
    name: str
    install: str


def _extra(module: str, extra: str) -> Requirement:
    return Requirement(module, f"batchppo[{extra}]", f"pip install 'batchppo[{extra}]'")


OPTIONAL_PACKAGES: Mapping[str, Requirement] = types.MappingProxyType(
    {
        "mujoco": _extra("mujoco", "mujoco"),
        "ale_py": _extra("ale_py", "atari"),
        "brax": _extra("brax", "brax"),
        "jumanji": _extra("jumanji", "jumanji"),
        "ray": _extra("ray", "ray"),
        # In no extra: it requires pygame, whose module the pygame-ce of minigrid and
        # highway-env (the test extra) installs too.
        "craftax": Requirement("craftax", "craftax", "pip install craftax==1.6.1 --no-deps"),
    }
)
"""The optional packages of the backends and the presets' envs, by module, each with the
project's extra that installs it (``pyproject.toml``), or its own install line: the one table
of them, which the backends' records (``requires``, ``env_requires``), ``batchppo list`` and the
start-up check of a run read."""


def requirement(module: str) -> Requirement:
    """The [`Requirement`][batchppo.core.backends.Requirement] of ``module``: its entry in
    ``OPTIONAL_PACKAGES``, or ``pip install <module>`` for any other."""
    return OPTIONAL_PACKAGES.get(module) or Requirement(module, module, f"pip install {module}")


def factory_package(env_id: str) -> str | None:
    """The optional package (``OPTIONAL_PACKAGES``) whose module an env id ``"module:factory"``
    imports (``craftax`` of ``craftax.craftax_env:make_craftax_env_from_name``); None for any
    other id or package (a user's module is not installed, but put on the path)."""
    if not isinstance(env_id, str) or ":" not in env_id:
        return None
    package = env_id.partition(":")[0].split(".")[0]
    return package if package in OPTIONAL_PACKAGES else None


class MakeEnv(Protocol):
    """Builds a backend's batched [`Env`][batchppo.core.Env] (the ``make`` of a record).

    Every argument is passed by [`make_env`][batchppo.backends.make_env]. Where the envs run,
    how many workers step them, how they restart: all of a backend's own settings come in
    ``options``, the one checked object of its ``options`` class, to be handed on as it is;
    the env's constructor gets ``env_kwargs``, untouched.
    """

    def __call__(
        self,
        env_id: str,
        num_envs: int,
        *,
        max_length: int | None,
        normalize_ranges: bool,
        env_kwargs: Mapping[str, Any],
        options: Any,
        **run_options: Any,
    ) -> Env:
        """Returns the env (with a ``close()`` method).

        Args:
            env_id: The env's id, as the backend's ``check_env_id`` takes it.
            num_envs: Batch size.
            max_length: Time limit in steps; None keeps the env's own.
            normalize_ranges: Rescale finite bounds to [-1, 1].
            env_kwargs: The env constructor's keyword arguments.
            options: An instance of the backend's ``options`` class (its defaults where a
                config gave none), checked once where it was made; None for a backend
                without options.
            **run_options: The run-level settings of its ``run_options``, under their keys
                (``wrappers`` for the host backends ``batchppo.envs.make`` builds).
        """
        ...


class FactoryRecipe(NamedTuple):
    """Where a run of a factory's env starts on the backend that runs it, given no config
    (``Backend.recipe``): a preset, with the env, its ``env_kwargs`` and the backend set on
    top, and the changes below.

    Attributes:
        preset: The preset whose hyperparameters the run takes.
        kind: What the env has, for the message (``"gymnax's API, observations (4,),
            Discrete actions"``).
        changes: Fields set on top of the preset (a network that takes the env's spaces).
        own_time_limit: Whether the env ends its episodes itself: ``max_length`` None then,
            else the recipes' limit (``experiment.config.recipes.RECIPE_MAX_LENGTH``).
    """

    preset: str
    kind: str
    changes: Mapping[str, Any] = types.MappingProxyType({})
    own_time_limit: bool = False


@dataclasses.dataclass(frozen=True)
class Backend:
    """What the package knows of one env backend.

    Attributes:
        name: The ``backend`` value of a config.
        make: Builds the batched env (``MakeEnv``).
        check_env_id: Raises a one-line ``ValueError`` (with close matches) for an env id the
            backend does not know; cheap, since it runs before a run dir is made.
        host: True when its envs step on the host, outside the compiled program (through
            ``io_callback`` or the ``host_loop`` rollout); False for pure-JAX envs, which fuse with
            the learner into one program ([`fused`][batchppo.backends.Backend.fused]).
        description: What steps the envs, for messages (``"Ray env actors"``).
        title: Its name in prose (``"Brax"``); the name by default.
        options: The backend's own settings, the keys a config's ``backend_options`` may
            give: a frozen dataclass whose fields are their names, types (``str``, ``int``,
            ``float``, ``bool``, unions of them with None), defaults and docs, and whose
            ``__post_init__`` checks their values (a one-line ``ValueError``). A field whose
            ``metadata`` is ``LEARNED`` changes what a run learns; one declared with
            ``batchppo.core.values.fixed`` is held at its default, and no key of a config.
            A config's mapping is parsed into it once
            ([`check_options`][batchppo.backends.Backend.check_options]), and ``make`` gets
            that object. None: the backend takes none, and a config giving any is refused.
        run_options: The run-level env settings ``make`` also gets, as keywords, which a
            family of backends shares: config field -> keyword (the host backends that
            ``batchppo.envs.make`` builds: ``{"env_wrappers": "wrappers"}``); empty: none.
        requires: A module the backend needs that may be missing (an optional extra).
        install: How to install ``requires``; by default its ``requirement``'s (the project's
            extra, from ``OPTIONAL_PACKAGES``).
        env_requires: ``env_requires(env_id)``: the module an env id needs besides
            ``requires`` (a MuJoCo id of the host backends: ``mujoco``), or None; checked
            without importing it ([`missing`][batchppo.backends.Backend.missing]). None: only
            ``requires``.
        probe: ``probe(env_id, *, normalize_ranges, env_kwargs)``: builds one env and closes
            it, returning its spaces (an ``EnvProbe``) or raising a one-line ``ValueError``
            (spaces the learners cannot take included): the start-up check of a run, before
            its run dir is made (``experiment.config.env_checks.check_env``); None: only
            ``check_env_id`` runs.
        in_program: For a host backend, ``in_program(options)`` (its ``options`` dataclass):
            whether those options step the envs from inside the compiled program (the ``ale``
            backend's fused mode calls ALE's XLA FFI there), leaving no envs for a Python loop
            to step (``host_loop``) nor for stacked seeds to share through host calls; None:
            never ([`steps_in_program`][batchppo.backends.Backend.steps_in_program]).
        detect: ``detect(product)``: whether what an env id ``module:factory`` returned (an
            env, or gymnax's ``(env, params)``) is an env this backend runs (its API, read by
            shape); the first backend in registry order that says so runs it
            ([`factory_backend`][batchppo.backends.factory_backend]). None: it runs no
            factory's envs (the host backends resolve ``module:factory`` ids themselves).
        recipe: ``recipe(env_id, product)``: where a run of a product that ``detect`` took
            starts when it names no config (``batchppo train --env module:factory``), a
            [`FactoryRecipe`][batchppo.backends.FactoryRecipe], or a one-line
            ``ValueError`` where no preset fits the env; None: such a run needs a config.
    """

    name: str
    make: MakeEnv
    check_env_id: Callable[[str], None]
    host: bool
    description: str
    title: str = ""
    options: type | None = None
    run_options: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    requires: str | None = None
    install: str = ""
    probe: Callable[..., Any] | None = None
    in_program: Callable[[Any], bool] | None = None
    detect: Callable[[Any], bool] | None = None
    recipe: Callable[[str, Any], FactoryRecipe] | None = None
    env_requires: Callable[[str], str | None] | None = None

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", self.name)
        if self.requires and not self.install:
            object.__setattr__(self, "install", requirement(self.requires).install)

    @property
    def fused(self) -> bool:
        """Whether the envs fuse with the learner into one compiled program (pure JAX)."""
        return not self.host

    def steps_in_program(self, options: Any) -> bool:
        """Whether a host backend's envs, under ``options`` (an instance of its ``options``
        class: a config's parsed ``backend_options``), are stepped from inside the compiled
        program (``in_program``); False for pure-JAX backends (their envs are the program) and
        for host backends without ``in_program``."""
        if self.in_program is None:
            return False
        return bool(self.in_program(options))

    def available(self) -> bool:
        """Whether the modules the backend needs are importable (checked without importing)."""
        return self.requires is None or importlib.util.find_spec(self.requires) is not None

    def missing(self, env_id: str) -> Requirement | None:
        """What running ``env_id`` on this backend needs and is not installed: the backend's own
        package (``requires``, installed as ``install`` says), then the env's
        (``env_requires``); None when both are there. Checked without importing them.
        """
        if not self.available():
            return Requirement(self.requires, requirement(self.requires).name, self.install)
        module = self.env_requires(env_id) if self.env_requires is not None else None
        if module is not None and importlib.util.find_spec(module) is None:
            return requirement(module)
        return None

    @property
    def supports_restarts(self) -> bool:
        """Whether crashed envs are rebuilt: the options have a ``max_restarts``."""
        return "max_restarts" in self.option_names()

    @property
    def takes_options(self) -> bool:
        """Whether ``make`` takes ``options`` (``options`` or ``run_options`` declared)."""
        return self.options is not None or bool(self.run_options)

    def option_names(self) -> tuple[str, ...]:
        """The keys a config's ``backend_options`` may give (none without ``options``): the
        fields of ``options`` but those it holds (``batchppo.core.values.fixed``)."""
        fields = dataclasses.fields(self.options) if self.options else ()
        return tuple(f.name for f in fields if not is_fixed(f))

    def learned_options(self) -> tuple[str, ...]:
        """The options that change what a run learns (their ``metadata`` is ``LEARNED``)."""
        fields = dataclasses.fields(self.options) if self.options else ()
        return tuple(f.name for f in fields if f.metadata.get("learned"))

    def check_options(self, given: Mapping[str, Any]) -> Any:
        """Parses a config's ``backend_options`` into the backend's ``options`` object: the
        one check of them, done once where a config is made (``RunConfig.check_run``).

        Args:
            given: The mapping of option names to values (YAML scalars).

        Returns:
            The ``options`` dataclass built from ``given`` (its defaults for the keys not
            given; an int widened to a float option), or None for a backend without options
            and an empty ``given``.

        Raises:
            ValueError: One line: ``given`` for a backend that takes none, an unknown key or
                a value of the wrong type (naming the key, the backend and the valid keys), or
                a value the options' own check refuses.
        """
        if not isinstance(given, Mapping) or not all(isinstance(k, str) for k in given):
            raise ValueError(
                f"backend_options={given!r}: must be a mapping of option names to values"
            )
        if self.options is None:
            if given:
                takers = prose(b.name for b in BACKENDS.values() if b.options is not None)
                raise ValueError(
                    f"backend_options {dict(given)}: backend {self.name!r} takes none "
                    f"(backends with options: {takers or 'none'}); drop backend_options"
                )
            return None
        names = self.option_names()
        valid = ", ".join(names)
        types_ = typing.get_type_hints(self.options)
        values = {}
        for key, value in given.items():
            if key not in names:
                raise ValueError(
                    f"backend_options.{key}: backend {self.name!r} has no option {key!r}."
                    f"{did_you_mean(key, names)} Valid keys: {valid}"
                )
            try:
                values[key] = coerce(value, types_[key])
            except TypeError:
                raise ValueError(
                    f"backend_options.{key}={value!r}: backend {self.name!r} expects "
                    f"{type_name(types_[key])}. Valid keys: {valid}"
                ) from None
        return self.options(**values)

    def resolve_options(self, given: Any) -> Any:
        """The backend's options object of ``given``: an instance of its ``options`` class as
        it is (it was checked when made), a mapping parsed by
        [`check_options`][batchppo.backends.Backend.check_options], None its defaults.

        Raises:
            ValueError: As ``check_options``.
            TypeError: An object of another class.
        """
        if given is None or isinstance(given, Mapping):
            return self.check_options(given or {})
        if self.options is None:
            raise TypeError(f"options={given!r}: backend {self.name!r} takes none; pass None")
        if not isinstance(given, self.options):
            raise TypeError(
                f"options={given!r}: backend {self.name!r} takes {self.options.__name__}, a "
                "mapping of its keys, or None for its defaults"
            )
        return given

    def run_settings(self, config: Any) -> dict[str, Any]:
        """What ``make`` gets as keywords besides ``options`` for ``config``: the config's
        fields that ``run_options`` names, under their keywords (empty for most backends)."""
        return {key: getattr(config, field) for field, key in self.run_options.items()}


BACKENDS: Registry[Backend] = Registry("backend", Backend, group=ENTRY_POINT_GROUP)
"""The registry: every backend by name, in the order messages list them (the built-ins, then
those of entry points)."""


def register(backend: Backend) -> Backend:
    """Adds ``backend`` to [`BACKENDS`][batchppo.backends.BACKENDS] (a built-in backend's module, a
    plug-in, a test).

    Args:
        backend: The record; its name must be new.

    Returns:
        ``backend``.

    Raises:
        ValueError: A backend of that name is registered already.
    """
    return BACKENDS.register(backend)


def get_backend(name: str) -> Backend:
    """The registered backend ``name`` (the entry points loaded first if it is not registered).

    Raises:
        ValueError: An unknown name, with a close match and the valid names.
    """
    return BACKENDS.lookup(name)


def factory_backend(product: Any) -> str | None:
    """The backend that runs what an env id ``module:factory`` returned: the first in registry
    order (the built-ins, then those of entry points) whose ``detect`` takes it; None for any
    other product (a Gymnasium env, for the host backends).

    Args:
        product: What an env factory returned: an env, or gymnax's ``(env, params)``.
    """
    for backend in BACKENDS.values():
        if backend.detect is not None and backend.detect(product):
            return backend.name
    return None


def names(*, host: bool | None = None, supports_restarts: bool | None = None) -> tuple[str, ...]:
    """Registered backend names, in registry order (the entry points loaded), optionally
    filtered.

    Args:
        host: Only host (True) or only pure-JAX (False) backends; None: both.
        supports_restarts: Only those that do (True) or do not (False) rebuild crashed envs
            (an option ``max_restarts``); None: both.
    """
    return tuple(
        b.name
        for b in BACKENDS.values()
        if (host is None or b.host == host)
        and (supports_restarts is None or b.supports_restarts == supports_restarts)
    )

"""Registries of named records: [`Registry`][batchppo.core.registry.Registry], one type for the
algorithms, the torsos and the env backends, and [`lazy`][batchppo.core.registry.lazy], through
which records point at their heavy code.

A registry is a dict of records by name (each record has a ``name``), in registration order,
the order messages list them. Modules of the package register the built-in records when
imported; a user's package adds its own without any import by its user, through an entry
point of the registry's ``group`` (``batchppo.algorithms``, ``batchppo.torsos``,
``batchppo.backends``): one that names a module whose import registers records, a record, or a
callable returning a record, records or None (having registered them itself). So a config
naming a user's record (``mlp: mytorso``, ``backend: mybackend``) validates and trains from
the command line.

The registry loads its group once, lazily: the first time a lookup misses or the full list is
read (iterating, ``len``, ``keys``, ``values``, ``items``). An entry point that fails to load is
skipped with a one-line [`EntryPointWarning`][batchppo.core.registry.EntryPointWarning]; the
other records work. An unknown name is a one-line ``ValueError`` with the closest name and the
valid ones ([`lookup`][batchppo.core.registry.Registry.lookup]).

Pure Python (``importlib`` and the wording of messages), so the light modules that hold
registries (config parsing among them) import no JAX.

Examples:
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Colour:
    ...     name: str
    >>> COLOURS = Registry("colour", Colour, group="example.colours")
    >>> COLOURS.register(Colour("red")).name
    'red'
    >>> COLOURS.lookup("rde")
    Traceback (most recent call last):
    ...
    ValueError: unknown colour 'rde'. Did you mean 'red'? Choose one of: red.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import types
import warnings
from collections.abc import (
    Callable,
    Collection,
    ItemsView,
    Iterator,
    KeysView,
    Mapping,
    ValuesView,
)
from typing import Any, TypeVar

from batchppo.core.wording import did_you_mean

__all__ = ["EntryPointWarning", "Registry", "lazy"]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class _Lazy:
    """A callable that imports ``module:name`` on its first call (and binds ``kwargs``)."""

    ref: str
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, _, name = self.ref.partition(":")
        function = getattr(importlib.import_module(module), name)
        return function(*args, **self.kwargs, **kwargs)


def lazy(ref: str, **kwargs: Any) -> Callable[..., Any]:
    """A callable that calls ``module:name`` (imported at call time) with ``kwargs`` bound.

    Records point at their code this way (a backend's builder, a torso's module, an
    algorithm's trainer), so the modules that hold registries import nothing heavy.

    Args:
        ref: ``"package.module:function"``.
        **kwargs: Keyword arguments bound to every call.

    Returns:
        The lazy callable.

    Raises:
        ValueError: ``ref`` names no ``module:name``.
    """
    if ":" not in ref:
        raise ValueError(f"lazy reference {ref!r}: expected 'package.module:name'")
    return _Lazy(ref, dict(kwargs))


class EntryPointWarning(UserWarning):
    """An entry point of a registry's group that failed to load (its records are unavailable;
    the others work)."""


class Registry(dict[str, T]):
    """Records by name, which loads the entry points of its ``group`` (once) before it answers
    a miss or lists its records.

    Looking a name up (``[]``, ``in``, ``get``, ``lookup``) loads them only when the name is not
    registered yet; iterating, ``len``, ``keys``, ``values`` and ``items`` load them first.
    [`registered`][batchppo.core.registry.Registry.registered] reads without loading.

    Args:
        kind: What a record is, for messages (``"torso"``).
        record_type: The class of the records; anything else is refused.
        group: The entry-point group through which installed packages add records.
        check: Raises a one-line ``ValueError`` for a record that cannot join the registry
            (beyond a taken name: a clash with the records registered); run by ``register``.
    """

    def __init__(
        self,
        kind: str,
        record_type: type[T],
        group: str,
        check: Callable[[T], None] | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.record_type = record_type
        self.group = group
        self._check = check
        self._loaded = False
        self._from_entry_points: dict[str, str] = {}  # record name -> entry point name

    def __missing__(self, name: str) -> T:
        self.load_entry_points()
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        if not dict.__contains__(self, name):
            self.load_entry_points()
        return dict.__contains__(self, name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The record ``name``, or ``default``."""
        if not dict.__contains__(self, name):
            self.load_entry_points()
        return dict.get(self, name, default)

    def __iter__(self) -> Iterator[str]:
        self.load_entry_points()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.load_entry_points()
        return dict.__len__(self)

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        """The names (entry points loaded)."""
        self.load_entry_points()
        return dict.keys(self)

    def values(self) -> ValuesView[T]:  # type: ignore[override]
        """The records (entry points loaded)."""
        self.load_entry_points()
        return dict.values(self)

    def items(self) -> ItemsView[str, T]:  # type: ignore[override]
        """The names and records (entry points loaded)."""
        self.load_entry_points()
        return dict.items(self)

    def registered(self) -> dict[str, T]:
        """The records registered so far, without loading the entry points."""
        return dict(dict.items(self))

    def register(self, record: T) -> T:
        """Adds ``record`` (a built-in module's, a plug-in's, a test's).

        Returns:
            ``record``.

        Raises:
            TypeError: ``record`` is not a ``record_type``.
            ValueError: A record of that name is registered already, or ``check`` refuses it.
        """
        if not isinstance(record, self.record_type):
            raise TypeError(
                f"{type(record).__name__} is not a {self.record_type.__name__} record: "
                f"register a {self.record_type.__name__}"
            )
        name = record.name  # type: ignore[attr-defined]
        if dict.__contains__(self, name):
            raise ValueError(f"{self.kind} {name!r} is registered already")
        if self._check is not None:
            self._check(record)
        dict.__setitem__(self, name, record)
        return record

    def lookup(
        self,
        name: str,
        *,
        among: Collection[str] | None = None,
        kind: str | None = None,
        field: str | None = None,
    ) -> T:
        """The record ``name`` (the entry points loaded first if it is not registered).

        Args:
            name: The name asked for.
            among: The names that are valid here (a subset of the registry's); None: all.
            kind: What the valid records are, for the message; None: ``kind``.
            field: The config field that gave ``name``, for the message; None: none.

        Raises:
            ValueError: ``name`` is not valid here, in one line with the closest valid name
                and the valid names: ``unknown torso 'x'. ...``, or with ``field``
                ``mlp='x': unknown vector torso. ...``.
        """
        record = self.get(name)
        if record is not None and (among is None or name in among):
            return record
        choices = tuple(self) if among is None else tuple(among)
        kind = kind or self.kind
        subject = f"{field}={name!r}: unknown {kind}." if field else f"unknown {kind} {name!r}."
        raise ValueError(
            f"{subject}{did_you_mean(name, choices)} Choose one of: {', '.join(choices)}."
        )

    def load_entry_points(self) -> None:
        """Loads the entry points of ``group``, once per process.

        Each names a module whose import registers records, a record, or a callable called
        with no arguments that returns a record, records or None (having registered them
        itself). The registry calls this on a miss or a full listing; calling it is not
        needed. An entry point that fails (its import raises, a name taken already...) is
        skipped with a one-line ``EntryPointWarning`` naming it and the error.
        """
        if self._loaded:
            return
        self._loaded = True  # first: a plug-in reading the registry must not reload it
        for entry_point in importlib.metadata.entry_points(group=self.group):
            before = set(dict.keys(self))
            try:
                self._load(entry_point)
            except Exception as error:  # a broken plug-in must not stop the runs of others
                reason = (str(error).strip().splitlines() or [""])[0]
                warnings.warn(
                    f"{self.kind} entry point {entry_point.name!r} ({entry_point.value}) of "
                    f"group {self.group!r} failed to load, its {self.kind}s are unavailable: "
                    f"{type(error).__name__}{': ' + reason if reason else ''}",
                    EntryPointWarning,
                    stacklevel=3,
                )
            for name in dict.keys(self) - before:
                self._from_entry_points[name] = entry_point.name

    def _load(self, entry_point: importlib.metadata.EntryPoint) -> None:
        """Loads one entry point, registering the records it gives that are not registered."""
        loaded = entry_point.load()
        if isinstance(loaded, types.ModuleType):
            return  # its import registered its records
        record_type = self.record_type
        if not isinstance(loaded, record_type):
            if not callable(loaded):
                raise TypeError(
                    f"{type(loaded).__name__} is neither a module, a {record_type.__name__} "
                    "nor a callable"
                )
            loaded = loaded()
        records = () if loaded is None else (loaded,) if isinstance(loaded, record_type) else loaded
        for record in records:
            if not isinstance(record, record_type):
                raise TypeError(f"gave a {type(record).__name__}, not a {record_type.__name__}")
            if dict.get(self, record.name) is not record:
                self.register(record)

    def forget_entry_points(self) -> None:
        """Drops the records the entry points registered and forgets that they were loaded
        (for tests: the next miss or listing loads them again)."""
        for name in self._from_entry_points:
            dict.pop(self, name, None)
        self._from_entry_points.clear()
        self._loaded = False

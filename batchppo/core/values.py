"""Values checked against a type annotation: what a config field or a backend option holds.

The one parser of the values a config gives (a YAML file, ``--set KEY=VALUE``, a mapping of
backend options): ``coerce`` converts a value to a field's or an option's type, or raises
``TypeError`` for a value that does not fit; ``type_name`` words the type for the one-line
error its caller raises. ``positive_int`` and ``optional_positive_int`` are the one check of a
count (an int >= 1, or None where None has a meaning), with its one-line ``ValueError``.
``fixed`` declares a field of an options dataclass that a subclass holds at one value, and
``check_fixed`` refuses any other. Pure
Python, so the light modules (the backend registry, config parsing, the host envs) import it
without JAX.

Examples:
    >>> coerce("1e6", int), coerce(2, float), coerce("none", int | None)
    (1000000, 2.0, None)
    >>> type_name(float | None)
    'float or None'
    >>> optional_positive_int("max_length", 0, "the env's own")
    Traceback (most recent call last):
    ...
    ValueError: max_length must be >= 1 (or None for the env's own), got 0.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from typing import Any

__all__ = [
    "check_fixed",
    "coerce",
    "fixed",
    "is_fixed",
    "is_plain",
    "optional_positive_int",
    "positive_int",
    "type_name",
]

_FIXED = "fixed"
"""The ``metadata`` key of a field declared with ``fixed``: why it is held."""


def type_name(annotation: Any) -> str:
    """A short readable name of a field type, e.g. ``int or None``, ``list of int``."""
    args = typing.get_args(annotation)
    if _is_union(annotation):
        return " or ".join(type_name(a) for a in args)
    if typing.get_origin(annotation) is tuple:
        return f"list of {type_name(args[0])}"
    if typing.get_origin(annotation) is dict:
        return "mapping of names to values"
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "YAML value"
    return annotation.__name__


def _is_union(annotation: Any) -> bool:
    return isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union


def coerce(value: Any, annotation: Any) -> Any:
    """Returns ``value`` converted to ``annotation``; raises TypeError when it does not fit."""
    if _is_union(annotation):
        options = typing.get_args(annotation)
        if type(None) in options and (value is None or value in ("None", "none")):
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce(value, option)
            except TypeError:
                pass
        raise TypeError
    if typing.get_origin(annotation) is tuple:
        (item, *_) = typing.get_args(annotation)
        if isinstance(value, (list, tuple)):
            return tuple(coerce(v, item) for v in value)
        raise TypeError
    if typing.get_origin(annotation) is dict:
        names_ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        if names_ok and all(is_plain(v) for v in value.values()):
            return dict(value)
        raise TypeError
    if annotation is Any:  # plain YAML: scalars, lists and mappings with string keys
        if _is_yaml(value):
            return value
        raise TypeError
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise TypeError
    if annotation in (int, float):
        if isinstance(value, str):
            # YAML 1.1 reads "1e6" as a string; numbers written that way are still numbers.
            try:
                value = float(value)
            except ValueError:
                raise TypeError from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError
        if annotation is int:
            if isinstance(value, float) and not value.is_integer():
                raise TypeError
            return int(value)
        return float(value)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise TypeError
    raise TypeError


def _is_yaml(value: Any) -> bool:
    """Whether ``value`` is plain YAML: a scalar, or lists and string-keyed mappings of them."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_yaml(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_yaml(v) for v in value)
    return is_plain(value)


def is_plain(value: Any) -> bool:
    """Whether ``value`` is a YAML scalar or a list of them (what the values of a mapping field,
    such as ``env_kwargs``, may hold)."""
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def positive_int(name: str, value: Any, meaning: str = "") -> int:
    """``value`` as an int >= 1.

    Args:
        name: The setting's name, which the error starts with.
        value: Any int-like value (``operator.index``); a bool is refused.
        meaning: Words after ``>= 1`` in the error, e.g. ``" (envs per fresh reset)"``.

    Raises:
        ValueError: ``value`` is no int, or below 1, in one line naming ``name``.
    """
    return _at_least_one(name, value, "an int", meaning)


def optional_positive_int(name: str, value: Any, none_means: str) -> int | None:
    """``value`` as an int >= 1, or None, which means ``none_means`` to the caller.

    Args:
        name: The setting's name, which the error starts with.
        value: None, or any int-like value (``operator.index``); a bool is refused.
        none_means: What None gives, for the error: ``"the env's own"``.

    Raises:
        ValueError: ``value`` is neither None nor an int, or below 1, in one line naming
            ``name`` and what None would give.
    """
    if value is None:
        return None
    return _at_least_one(name, value, "an int or None", f" (or None for {none_means})")


def _at_least_one(name: str, value: Any, kind: str, meaning: str) -> int:
    try:
        if isinstance(value, bool):  # True is an int to Python, but never a count
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be {kind}, got {value!r}.") from None
    if value < 1:
        raise ValueError(f"{name} must be >= 1{meaning}, got {value}.")
    return value


def fixed(default: Any, why: str) -> Any:
    """A field of an options dataclass that this class holds at ``default``: a subclass that
    cannot honour a setting of its base redeclares it so (``max_restarts: int = fixed(0, "Ray
    env actors are not restarted")``). It is no option a config gives
    (``batchppo.backends.Backend.option_names`` leaves it out), and ``check_fixed`` refuses
    any other value.

    Args:
        default: The one value the field takes.
        why: Why, for the one-line error: what the class does instead, and the fix.
    """
    return dataclasses.field(default=default, metadata={_FIXED: why})


def is_fixed(field: dataclasses.Field) -> bool:
    """Whether ``field`` was declared with ``fixed``."""
    return _FIXED in field.metadata


def check_fixed(options: Any) -> None:
    """Refuses a value other than its default in a field of ``options`` (a dataclass) that
    was declared with ``fixed``.

    Raises:
        ValueError: One line naming the field, its value and why it is held.
    """
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if is_fixed(field) and value != field.default:
            raise ValueError(f"{field.name}={value!r}: {field.metadata[_FIXED]}")

"""The fields of a config class: their types, one value checked against a field's type, and
the valid key nearest to a misspelt one.

What ``--set KEY=VALUE`` and a YAML config give is checked here, field by field
(``coerce_field``), against the type annotations of the config class of the config's algorithm
(a [`RunConfig`][batchppo.algorithms.common.run_config.RunConfig] subclass).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Iterable
from typing import Any

from batchppo.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm
from batchppo.experiment.errors import ConfigError


@functools.cache
def field_types(config_class: type | None = None) -> dict[str, Any]:
    """The resolved type annotation of every field of ``config_class``, by name.

    Args:
        config_class: An algorithm's config class; None: the default algorithm's (PPO).
    """
    config_class = config_class or get_algorithm(DEFAULT_ALGORITHM).config
    hints = typing.get_type_hints(config_class)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_class)}


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


def _coerce(value: Any, annotation: Any) -> Any:
    """Returns ``value`` converted to ``annotation``; raises TypeError when it does not fit."""
    if _is_union(annotation):
        options = typing.get_args(annotation)
        if type(None) in options and (value is None or value in ("None", "none")):
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option)
            except TypeError:
                pass
        raise TypeError
    if typing.get_origin(annotation) is tuple:
        (item, *_) = typing.get_args(annotation)
        if isinstance(value, (list, tuple)):
            return tuple(_coerce(v, item) for v in value)
        raise TypeError
    if typing.get_origin(annotation) is dict:
        names_ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        if names_ok and all(_is_plain(v) for v in value.values()):
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
    return _is_plain(value)


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is a YAML scalar or a list of them (what the values of a mapping field,
    such as ``env_kwargs``, may hold)."""
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def nearest_key(key: str, names: Iterable[str]) -> str:
    """The valid key nearest to ``key``: one whose words' initials spell it (``lr`` for
    ``learning_rate``), else the closest spelling (``difflib``), else, where no name shares a
    letter with it, the first name."""
    names = list(names)
    initials = [n for n in names if "_" in n and "".join(w[0] for w in n.split("_")) == key]
    if initials:
        return initials[0]
    for cutoff in (0.6, 1e-9):  # a close spelling, else any shared letter
        close = difflib.get_close_matches(key, names, n=1, cutoff=cutoff)
        if close:
            return close[0]
    return names[0]


def _unknown_key(key: str, config_class: type | None) -> ConfigError:
    names = list(field_types(config_class))
    return ConfigError(
        f"unknown config key {key!r}. Did you mean {nearest_key(key, names)!r}? Allowed keys: "
        f"{', '.join(names)}"
    )


def coerce_field(key: str, value: Any, config_class: type | None = None) -> Any:
    """Checks and converts one value for the field ``key`` of ``config_class`` (None: PPO's).

    Raises:
        ConfigError: Unknown key (lists the allowed keys) or a value of the wrong type (names
            the expected type and the given value).
    """
    types_ = field_types(config_class)
    if key not in types_:
        raise _unknown_key(key, config_class)
    try:
        return _coerce(value, types_[key])
    except TypeError:
        raise ConfigError(
            f"config key {key!r} expects {type_name(types_[key])}, got {value!r}"
        ) from None

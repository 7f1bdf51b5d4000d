"""The fields of a config class: their types, one value checked against a field's type, and
the valid key nearest to a misspelt one.

What ``--set KEY=VALUE`` and a YAML config give is checked here, field by field
(``coerce_field``), against the type annotations of the config class of the config's algorithm
(a [`RunConfig`][batchppo.algorithms.run_config.RunConfig] subclass), by the one parser
of config values, ``batchppo.core.values`` (which checks a backend's options too).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Iterable
from typing import Any

from batchppo.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm
from batchppo.core.values import coerce, type_name
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
        return coerce(value, types_[key])
    except TypeError:
        raise ConfigError(
            f"config key {key!r} expects {type_name(types_[key])}, got {value!r}"
        ) from None

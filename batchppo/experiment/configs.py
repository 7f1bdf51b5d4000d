"""Named presets, validated ``--set`` overrides and the plain-YAML round trip of a config.

A preset is a config of one of the algorithms of :mod:`batchppo.algorithms.registry` (a
:class:`~batchppo.algorithms.common.run_config.RunConfig` subclass); each algorithm keeps its
presets in its package (:mod:`batchppo.algorithms.ppo.presets`). A ``config.yaml`` names its
algorithm (``algorithm: ppo``); one written before that field existed is read as PPO's.

Example:
    >>> config = apply_overrides(get_preset("cartpole_jax"), ["steps=2000", "seed=3"])
    >>> config_from_yaml(config_to_yaml(config)) == config
    True
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM, algorithm_of, get_algorithm
from batchppo.core.backends import get_backend
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.fileio import atomic_write_bytes

DEFAULT_PRESET = "pendulum_jax"
"""The preset the README's first command trains: the fastest to a good result."""

PRESETS: dict[str, RunConfig] = {
    name: config for algorithm in ALGORITHMS.values() for name, config in algorithm.presets.items()
}
"""Every algorithm's presets, by name (in registry order)."""


def preset_names() -> list[str]:
    """Names of all presets, in registry order."""
    return list(PRESETS)


def brax_available() -> bool:
    """Whether the optional ``brax`` package is importable."""
    return get_backend("brax").available()


def _suggest(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def seed_run_name(name: str, index: int) -> str:
    """The config part of the run dir of seed ``index`` of a ``--seeds`` run: ``NAME-s<i>``."""
    return f"{name}-s{index}"


def preset_of_seed_run(name: str) -> str:
    """``NAME`` for a seed's run name ``NAME-s<i>`` (see :func:`seed_run_name`); else ``name``."""
    match = re.fullmatch(r"(.+)-s(\d+)", name)
    return match.group(1) if match and match.group(1) in PRESETS else name


def get_preset(name: str) -> RunConfig:
    """Returns the preset ``name``.

    Args:
        name: A key of :data:`PRESETS`, or ``NAME-s<i>``, the run name of seed ``i`` of a
            ``--seeds`` run of preset ``NAME`` (so that one seed's run resumes alone).

    Returns:
        The frozen config.

    Raises:
        ConfigError: Unknown name (the message lists the valid ones), or a Brax preset while
            ``brax`` is not installed.
    """
    preset = name if name in PRESETS else preset_of_seed_run(name)
    if preset not in PRESETS:
        raise ConfigError(
            f"unknown config {name!r}.{_suggest(name, PRESETS)} Valid configs: {', '.join(PRESETS)}"
        )
    config = PRESETS[preset]
    backend = get_backend(config.backend)
    if not backend.available():
        raise ConfigError(
            f"config {name!r} needs {backend.title}, which is not installed: `{backend.install}` "
            "(or pick a config from `batchppo list`)"
        )
    return config


# --- Typed overrides ------------------------------------------------------------------------


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


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is a YAML scalar or a list of them (what env options may hold)."""
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _unknown_key(key: str, config_class: type | None) -> ConfigError:
    names = list(field_types(config_class))
    return ConfigError(
        f"unknown config key {key!r}.{_suggest(key, names)} Allowed keys: {', '.join(names)}"
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


def parse_override(text: str, config_class: type | None = None) -> tuple[str, Any]:
    """Parses ``KEY=VALUE`` (VALUE read as YAML, then checked against the field's type).

    Args:
        text: The override.
        config_class: The config it applies to; None: the default algorithm's (PPO).

    Raises:
        ConfigError: No ``=``, unknown key, unparseable or mistyped value.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not of the form KEY=VALUE (e.g. steps=100000)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw  # Not YAML: checked as a plain string below.
    return key, coerce_field(key, value, config_class)


def replace_config(config: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """``dataclasses.replace`` that reports invalid combinations as :class:`ConfigError`."""
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as error:
        raise ConfigError(f"invalid config: {error}") from None


def apply_overrides(config: RunConfig, overrides: Iterable[str]) -> RunConfig:
    """Applies ``KEY=VALUE`` overrides (later ones win) to ``config``.

    Args:
        config: The base config.
        overrides: Strings such as ``"steps=2e5"``, ``"policy_layers=[64, 64]"``,
            ``"max_grad_norm=null"``.

    Returns:
        The new config.

    Raises:
        ConfigError: See :func:`parse_override`; also values the config itself rejects.
    """
    changes = dict(parse_override(text, type(config)) for text in overrides)
    return replace_config(config, changes)


# --- Plain YAML round trip ------------------------------------------------------------------


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """The config as plain data: ``algorithm`` first, then its fields in order (tuples
    become lists)."""
    fields = {
        k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()
    }
    return {"algorithm": algorithm_of(config).name, **fields}


def config_from_dict(data: Any, source: str = "config") -> RunConfig:
    """Builds a config from plain data, checking every key and type.

    ``algorithm`` names the config's algorithm; data without it (configs written before it
    existed) are PPO's.

    Raises:
        ConfigError: Not a mapping, an unknown algorithm, unknown keys, or values of the
            wrong type.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of config keys, got {type(data).__name__}")
    data = dict(data)
    try:
        config_class = get_algorithm(str(data.pop("algorithm", DEFAULT_ALGORITHM))).config
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None
    names = field_types(config_class)
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(
            f"{source}: unknown config keys {unknown}. Allowed keys: {', '.join(names)}"
        )
    try:
        changes = {k: coerce_field(k, v, config_class) for k, v in data.items()}
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    try:
        return config_class(**changes)
    except ValueError as error:
        raise ConfigError(f"{source}: invalid config: {error}") from None


def config_to_yaml(config: RunConfig) -> str:
    """Serialises ``config`` to plain YAML (``yaml.safe_dump``; no Python objects)."""
    return yaml.safe_dump(config_to_dict(config), sort_keys=False)


def config_from_yaml(text: str, source: str = "config") -> RunConfig:
    """Parses YAML written by :func:`config_to_yaml` (``yaml.safe_load``).

    Raises:
        ConfigError: Invalid YAML, unknown keys or mistyped values.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{source}: not valid YAML ({first})") from None
    return config_from_dict(data, source)


def save_config(config: RunConfig, path: str | Path) -> None:
    """Writes ``config`` as YAML to ``path``."""
    atomic_write_bytes(path, config_to_yaml(config).encode())


def load_config(path: str | Path) -> RunConfig:
    """Reads a config written by :func:`save_config`.

    Raises:
        ConfigError: Missing file or invalid content.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    return config_from_yaml(text, source=str(path))


# --- Resume compatibility -------------------------------------------------------------------

RESUME_MUTABLE = frozenset(
    {
        "log_every",
        "eval_every",
        "checkpoint_every",
        "keep_checkpoints",
        "eval_max_steps",
        "num_workers",
        "devices",
        "host_loop",
        "max_env_restarts",
        "env_step_timeout",
        "ray_address",
        "ray_num_cpus",
        "ray_startup_timeout",
    }
)
"""Fields a resumed run may change freely: they affect bookkeeping, speed or how env faults
are handled, not what is learned."""


def check_resume_overrides(stored: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """Applies overrides given when resuming, refusing those that change the run's meaning.

    ``steps`` may be raised (not lowered; and not when a schedule spans it, such as PPO's
    ``anneal_lr``: ``schedule_spans_steps``); bookkeeping fields in :data:`RESUME_MUTABLE`
    may change; anything else that differs from the stored config is refused.

    Raises:
        ConfigError: Naming the refused keys.
    """
    refused = []
    for key, value in changes.items():
        if getattr(stored, key) == value or key in RESUME_MUTABLE:
            continue
        if key == "steps" and value > stored.steps and not stored.schedule_spans_steps:
            continue
        refused.append(f"{key}={value!r} (stored {getattr(stored, key)!r})")
    if refused:
        raise ConfigError(
            "cannot change a resumed run's meaning: "
            + ", ".join(refused)
            + ". Only raising `steps` (unless a schedule spans it, as anneal_lr does) and "
            + ", ".join(sorted(RESUME_MUTABLE))
            + " are allowed; start a new run (another --timestamp) instead"
        )
    return replace_config(stored, changes)


# --- Env ids --------------------------------------------------------------------------------


def check_env_id(config: RunConfig) -> None:
    """Fails fast when the config's env id is unknown to its backend (the backend's check).

    Raises:
        ConfigError: Naming the id, a close match if any, and where the valid ids come from;
            or the backend needs a package that is not installed.
    """
    backend = get_backend(config.backend)
    if not backend.available():
        raise ConfigError(
            f"backend {backend.name!r} needs {backend.title}, not installed: `{backend.install}`"
        )
    try:
        backend.check_env_id(config.env)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def describe(name: str, config: RunConfig) -> str:
    """One line for ``batchppo list``."""
    algorithm = algorithm_of(config).name
    return f"{name:<14} {config.env:<16} {config.backend:<8} {config.steps:>12,} {algorithm:>9}"

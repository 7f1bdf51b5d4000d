"""Named presets, validated ``--set`` overrides and the plain-YAML round trip of a config.

A preset is a config of one of the algorithms of
[`batchppo.algorithms.registry`][batchppo.algorithms.registry] (a
[`RunConfig`][batchppo.algorithms.run_config.RunConfig] subclass); each algorithm keeps its
presets in its package (``batchppo.algorithms.ppo.presets``). A ``config.yaml`` names its algorithm
(``algorithm: ppo``); one written before that field existed is read as PPO's, and a run dir's
of an earlier version as ``batchppo.experiment.config.migrate`` moves its former fields.

The fields' types, which every value given is checked against, are those of
``batchppo.experiment.config.config_fields``. Beside this module: the resume rules
(``batchppo.experiment.config.resume``), the start-up checks of a run's env
([`batchppo.experiment.config.env_checks`][batchppo.experiment.config.env_checks]) and the starting
recipes ([`batchppo.experiment.config.recipes`][batchppo.experiment.config.recipes]).

Examples:
    >>> config = apply_overrides(get_preset("cartpole_jax"), ["steps=2000", "seed=3"])
    >>> config_from_yaml(config_to_yaml(config)) == config
    True
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from batchppo.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM, algorithm_of, get_algorithm
from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.core.wording import did_you_mean
from batchppo.experiment.config.config_fields import coerce_field, field_types, nearest_key
from batchppo.experiment.config.migrate import migrate_config
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.fileio import atomic_write_bytes

DEFAULT_PRESET = "pendulum_jax"
"""The preset the README's first command trains: the fastest to a good result."""


class _Presets(Mapping[str, RunConfig]):
    """Every algorithm's presets by name, in registry order, read from the registry at each
    use: a plug-in algorithm's too (its entry point loaded on the first listing)."""

    def _all(self) -> dict[str, RunConfig]:
        algorithms = ALGORITHMS.values()
        return {name: config for a in algorithms for name, config in a.presets.items()}

    def __getitem__(self, name: str) -> RunConfig:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


PRESETS: Mapping[str, RunConfig] = _Presets()
"""Every algorithm's presets, by name (in registry order)."""


def preset_names() -> list[str]:
    """Names of all presets, in registry order."""
    return list(PRESETS)


def brax_available() -> bool:
    """Whether the optional ``brax`` package is importable."""
    return get_backend("brax").available()


def seed_run_name(name: str, index: int) -> str:
    """The config part of the run dir of seed ``index`` of a ``--seeds`` run: ``NAME-s<i>``."""
    return f"{name}-s{index}"


def preset_of_seed_run(name: str) -> str:
    """``NAME`` for a seed's run name ``NAME-s<i>`` (see ``seed_run_name``); else ``name``."""
    match = re.fullmatch(r"(.+)-s(\d+)", name)
    return match.group(1) if match and match.group(1) in PRESETS else name


def get_preset(name: str) -> RunConfig:
    """Returns the preset ``name``.

    Args:
        name: A key of [`PRESETS`][batchppo.experiment.config.configs.PRESETS], or
            ``NAME-s<i>``, the run name of seed ``i`` of a ``--seeds`` run of preset ``NAME`` (so
            that one seed's run resumes alone).

    Returns:
        The frozen config.

    Raises:
        ConfigError: Unknown name (the message lists the valid ones), or a Brax preset while
            ``brax`` is not installed.
    """
    preset = name if name in PRESETS else preset_of_seed_run(name)
    if preset not in PRESETS:
        raise ConfigError(
            f"unknown config {name!r}.{did_you_mean(name, PRESETS)} Valid configs: "
            f"{', '.join(PRESETS)}"
        )
    config = PRESETS[preset]
    backend = get_backend(config.backend)
    if not backend.available():
        raise ConfigError(
            f"config {name!r} needs {backend.title}, which is not installed: `{backend.install}` "
            "(or pick a config from `batchppo list`)"
        )
    return config


def describe(name: str, config: RunConfig) -> tuple[str, str, str, str, str]:
    """The cells of a preset's row in ``batchppo list``: name, env, backend, steps (with
    thousands separators) and algorithm."""
    algorithm = algorithm_of(config).name
    return (name, config.env, config.backend, f"{config.steps:,}", algorithm)


# --- Typed overrides ------------------------------------------------------------------------


def parse_override(text: str, config_class: type | None = None) -> tuple[str, Any]:
    """Parses ``KEY=VALUE`` (VALUE read as YAML, then checked against the field's type).

    ``KEY`` is a field, or ``FIELD.NAME`` for one entry of a mapping field
    (``backend_options.num_workers=4``, ``env_kwargs.max_speed=9``), whose value is a YAML
    scalar or a list of them; ``expand_changes`` merges it into the field's mapping.

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
    field, dot, name = key.partition(".")
    if not dot:
        return key, coerce_field(key, value, config_class)
    types_ = field_types(config_class)
    if field not in types_:
        coerce_field(field, value, config_class)  # the unknown key's error, with a close match
    if not _is_mapping(types_[field]) or not name:
        mappings = ", ".join(k for k, t in types_.items() if _is_mapping(t))
        raise ConfigError(
            f"override {text!r}: FIELD.NAME sets one entry of a mapping field ({mappings})"
        )
    coerce_field(field, {name: value}, config_class)  # a plain value, as the field holds
    return key, value


def _is_mapping(annotation: Any) -> bool:
    """Whether a field's type annotation is a mapping (``dict[str, Any]``)."""
    return typing.get_origin(annotation) is dict


def expand_changes(changes: Mapping[str, Any], base: RunConfig | None) -> dict[str, Any]:
    """``changes`` with each ``FIELD.NAME`` entry (``parse_override``) merged into the mapping
    of ``FIELD``: the one ``changes`` gives, else ``base``'s (empty without a base), in order.

    Examples:
        >>> expand_changes({"backend_options.num_workers": 2, "steps": 10}, None)
        {'backend_options': {'num_workers': 2}, 'steps': 10}
    """
    expanded: dict[str, Any] = {}
    for key, value in changes.items():
        field, dot, name = key.partition(".")
        if not dot:
            expanded[key] = value
            continue
        current = expanded.get(field, getattr(base, field, None) if base is not None else None)
        expanded[field] = {**(current or {}), name: value}
    return expanded


def replace_config(config: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """``dataclasses.replace`` (with ``FIELD.NAME`` entries merged: ``expand_changes``) that
    reports invalid combinations as [`ConfigError`][batchppo.experiment.ConfigError]."""
    try:
        return dataclasses.replace(config, **expand_changes(changes, config))
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
        ConfigError: See ``parse_override``; also values the config itself rejects.
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


def _unknown_keys(unknown: list[str], names: Iterable[str], source: str) -> ConfigError:
    """One line naming the unknown keys, the nearest valid key of each and the valid keys."""
    names = list(names)
    hints = [
        repr(nearest_key(key, names))
        if len(unknown) == 1
        else f"{nearest_key(key, names)!r} for {key!r}"
        for key in unknown
    ]
    return ConfigError(
        f"{source}: unknown config keys {unknown}. Did you mean {', '.join(hints)}? Allowed "
        f"keys: {', '.join(names)}"
    )


def config_from_dict(data: Any, source: str = "config", complete: bool = False) -> RunConfig:
    """Builds a config from plain data, checking every key and type.

    ``algorithm`` names the config's algorithm; data without it (configs written before it
    existed) are PPO's.

    Args:
        data: The mapping (a ``config.yaml``'s content).
        source: Where it comes from, for messages.
        complete: Every field must be given (a full config file of ``--config``); otherwise
            missing fields (a stored ``config.yaml`` written before a field existed) take the
            value that repeats the code before them where the config class names one
            (``RunConfig.FIELDS_ADDED``), else the class's default.

    Raises:
        ConfigError: Not a mapping, an unknown algorithm, unknown keys (the nearest valid key
            named), missing keys (with ``complete``), or values of the wrong type.
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
        raise _unknown_keys(unknown, names, source)
    missing = [name for name in names if name not in data]
    if complete and missing:
        raise ConfigError(
            f"{source}: missing config keys {missing}: a full config gives every key (a run's "
            "config.yaml, or the output of `batchppo show PRESET`); or start the file from a "
            "preset with `base: PRESET` and give only the keys that change"
        )
    data = {**{k: v for k, v in config_class.FIELDS_ADDED.items() if k in missing}, **data}
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


def _read_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``; ConfigError naming ``source`` for invalid YAML."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{source}: not valid YAML ({first})") from None


def config_from_yaml(text: str, source: str = "config") -> RunConfig:
    """Parses YAML written by [`config_to_yaml`][batchppo.experiment.config.configs.config_to_yaml]
    (``yaml.safe_load``).

    Raises:
        ConfigError: Invalid YAML, unknown keys or mistyped values.
    """
    return config_from_dict(_read_yaml(text, source), source)


BASE_KEY = "base"
"""The key of a partial config file that names the preset it starts from."""

CONFIG_SUFFIXES = (".yaml", ".yml")


def is_config_file(value: str) -> bool:
    """Whether a ``--config`` value names a YAML file (a ``.yaml``/``.yml`` suffix or a path
    with a directory) rather than a preset."""
    return value.endswith(CONFIG_SUFFIXES) or "/" in value or Path(value).is_file()


def config_from_file(path: str | Path) -> RunConfig:
    """Reads a config file of ``--config``: a full config or a partial one.

    A full config gives every key (a run's ``config.yaml``, or ``batchppo show PRESET``'s
    output). A partial one names a preset under ``base`` and gives the keys that change:

    ```yaml
    base: pendulum_fast
    env: myenvs:MyReach-v0
    steps: 200000
    ```

    Raises:
        ConfigError: A missing or invalid file, an unknown preset, unknown keys (the nearest
            valid key named), missing keys in a full config, mistyped values.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(
            f"--config {path}: cannot read it ({error.strerror or error}); give a preset name "
            "(`batchppo list`) or the path of a YAML config file"
        ) from None
    source = str(path)
    data = _read_yaml(text, source)
    if not isinstance(data, dict) or BASE_KEY not in data:
        return config_from_dict(data, source, complete=True)
    data = dict(data)
    base_name = data.pop(BASE_KEY)
    try:
        base = get_preset(str(base_name))
    except ConfigError as error:
        raise ConfigError(f"{source}: base: {error}") from None
    algorithm = data.pop("algorithm", algorithm_of(base).name)
    if algorithm != algorithm_of(base).name:
        raise ConfigError(
            f"{source}: algorithm {algorithm!r} differs from base {base_name!r}'s "
            f"({algorithm_of(base).name}): drop the algorithm key or pick a base of {algorithm}"
        )
    unknown = sorted(set(data) - set(field_types(type(base))))
    if unknown:
        raise _unknown_keys(unknown, field_types(type(base)), source)
    try:
        changes = {k: coerce_field(k, v, type(base)) for k, v in data.items()}
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    try:
        return dataclasses.replace(base, **changes)
    except ValueError as error:
        raise ConfigError(f"{source}: invalid config: {error}") from None


def resolve_config(value: str) -> tuple[RunConfig, str]:
    """The config and run name of a ``--config`` value: a preset name, or a YAML file
    (``config_from_file``) whose stem names the run.

    Raises:
        ConfigError: See [`get_preset`][batchppo.experiment.config.configs.get_preset] and
            ``config_from_file``.
    """
    if is_config_file(value):
        return config_from_file(value), Path(value).stem
    return get_preset(value), value


def save_config(config: RunConfig, path: str | Path) -> None:
    """Writes ``config`` as YAML to ``path``."""
    atomic_write_bytes(path, config_to_yaml(config).encode())


def load_config(path: str | Path) -> RunConfig:
    """Reads a config written by ``save_config``, by this version or an earlier one (whose
    former fields ``migrate.migrate_config`` moves to where they are now, and whose missing
    fields take the values that repeat what it did: ``RunConfig.FIELDS_ADDED``).

    Raises:
        ConfigError: Missing file or invalid content.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    return config_from_dict(migrate_config(_read_yaml(text, str(path))), str(path))

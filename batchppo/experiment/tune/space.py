"""The search space of ``batchppo tune``: a YAML file of the config's own keys, each with the
values a trial may give it.

```yaml
learning_rate: {log_uniform: [1.0e-5, 1.0e-2]}
update_epochs: {int: [3, 15]}
clip_epsilon: {uniform: [0.1, 0.3], step: 0.05}
mlp: {choice: [plain, layernorm]}
policy_layers: {choice: [[64, 64], [256, 256]]}
env_kwargs.max_speed: {uniform: [6.0, 10.0]}
```

Each key is a field of the config (``batchppo show CONFIG`` lists them), or ``FIELD.NAME`` for
one entry of a mapping field (``env_kwargs``, ``backend_options``), as ``--set`` takes them.
Each value is one of ``KINDS``: ``uniform`` and ``log_uniform`` (a float field), ``int`` and
``log_int`` (an int field, or a float one), each over ``[low, high]`` with an optional ``step``
(not with the log kinds), or ``choice`` of a list of values of the field's type. Everything is
checked before the first trial (``parse_space``): the key (a misspelt one names the nearest),
the kind, the bounds, the type, and that the config takes each bound and each choice.

Optuna's categorical parameters hold scalars only: a choice that is a list or a mapping (the
layer sizes above) is the parameter's YAML text (``"[64, 64]"``), read back into the config.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from batchppo.algorithms.run_config import RunConfig
from batchppo.core.values import type_name
from batchppo.core.wording import did_you_mean
from batchppo.experiment.config import configs
from batchppo.experiment.config.config_fields import coerce_field, field_types
from batchppo.experiment.errors import ConfigError

KINDS = ("uniform", "log_uniform", "int", "log_int", "choice")
"""The kinds of a search-space entry."""
FLOAT_KINDS = ("uniform", "log_uniform")
INT_KINDS = ("int", "log_int")
UNTUNED = {"seed": "seeds are tune's --seeds (the config's seed + 0..K-1), the same in every trial"}
"""Config keys a space may not tune, and why."""


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One entry of a search space.

    Attributes:
        key: The config key (``FIELD`` or ``FIELD.NAME``), also the Optuna parameter's name.
        kind: One of ``KINDS``.
        low: The lower bound of a numeric kind (None for ``choice``).
        high: The upper bound of a numeric kind (None for ``choice``).
        step: The grid of a ``uniform`` or ``int`` kind; None: continuous (``int``: 1).
        choices: The values of a ``choice``, as Optuna holds them (YAML text for lists and
            mappings, ``encode_choice``).
    """

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    step: float | int | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """The trial's value of this entry (``trial.suggest_*``), as Optuna records it."""
        if self.kind == "choice":
            return trial.suggest_categorical(self.key, list(self.choices))
        log = self.kind.startswith("log_")
        if self.kind in INT_KINDS:
            return trial.suggest_int(self.key, self.low, self.high, step=self.step or 1, log=log)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=log)


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """A checked search space (``parse_space``).

    Attributes:
        dimensions: Its entries, in the file's order.
        data: The file's content, as read (what a study records, to refuse another space).
    """

    dimensions: tuple[Dimension, ...]
    data: Mapping[str, Any]

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys the space tunes."""
        return tuple(d.key for d in self.dimensions)

    def sample(self, trial: Any) -> dict[str, Any]:
        """The config changes of ``trial``: one value suggested for each entry."""
        return changes_of({d.key: d.suggest(trial) for d in self.dimensions}, self)

    def config(self, base: RunConfig, params: Mapping[str, Any]) -> RunConfig:
        """``base`` with the values of a trial's parameters (Optuna's ``trial.params``).

        Raises:
            ConfigError: The config rejects the combination (each value alone passed
                ``parse_space``'s check).
        """
        changes = {
            key: coerce_value(key, value, type(base))
            for key, value in changes_of(params, self).items()
        }
        return configs.replace_config(base, changes)


def encode_choice(value: Any) -> Any:
    """A choice as Optuna's categorical parameters hold it: a scalar as it is, a list or a
    mapping as its YAML text in flow style (``[64, 64]``)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()


def changes_of(params: Mapping[str, Any], space: SearchSpace) -> dict[str, Any]:
    """The config changes of Optuna parameters: a choice's YAML text read back (a list or
    a mapping), every other value as it is."""
    encoded = {d.key: d for d in space.dimensions if d.kind == "choice"}
    changes = {}
    for key, value in params.items():
        dimension = encoded.get(key)
        if dimension is not None and isinstance(value, str):
            originals = dimension_originals(dimension)
            value = originals.get(value, value)
        changes[key] = value
    return changes


def dimension_originals(dimension: Dimension) -> dict[str, Any]:
    """The choices of ``dimension`` held as YAML text, by their text: the values they stand
    for."""
    return {
        choice: yaml.safe_load(choice)
        for choice in dimension.choices
        if isinstance(choice, str) and choice[:1] in "[{"
    }


def read_space(path: str | Path) -> dict[str, Any]:
    """The content of a search-space file.

    Raises:
        ConfigError: The file cannot be read, is not YAML, or is not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"--space {path}: cannot read it ({error.strerror or error})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"--space {path}: not valid YAML ({first})") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            f"--space {path}: expected a mapping of config keys to ranges, e.g. "
            "learning_rate: {log_uniform: [1.0e-5, 1.0e-2]}"
        )
    return data


def parse_space(data: Mapping[str, Any], config: RunConfig, source: str) -> SearchSpace:
    """Checks a search space against the config it tunes.

    Args:
        data: The space file's content (``read_space``).
        config: The config the trials start from.
        source: The file's name, for messages.

    Returns:
        The space.

    Raises:
        ConfigError: One line naming the entry, the problem and the fix: an unknown key (with
            the nearest one), a key that is not tuned (``UNTUNED``), an unknown kind (with the
            nearest one), bad bounds, a kind that does not fit the field's type, or a bound or
            a choice that the config rejects.
    """
    dimensions = []
    for key, spec in data.items():
        key = str(key)
        where = f"{source}: {key}"
        annotation = _field_type(key, config, source)
        dimension = _dimension(key, spec, where)
        _check_type(dimension, annotation, config, where)
        for value in _probes(dimension):
            try:
                configs.replace_config(config, {key: coerce_value(key, value, type(config))})
            except ConfigError as error:
                reason = str(error).removeprefix("invalid config: ")
                raise ConfigError(f"{where}: the config rejects {value!r}: {reason}") from None
        dimensions.append(dimension)
    return SearchSpace(tuple(dimensions), dict(data))


def coerce_value(key: str, value: Any, config_class: type) -> Any:
    """``value`` as the config key ``key`` holds it (``coerce_field``: an int of an ``int``
    range becomes a float field's float); an entry of a mapping field as it is.

    Raises:
        ConfigError: A value of the wrong type.
    """
    field, dot, name = key.partition(".")
    if not dot:
        return coerce_field(key, value, config_class)
    coerce_field(field, {name: value}, config_class)  # a plain value, as the mapping holds
    return value


def _field_type(key: str, config: RunConfig, source: str) -> Any:
    """The type annotation of the field ``key`` names (Any for one entry of a mapping field).

    Raises:
        ConfigError: An unknown field (the nearest named), ``FIELD.NAME`` of a field that is not
            a mapping, or a key that is not tuned.
    """
    types_ = field_types(type(config))
    field, dot, name = key.partition(".")
    if field not in types_:
        hint = did_you_mean(field, types_) or " (`batchppo show CONFIG` lists the keys)"
        raise ConfigError(f"{source}: unknown config key {key!r}.{hint}")
    if field in UNTUNED:
        raise ConfigError(f"{source}: {key} is not tuned: {UNTUNED[field]}")
    if not dot:
        return types_[field]
    if typing.get_origin(types_[field]) is not dict or not name:
        mappings = [k for k, t in types_.items() if typing.get_origin(t) is dict]
        raise ConfigError(
            f"{source}: {key!r}: FIELD.NAME tunes one entry of a mapping field "
            f"({', '.join(mappings)}); {field} is not one"
        )
    return Any


def _dimension(key: str, spec: Any, where: str) -> Dimension:
    """The entry ``key: spec`` of a space file, its bounds checked.

    Raises:
        ConfigError: Not a mapping of one kind (and ``step``), an unknown kind, bad bounds.
    """
    example = "{log_uniform: [1.0e-5, 1.0e-2]}, {int: [3, 15]} or {choice: [a, b]}"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a range such as {example}, got {spec!r}")
    spec = dict(spec)
    step = spec.pop("step", None)
    if len(spec) != 1:
        raise ConfigError(
            f"{where}: give one of {', '.join(KINDS)} (and step), got {', '.join(map(str, spec))}"
        )
    ((kind, args),) = spec.items()
    if kind not in KINDS:
        hint = did_you_mean(str(kind), KINDS)
        raise ConfigError(f"{where}: unknown range {kind!r}.{hint} Ranges: {', '.join(KINDS)}")
    if kind == "choice":
        if step is not None:
            raise ConfigError(f"{where}: step applies to uniform and int, not choice")
        if not isinstance(args, list) or not args:
            raise ConfigError(f"{where}: choice takes a list of values, got {args!r}")
        choices = tuple(encode_choice(value) for value in args)
        if len(set(map(repr, choices))) != len(choices):
            raise ConfigError(f"{where}: choice lists a value twice: {args}")
        return Dimension(key, kind, choices=choices)
    return _numeric(key, kind, args, step, where)


def _numeric(key: str, kind: str, args: Any, step: Any, where: str) -> Dimension:
    """A numeric entry: ``[low, high]`` with ``low < high`` (``> 0`` for the log kinds), ints
    for the int kinds, and a positive ``step`` (not with the log kinds)."""
    number = int if kind in INT_KINDS else float
    allowed = (int,) if number is int else (int, float)

    def is_number(value: Any) -> bool:
        return isinstance(value, allowed) and not isinstance(value, bool)

    if not (isinstance(args, list) and len(args) == 2 and all(map(is_number, args))):
        what = "ints" if number is int else "numbers"
        raise ConfigError(f"{where}: {kind} takes a list of two {what} [low, high], got {args!r}")
    low, high = (number(v) for v in args)
    if not low < high:
        raise ConfigError(f"{where}: {kind} [{low}, {high}]: low must be below high")
    if kind.startswith("log_") and low <= 0:
        raise ConfigError(f"{where}: {kind} [{low}, {high}]: a log range needs low > 0")
    if step is not None:
        if kind.startswith("log_"):
            raise ConfigError(f"{where}: step does not apply to {kind}; use {kind[4:]}")
        if not is_number(step) or step <= 0:
            raise ConfigError(f"{where}: step must be a positive {number.__name__}, got {step!r}")
        step = number(step)
    return Dimension(key, kind, low, high, step)


def _check_type(dimension: Dimension, annotation: Any, config: RunConfig, where: str) -> None:
    """Checks that a numeric kind fits the field's type (a ``uniform`` float, an ``int`` int or
    float), and that each choice is of the field's type.

    Raises:
        ConfigError: Naming the field's type and the kind that fits it.
    """
    if annotation is Any:  # an entry of a mapping field: the config checks the values
        return
    if dimension.kind == "choice":
        for choice in dimension_values(dimension):
            try:
                coerce_field(dimension.key, choice, type(config))
            except ConfigError as error:
                raise ConfigError(f"{where}: {error}") from None
        return
    numbers = {t for t in _options(annotation) if t in (int, float)}
    fits = float in numbers if dimension.kind in FLOAT_KINDS else bool(numbers)
    if fits:
        return
    if numbers == {int}:
        fix = f"use {{int: [{int(dimension.low)}, {int(dimension.high)}]}}"
    else:
        fix = "use {choice: [...]}"
    raise ConfigError(
        f"{where}: the field holds {type_name(annotation)}, not a {dimension.kind} range: {fix}"
    )


def _options(annotation: Any) -> tuple[Any, ...]:
    """The types a field's annotation allows (the members of a union)."""
    args = typing.get_args(annotation)
    return args if args and typing.get_origin(annotation) is not tuple else (annotation,)


def dimension_values(dimension: Dimension) -> list[Any]:
    """The values of a ``choice`` as the config takes them (YAML text read back)."""
    originals = dimension_originals(dimension)
    return [originals.get(c, c) if isinstance(c, str) else c for c in dimension.choices]


def _probes(dimension: Dimension) -> list[Any]:
    """The values of an entry the config is checked with: the bounds, or every choice."""
    if dimension.kind == "choice":
        return dimension_values(dimension)
    return [dimension.low, dimension.high]

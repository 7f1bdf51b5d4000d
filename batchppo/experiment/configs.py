"""Named presets, validated ``--set`` overrides and the plain-YAML round trip of a config.

A preset is a config of one of the algorithms of
[`batchppo.algorithms.registry`][batchppo.algorithms.registry] (a
[`RunConfig`][batchppo.algorithms.common.run_config.RunConfig] subclass); each algorithm keeps its
presets in its package (``batchppo.algorithms.ppo.presets``). A ``config.yaml`` names its algorithm
(``algorithm: ppo``); one written before that field existed is read as PPO's.

Examples:
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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM, algorithm_of, get_algorithm
from batchppo.backends import get_backend
from batchppo.backends.factories import is_factory_id
from batchppo.core.wording import did_you_mean
from batchppo.experiment.env_checks import check_env
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
        name: A key of [`PRESETS`][batchppo.experiment.configs.PRESETS], or ``NAME-s<i>``, the run
            name of seed ``i`` of a ``--seeds`` run of preset ``NAME`` (so that one seed's run
            resumes alone).

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
    ``learning_rate``), else the closest spelling (``difflib``)."""
    names = list(names)
    initials = [n for n in names if "_" in n and "".join(w[0] for w in n.split("_")) == key]
    if initials:
        return initials[0]
    for cutoff in (0.6, 0.0):
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
    _refuse_former_fields({key: value}, "", "--set")
    return key, coerce_field(key, value, config_class)


def replace_config(config: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """``dataclasses.replace`` that reports invalid combinations as
    [`ConfigError`][batchppo.experiment.ConfigError]."""
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
            missing fields take the config class's defaults (a stored ``config.yaml``
            written before a field existed).

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
    _refuse_former_fields(data, f"{source}: ", "file")
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
    """Parses YAML written by [`config_to_yaml`][batchppo.experiment.configs.config_to_yaml]
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
    _refuse_former_fields(data, f"{source}: ", "file")
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
        ConfigError: See [`get_preset`][batchppo.experiment.configs.get_preset] and
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
    backend fields ``migrate_backend_fields`` moves into ``backend_options``).

    Raises:
        ConfigError: Missing file or invalid content.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    return config_from_dict(migrate_backend_fields(_read_yaml(text, str(path))), str(path))


FORMER_BACKEND_FIELDS: dict[str, tuple[str, str]] = {
    "ray_address": ("ray", "address"),
    "ray_num_cpus": ("ray", "num_cpus"),
    "ray_startup_timeout": ("ray", "startup_timeout"),
}
"""Config fields of one backend's settings that became keys of ``backend_options``: field ->
(backend, option). The ``config.yaml`` of a run written before loads
([`load_config`][batchppo.experiment.configs.load_config]); a config file or ``--set`` that
gives one is refused, naming the new spelling."""


def migrate_backend_fields(data: Any) -> Any:
    """A stored config's data with its former backend fields (``FORMER_BACKEND_FIELDS``) moved
    into ``backend_options``: those of its own backend where they differ from the option's
    default; those of other backends dropped, since they meant nothing to it.

    Args:
        data: A ``config.yaml``'s content; anything but a mapping is returned as it is.
    """
    if not isinstance(data, dict) or not FORMER_BACKEND_FIELDS.keys() & data.keys():
        return data
    data = dict(data)
    backend = data.get("backend", RunConfig.backend)
    options = {}
    for field, (owner, option) in FORMER_BACKEND_FIELDS.items():
        if field not in data:
            continue
        value = data.pop(field)
        if owner == backend and value != _option_default(owner, option):
            options[option] = value
    if options:
        data["backend_options"] = {**options, **(data.get("backend_options") or {})}
    return data


def _refuse_former_fields(data: Mapping[str, Any], prefix: str, where: str) -> None:
    """Refuses the former backend fields (``FORMER_BACKEND_FIELDS``) in a config file or
    ``--set``, in one line naming their new spelling.

    Args:
        data: The keys given, with their values.
        prefix: What the message starts with (the file's name).
        where: ``"file"`` or ``"--set"``: the spelling to show.

    Raises:
        ConfigError: ``data`` gives a former field.
    """
    former = [key for key in data if key in FORMER_BACKEND_FIELDS]
    if not former:
        return
    options = {FORMER_BACKEND_FIELDS[key][1]: data[key] for key in former}
    owners = sorted({FORMER_BACKEND_FIELDS[key][0] for key in former})
    flow = yaml.safe_dump(options, default_flow_style=True, sort_keys=False).strip()
    quote = '"' if "'" in flow else "'"  # the shell's quotes around YAML's own
    spelling = (
        f"--set {quote}backend_options={flow}{quote}"
        if where == "--set"
        else f"backend_options: {flow}"
    )
    keys = ", ".join(f"backend_options.{option}" for option in options)
    owner = " and ".join(owners)
    if len(former) == 1:
        what = f"config key {former[0]!r} is now {keys} (an option of the {owner} backend)"
    else:
        what = f"config keys {former} are now {keys} (options of the {owner} backend)"
    raise ConfigError(f"{prefix}{what}: give {spelling}")


def _option_default(backend: str, option: str) -> Any:
    """The default of the option ``option`` of ``backend``'s record."""
    (field,) = (f for f in dataclasses.fields(get_backend(backend).options) if f.name == option)
    return field.default


# --- Starting recipes -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A preset to start from for an env whose spaces match (``batchppo train --env ID``).

    Attributes:
        kind: What the spaces are, for messages (``"continuous control"``), or a function of
            the spaces ``(observation_space, action_space) -> str`` that says so.
        preset: The preset whose hyperparameters the run takes (its env replaced).
        matches: ``matches(observation_space, action_space)``: whether the recipe fits.
        changes: Fields set on top of the preset (e.g. a host backend for a gymnax preset).
    """

    kind: str
    preset: str
    matches: Any
    changes: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _leaves(space: Any) -> list[Any]:
    """The leaf spaces of a Gymnasium space (``gym_leaves``: Dict and Tuple are walked)."""
    from batchppo.envs.spaces import gym_leaves  # Gymnasium: only when a recipe runs

    return gym_leaves(space)


def _is_vector(obs: Any) -> bool:
    """One Box of rank 0-2: what the networks take flattened into the MLPs, with no encoder."""
    shape = getattr(obs, "shape", None)
    return type(obs).__name__ == "Box" and shape is not None and len(shape) <= 2


def _space_words(space: Any) -> str:
    """A space in a few words for messages: ``Dict``, ``Tuple``, ``Box (5, 5)``,
    ``MultiDiscrete``."""
    name = type(space).__name__
    if name == "Box":
        return f"Box {tuple(space.shape)}"
    return name


def _other_spaces(obs: Any, act: Any) -> str:
    """What the fallback recipes say of the spaces: the spaces themselves."""
    return f"{_space_words(obs)} observations and {_space_words(act)} actions"


def _core_space(space: Any) -> Any:
    """The core's space tree (``from_gymnasium``) of the Gymnasium space of a probe, which passed
    HostEnv's check of its spaces: what the image checks of ``core/spaces.py`` read."""
    from batchppo.backends.host_env import from_gymnasium  # JAX: only when a recipe runs

    return from_gymnasium(space)


def _has_image(obs: Any) -> bool:
    """Whether the Gymnasium space ``obs`` has an image leaf (``has_image`` of
    ``core/spaces.py``)."""
    from batchppo.core import spaces

    return spaces.has_image(_core_space(obs))


NATURE_CNN_MIN_SIDE = 36
"""The smallest image side the Nature CNN takes (8x8/4, 4x4/2 and 3x3/1 valid convolutions)."""


def _has_code_grid(obs: Any) -> bool:
    """Whether an image leaf of the Gymnasium space ``obs`` reads as a grid of codes
    (``is_code_grid`` of ``core/spaces.py``, ``image_encoding=auto``)."""
    from batchppo.core import spaces

    return any(spaces.is_code_grid(leaf) for leaf in spaces.leaves(_core_space(obs)))


def _smallest_image_side(obs: Any) -> int:
    """The shortest height or width over the image leaves of ``obs`` (axes read as ``auto``)."""
    from batchppo.algorithms.common.encoders import hwc_shape  # Flax: only when a recipe runs
    from batchppo.core import spaces

    leaves = spaces.leaves(_core_space(obs))
    sides = [hwc_shape(leaf.shape, "auto")[:2] for leaf in leaves if spaces.is_image(leaf)]
    return min(min(hw) for hw in sides)


def _all_discrete(act: Any) -> bool:
    return all(type(leaf).__name__ == "Discrete" for leaf in _leaves(act))


def _all_box(act: Any) -> bool:
    return all(type(leaf).__name__ == "Box" for leaf in _leaves(act))


RECIPE_BACKEND = "process"
"""The backend of every recipe: a user's env is a Gymnasium env, stepped in worker processes."""
RECIPE_MAX_LENGTH = 1000
"""The episode limit of a recipe whose preset keeps its env's own (``max_length=None``, as the
Atari and MinAtar presets do) when the user's env has no time limit of its own."""

RECIPES: list[Recipe] = [
    Recipe(
        "continuous control (vector observations, Box actions)",
        "cheetah_fast",
        lambda obs, act: _is_vector(obs) and type(act).__name__ == "Box",
    ),
    Recipe(
        "discrete actions (vector observations, Discrete actions)",
        "cartpole_jax",
        lambda obs, act: _is_vector(obs) and type(act).__name__ == "Discrete",
        {"backend": "process"},
    ),
    # Grids of codes (MiniGrid's object/colour/state ids): each cell embedded, then the MLPs;
    # the CartPole recipe's clipped PPO on 8 envs x 128 steps, as rl-zoo's MiniGrid settings.
    Recipe(
        "a grid of codes (an integer image of ids, not pixels: each cell embedded)",
        "cartpole_jax",
        lambda obs, act: _has_code_grid(obs) and _all_discrete(act),
        {
            "backend": "process",
            "network": "feed_forward",
            "num_agents": 8,
            "rollout_length": 128,
            "num_minibatches": 4,
            "learning_rate": 2.5e-4,
            "steps": 100_000,
        },
    ),
    # Pixel observations: the Atari recipe (Nature CNN shared by policy and value) where the
    # images are large enough for it, else the MinAtar recipe (one 3x3 conv). Neither keeps
    # its preset's Atari-only evaluation preprocessing or its gymnax backend.
    Recipe(
        f"image observations ({NATURE_CNN_MIN_SIDE} px or more a side)",
        "breakout_atari",
        lambda obs, act: _has_image(obs) and _smallest_image_side(obs) >= NATURE_CNN_MIN_SIDE,
        {"eval_env_kwargs": {}},
    ),
    Recipe(
        f"small image observations (under {NATURE_CNN_MIN_SIDE} px a side, e.g. grids)",
        "breakout_minatar",
        lambda obs, act: _has_image(obs),
        {"backend": "process"},
    ),
    # Other space trees: the generic network picks an encoder per observation leaf and a head
    # per action leaf; the hyperparameters follow the action leaves' kind.
    Recipe(
        _other_spaces,  # every action leaf a Box
        "cheetah_fast",
        lambda obs, act: _all_box(act),
        {"network": "feed_forward"},
    ),
    Recipe(
        _other_spaces,
        "cartpole_jax",
        lambda obs, act: True,
        {"backend": "process", "network": "feed_forward"},
    ),
]
"""Starting recipes, tried in order; the first that matches the env's spaces is taken."""


FUSED_RECIPES = {
    "brax": "ant_brax",
    "gymnax-discrete": "cartpole_jax",
    "gymnax-box": "pendulum_jax",
    "gymnax-image": "breakout_minatar",
    "jumanji-discrete": "cartpole_jax",
    "jumanji-box": "pendulum_jax",
    "jumanji-image": "breakout_minatar",
}
"""The preset a factory's pure-JAX env starts from, by its API and spaces (``_fused_recipe``)."""

GENERIC_NETWORK = {"network": "feed_forward"}
"""The network of a recipe whose spaces may be trees: an encoder per observation leaf, a head per
action leaf."""


def _fused_recipe(
    env: str, env_kwargs: Mapping[str, Any] | None, env_wrappers: Sequence[Any]
) -> tuple[RunConfig, str] | None:
    """The recipe of a ``module:factory`` whose env has a pure-JAX API, run on its fused
    backend (``batchppo.backends.factories``); None for any other env (a Gymnasium one)."""
    from batchppo.backends.factories import call_factory, jax_api
    from batchppo.core.pure_env import RESTART_OPTIONS

    # The adapters' own restart options are not the factory's keywords.
    factory_kwargs = {k: v for k, v in (env_kwargs or {}).items() if k not in RESTART_OPTIONS}
    try:
        product = call_factory(env, factory_kwargs)  # resolves the id first
    except ValueError:
        # A 'module:EnvId' that the module registers, or a factory that fails: the host
        # backends' check names the problem and its fix, with the line that raised.
        return None
    api = jax_api(product)
    if api is None:
        close = getattr(product, "close", None)
        if callable(close):
            close()
        return None
    if env_wrappers:
        raise ConfigError(
            f"env {env!r} returns an env with {api}'s API, which runs fused: env_wrappers wrap "
            "Gymnasium envs; leave them out and wrap the env in its factory"
        )
    if api == "brax":
        key, kind, own = "brax", "Brax's API", {}
    elif api == "jumanji":
        key, kind, own = _jumanji_recipe(env, product)
    else:
        key, kind, own = _gymnax_recipe(env, product)
    changes = {"env": env, "env_kwargs": dict(env_kwargs or {}), "backend": api, **own}
    preset = FUSED_RECIPES[key]
    config = replace_config(get_preset(preset), changes)
    limit = (
        "the env's own time limit ends episodes"
        if config.max_length is None
        else f"max_length={config.max_length} (--set max_length=N)"
    )
    network = (
        f" with network={config.network} (an encoder per observation leaf, a head per action leaf)"
        if "network" in own
        else ""
    )
    message = (
        f"no --config: {env} returns an env with {kind}, so the run is fused on the {api} "
        f"backend from the {preset} recipe{network} ({config.steps:,} steps); {limit}"
    )
    return config, message


def _gymnax_recipe(env: str, product: Any) -> tuple[str, str, dict[str, Any]]:
    """``(recipe key, what the env has, changes)`` of an env with gymnax's API."""
    inner, params = product if isinstance(product, tuple) else (product, None)
    params = inner.default_params if params is None else params
    obs, act = inner.observation_space(params), inner.action_space(params)
    shape = tuple(getattr(obs, "shape", ()))
    discrete = type(act).__name__ == "Discrete"
    if len(shape) == 3 and discrete:
        key = "gymnax-image"
    elif len(shape) == 1:
        key = "gymnax-discrete" if discrete else "gymnax-box"
    else:
        raise ConfigError(
            f"env {env!r}: no starting recipe fits gymnax observation shape {shape} and "
            f"action space {type(act).__name__}: pick a config with --config"
        )
    kind = f"gymnax's API, observations {shape}, {type(act).__name__} actions"
    own = getattr(params, "max_steps_in_episode", None)
    return key, kind, {"max_length": None if own else RECIPE_MAX_LENGTH}


def _jumanji_recipe(env: str, product: Any) -> tuple[str, str, dict[str, Any]]:
    """``(recipe key, what the env has, changes)`` of an env with Jumanji's API: its specs
    read as spaces (``batchppo.backends.jumanji_env.jumanji_spaces``)."""
    from batchppo.backends.jumanji_env import jumanji_spaces  # JAX: only when a recipe runs
    from batchppo.core import spaces

    try:
        obs, act = jumanji_spaces(product, f"env {env!r}")
    except ValueError as error:
        raise ConfigError(str(error)) from error
    if isinstance(act, spaces.Box):
        key, own = "jumanji-box", dict(GENERIC_NETWORK)
    elif spaces.has_image(obs):
        key, own = "jumanji-image", {}
    else:
        key, own = "jumanji-discrete", dict(GENERIC_NETWORK)
    limit = getattr(product, "time_limit", None)
    own["max_length"] = None if isinstance(limit, int) and limit >= 1 else RECIPE_MAX_LENGTH
    words = spaces.describe(obs).replace("'", "")
    kind = f"Jumanji's API, observations {words}, {spaces.describe(act)} actions"
    return key, kind, own


def recipe_for_env(
    env: str, env_kwargs: Mapping[str, Any] | None = None, env_wrappers: Sequence[Any] = ()
) -> tuple[RunConfig, str]:
    """A starting config for ``env`` chosen from its spaces (``RECIPES``).

    The env is built once (``check_env``), inside ``env_wrappers``, to read its spaces and
    time limit. The config
    is the recipe's preset with ``env`` (and ``env_kwargs``); when the env has a time limit of
    its own, ``max_length`` is None (the env's limit ends episodes), otherwise the preset's
    (``RECIPE_MAX_LENGTH`` where the preset has none).

    Returns:
        ``(config, message)``: the message says which recipe was chosen and why, in one line.

    Raises:
        ConfigError: The env fails its start-up check, or no recipe fits its spaces (one
            line naming the spaces and what to do).
    """
    if is_factory_id(env):
        fused = _fused_recipe(env, env_kwargs, env_wrappers)
        if fused is not None:
            return fused
    probe = check_env(
        RunConfig(
            env=env,
            backend=RECIPE_BACKEND,
            env_kwargs=dict(env_kwargs or {}),
            env_wrappers=tuple(env_wrappers),
        )
    )
    obs, act = probe.observation_space, probe.action_space
    for recipe in RECIPES:
        if not recipe.matches(obs, act):
            continue
        base = get_preset(recipe.preset)
        changes = {"env": env, "env_kwargs": dict(env_kwargs or {}), **recipe.changes}
        if probe.time_limit is not None:
            changes["max_length"] = None
            limit = f"the env's own time limit ({probe.time_limit} steps) ends episodes"
        else:
            changes["max_length"] = base.max_length or RECIPE_MAX_LENGTH
            limit = (
                "the env declares no time limit (no max_episode_steps): "
                f"max_length={changes['max_length']} bounds its episodes (--set max_length=N)"
            )
        config = replace_config(base, changes)
        kind = recipe.kind if isinstance(recipe.kind, str) else recipe.kind(obs, act)
        network = (
            f" with network={config.network} (an encoder per observation leaf, a head per "
            "action leaf)"
            if "network" in recipe.changes
            else ""
        )
        message = (
            f"no --config: {env} has {kind}, so the run starts from the "
            f"{recipe.preset} recipe{network} ({config.steps:,} steps); {limit}"
        )
        return config, message
    raise ConfigError(
        f"env {env!r}: no starting recipe fits observation space {obs} and action space {act}: "
        "pick a config with --config (`batchppo list`)"
    )


def describe(name: str, config: RunConfig) -> tuple[str, str, str, str, str]:
    """The cells of a preset's row in ``batchppo list``: name, env, backend, steps (with
    thousands separators) and algorithm."""
    algorithm = algorithm_of(config).name
    return (name, config.env, config.backend, f"{config.steps:,}", algorithm)

"""Named presets, validated ``--set`` overrides and the plain-YAML round trip of a config.

A preset is a :class:`~batchppo.algorithms.ppo.config.PPOConfig` instance. The tasks of the
original Batch PPO keep its hyperparameters (see the fact sheet of the original); the ``*_jax``
presets run gymnax envs fused with the learner and are tuned for speed; the ``*_brax`` presets
need the optional ``brax`` package.

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

from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.core.backends import get_backend
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.fileio import atomic_write_bytes

DEFAULT_PRESET = "pendulum_jax"
"""The preset the README's first command trains: the fastest to a good result."""

_BASE = PPOConfig()


def _preset(**changes: Any) -> PPOConfig:
    return dataclasses.replace(_BASE, **changes)


def _mujoco(env: str, steps: int, **changes: Any) -> PPOConfig:
    # The original's MuJoCo tasks: 1000-step episodes, its defaults otherwise.
    return _preset(
        env=env,
        max_length=1000,
        steps=steps,
        **changes,
    )


def _brax(env: str, steps: int, **changes: Any) -> PPOConfig:
    # Massively parallel on-device simulation: thousands of envs, short rollouts, clipped PPO.
    return _preset(
        env=env,
        backend="brax",
        max_length=1000,
        num_agents=2048,
        rollout_length=16,
        update_epochs=4,
        num_minibatches=32,
        objective="clip",
        learning_rate=3e-4,
        max_grad_norm=1.0,
        discount=0.97,
        gae_lambda=0.95,
        entropy_coef=1e-3,
        policy_layers=(128, 128, 128, 128),
        value_layers=(256, 256, 256, 256, 256),
        activation="tanh",
        init_std=1.0,
        init_mean_factor=0.01,
        steps=steps,
        eval_episodes=128,
        **changes,
    )


# What the modern (clipped) presets share: small tanh networks, GAE 0.95, gradient clipping.
_CLIP: dict[str, Any] = dict(
    objective="clip",
    max_grad_norm=0.5,
    gae_lambda=0.95,
    policy_layers=(64, 64),
    value_layers=(64, 64),
    activation="tanh",
)

# Clipped PPO tuned for Pendulum: 64 envs x 32 steps, 10 epochs x 16 minibatches of 128, lr 1e-3
# annealed to 0 over the budget. An update stops early once a minibatch's KL passes 1.5 x 0.02:
# without that, the policy's std shrinks until each update moves it by a KL of 1-5 and the evals
# swing between -150 and -900, the more the longer the budget. Rewards are scaled by the spread
# of the discounted return. Final evals of pendulum_jax over seeds 0-2 (docs/benchmarks.md):
# -154/-231/-165 at 100k steps, -137/-168/-180 at 400k.
_PENDULUM_CLIP = _preset(
    **_CLIP,
    env="Pendulum-v1",
    backend="gymnax",
    max_length=200,
    num_agents=64,
    rollout_length=32,
    update_epochs=10,
    num_minibatches=16,
    learning_rate=1e-3,
    anneal_lr=True,
    target_kl=0.02,
    reward_scale="return",
    discount=0.9,
    init_std=1.0,
    steps=100_000,
    eval_episodes=16,
)


# Clipped PPO for the MuJoCo locomotion tasks at a 1M-step budget (docs/benchmarks.md): the
# settings of Tianshou's MuJoCo PPO benchmark (many small updates per sample: 10 epochs of
# minibatches of 64 over each 2048-step batch; 64x64 tanh networks; initial std 0.6; value
# loss weight 0.25), over 16 envs in worker processes. Rewards are scaled by the spread of the
# discounted return, which keeps value targets near unit scale; the learning rate anneals over
# the budget.
_LOCOMOTION: dict[str, Any] = dict(
    _CLIP,
    max_length=1000,
    steps=1_000_000,
    num_agents=16,
    rollout_length=128,
    update_epochs=10,
    num_minibatches=32,
    learning_rate=3e-4,
    anneal_lr=True,
    discount=0.99,
    init_std=0.6,
    reward_scale="return",
    value_coef=0.25,
    eval_episodes=16,
)


def _locomotion(env: str, **changes: Any) -> PPOConfig:
    return _preset(**{**_LOCOMOTION, "env": env, **changes})


_LOCOMOTION_PRESETS: dict[str, PPOConfig] = {
    "cheetah_fast": _locomotion("HalfCheetah-v5"),
    "hopper_fast": _locomotion("Hopper-v5"),
    "walker_fast": _locomotion("Walker2d-v5"),
    # Ant-v5 observes 78 contact-force terms by default; Ant-v4 did not, and under MuJoCo >= 2
    # the v2/v3 ones were all zero (openai/gym#1541), so the peers' Ant figures were learned
    # without them. Without them Ant learns faster (docs/benchmarks.md section 4).
    "ant_fast": _locomotion("Ant-v5", env_kwargs={"include_cfrc_ext_in_observation": False}),
    "humanoid_fast": _locomotion("Humanoid-v5"),
    "reacher_fast": _locomotion("Reacher-v5", max_length=50),
}


PRESETS: dict[str, PPOConfig] = {
    # --- Pure JAX (gymnax): env and learner in one compiled program. ------------------------
    "pendulum_jax": _PENDULUM_CLIP,
    "cartpole_jax": _preset(
        **_CLIP,
        env="CartPole-v1",
        backend="gymnax",
        max_length=500,
        normalize_ranges=False,
        network="feed_forward_categorical",
        num_agents=16,
        rollout_length=64,
        update_epochs=4,
        num_minibatches=4,
        learning_rate=1e-3,
        discount=0.99,
        init_mean_factor=0.01,
        steps=300_000,
        eval_episodes=16,
    ),
    # --- The original's tasks (Gymnasium envs in worker processes). -------------------------
    # batch_size 20 sequences of chunk_length 50 out of 30 episodes x 200 steps: 6 minibatches.
    "pendulum": _preset(
        env="Pendulum-v1", max_length=200, steps=1_000_000, chunk_length=50, num_minibatches=6
    ),
    "cartpole": _preset(
        env="CartPole-v1",
        max_length=500,
        steps=200_000,
        network="feed_forward_categorical",
        normalize_ranges=False,
    ),
    # --- Clipped PPO on Gymnasium envs in processes: the fastest host presets. ---------------
    "pendulum_fast": dataclasses.replace(_PENDULUM_CLIP, backend="process"),
    **_LOCOMOTION_PRESETS,
    "reacher": _mujoco("Reacher-v5", 5_000_000, discount=0.985, update_every=60),
    "cheetah": _mujoco("HalfCheetah-v5", 10_000_000, discount=0.99),
    "walker": _mujoco("Walker2d-v5", 10_000_000),
    "hopper": _mujoco("Hopper-v5", 10_000_000, update_every=60),
    "ant": _mujoco("Ant-v5", 20_000_000),
    "humanoid": _mujoco("Humanoid-v5", 50_000_000, update_every=60),
    # --- Brax (optional extra): locomotion simulated on the accelerator. --------------------
    "ant_brax": _brax("ant", 50_000_000),
    "cheetah_brax": _brax("halfcheetah", 50_000_000),
    "humanoid_brax": _brax("humanoid", 50_000_000),
}


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


def get_preset(name: str) -> PPOConfig:
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
def field_types() -> dict[str, Any]:
    """The resolved type annotation of every :class:`PPOConfig` field, by name."""
    hints = typing.get_type_hints(PPOConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(PPOConfig)}


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


def _unknown_key(key: str) -> ConfigError:
    names = list(field_types())
    return ConfigError(
        f"unknown config key {key!r}.{_suggest(key, names)} Allowed keys: {', '.join(names)}"
    )


def coerce_field(key: str, value: Any) -> Any:
    """Checks and converts one value for the field ``key``.

    Raises:
        ConfigError: Unknown key (lists the allowed keys) or a value of the wrong type (names
            the expected type and the given value).
    """
    types_ = field_types()
    if key not in types_:
        raise _unknown_key(key)
    try:
        return _coerce(value, types_[key])
    except TypeError:
        raise ConfigError(
            f"config key {key!r} expects {type_name(types_[key])}, got {value!r}"
        ) from None


def parse_override(text: str) -> tuple[str, Any]:
    """Parses ``KEY=VALUE`` (VALUE read as YAML, then checked against the field's type).

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
    return key, coerce_field(key, value)


def replace_config(config: PPOConfig, changes: Mapping[str, Any]) -> PPOConfig:
    """``dataclasses.replace`` that reports invalid combinations as :class:`ConfigError`."""
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as error:
        raise ConfigError(f"invalid config: {error}") from None


def apply_overrides(config: PPOConfig, overrides: Iterable[str]) -> PPOConfig:
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
    changes = dict(parse_override(text) for text in overrides)
    return replace_config(config, changes)


# --- Plain YAML round trip ------------------------------------------------------------------


def config_to_dict(config: PPOConfig) -> dict[str, Any]:
    """The config as plain data (tuples become lists), in field order."""
    return {
        k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()
    }


def config_from_dict(data: Any, source: str = "config") -> PPOConfig:
    """Builds a config from plain data, checking every key and type.

    Raises:
        ConfigError: Not a mapping, unknown keys, or values of the wrong type.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of config keys, got {type(data).__name__}")
    names = field_types()
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(
            f"{source}: unknown config keys {unknown}. Allowed keys: {', '.join(names)}"
        )
    try:
        changes = {k: coerce_field(k, v) for k, v in data.items()}
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    try:
        return PPOConfig(**changes)
    except ValueError as error:
        raise ConfigError(f"{source}: invalid config: {error}") from None


def config_to_yaml(config: PPOConfig) -> str:
    """Serialises ``config`` to plain YAML (``yaml.safe_dump``; no Python objects)."""
    return yaml.safe_dump(config_to_dict(config), sort_keys=False)


def config_from_yaml(text: str, source: str = "config") -> PPOConfig:
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


def save_config(config: PPOConfig, path: str | Path) -> None:
    """Writes ``config`` as YAML to ``path``."""
    atomic_write_bytes(path, config_to_yaml(config).encode())


def load_config(path: str | Path) -> PPOConfig:
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
        "ray_address",
        "ray_num_cpus",
        "ray_startup_timeout",
    }
)
"""Fields a resumed run may change freely: they affect bookkeeping, speed or how env faults
are handled, not what is learned."""


def check_resume_overrides(stored: PPOConfig, changes: Mapping[str, Any]) -> PPOConfig:
    """Applies overrides given when resuming, refusing those that change the run's meaning.

    ``steps`` may be raised (not lowered; and not when the learning rate anneals over it);
    bookkeeping fields in :data:`RESUME_MUTABLE` may change; anything else that differs from
    the stored config is refused.

    Raises:
        ConfigError: Naming the refused keys.
    """
    refused = []
    for key, value in changes.items():
        if getattr(stored, key) == value or key in RESUME_MUTABLE:
            continue
        if key == "steps" and value > stored.steps and not stored.anneal_lr:
            continue
        refused.append(f"{key}={value!r} (stored {getattr(stored, key)!r})")
    if refused:
        raise ConfigError(
            "cannot change a resumed run's meaning: "
            + ", ".join(refused)
            + ". Only raising `steps` (without anneal_lr) and "
            + ", ".join(sorted(RESUME_MUTABLE))
            + " are allowed; start a new run (another --timestamp) instead"
        )
    return replace_config(stored, changes)


# --- Env ids --------------------------------------------------------------------------------


def check_env_id(config: PPOConfig) -> None:
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


def describe(name: str, config: PPOConfig) -> str:
    """One line for ``batchppo list``."""
    return f"{name:<14} {config.env:<16} {config.backend:<8} {config.steps:>12,}"

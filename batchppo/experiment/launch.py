"""The set-up of a train call: its config (a preset, a recipe for an env, overrides) and env."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import algorithm_of
from batchppo.experiment import configs
from batchppo.experiment.errors import ConfigError

EnvArg = str | Callable[..., Any]
"""An env for :func:`~batchppo.experiment.loop.train`: an env id (``"Pendulum-v1"``,
``"module:EnvId"``, ``"module:factory"``) or a factory (a callable returning a
``gymnasium.Env``)."""


def env_id_of(env: EnvArg) -> str:
    """The env id a run records for ``env``: the id itself, or a factory's
    ``"module:qualname"`` (:func:`batchppo.envs.make.factory_env_id`).

    Raises:
        ConfigError: A factory that cannot be recorded (a lambda, a nested function, a
            function of a script run as a file), naming the fix.
    """
    if isinstance(env, str):
        return env
    from batchppo.envs.make import factory_env_id

    try:
        return factory_env_id(env)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def resolve_config(
    config: RunConfig | str | None,
    name: str | None,
    overrides: Sequence[str],
    env: EnvArg | None = None,
) -> tuple[RunConfig, str, dict[str, Any]]:
    """The config, run name and explicit changes of a train call.

    Args:
        config: A config, a preset name, or None for a recipe chosen from ``env``'s spaces.
        name: The run dir's suffix; None: the preset's (the env's for a recipe), or ``custom``.
        overrides: ``KEY=VALUE`` strings.
        env: The env replacing the config's.

    Returns:
        ``(config, name, changes)``: the config with the changes applied, the run's name, and
        the changes (``env`` included) that a resume checks.

    Raises:
        ConfigError: Neither a config nor an env, an unknown preset, a bad override.
    """
    if config is None:
        if env is None:
            raise ConfigError("train: give a config (a preset name or a config), or an env")
        # The env is built with the env_kwargs of the overrides to read its spaces.
        env_kwargs = dict(configs.parse_override(o) for o in overrides).get("env_kwargs")
        config, message = configs.recipe_for_env(env_id_of(env), env_kwargs)
        print(f"batchppo: {message}", file=sys.stderr, flush=True)
        name = name or config.env.rpartition(":")[2]
    elif isinstance(config, str):
        name, config = name or config, configs.get_preset(config)
    else:
        algorithm_of(config)  # a TypeError naming the config classes, for anything else
    changes = dict(configs.parse_override(o, type(config)) for o in overrides)
    if env is not None:
        changes = {"env": env_id_of(env), **changes}
    return configs.replace_config(config, changes), name or "custom", changes

"""The algorithms: one [`Algorithm`][batchppo.algorithms.registry.Algorithm] record each, in the
registry [`ALGORITHMS`][batchppo.algorithms.registry.ALGORITHMS].

The experiment layer (loop, checkpoints, resume rules, visualize, plot, presets, config
files) and the CLI know an algorithm only through its record: the config class it is
configured by, the trainer it is trained by, its presets and the train metrics it reports.
A run's ``config.yaml`` names its algorithm (``algorithm: ppo``); files written before that
field existed are PPO runs.

A record points at the algorithm's trainer through a lazy reference, so this module imports
nothing heavy (no JAX): the config classes and preset tables it imports are plain data.
Adding an algorithm is one package under ``batchppo/algorithms/`` plus one record here
(docs/new_algorithm.md). A user's package adds one without any import by its user through an
entry point of the group ``batchppo.algorithms`` (a
[`Registry`][batchppo.core.registry.Registry]'s): one naming a module that registers records,
an ``Algorithm`` record or a callable returning records; its presets then train from the
command line (``--config mypreset``), and config files naming it (``algorithm: mine``) load.

Examples:
    >>> get_algorithm("ppo").config.__name__
    'PPOConfig'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from batchppo.algorithms.a2c import config as a2c_config
from batchppo.algorithms.a2c import presets as a2c_presets
from batchppo.algorithms.ppo import config as ppo_config
from batchppo.algorithms.ppo import presets as ppo_presets
from batchppo.algorithms.run_config import RunConfig
from batchppo.core.registry import Registry, lazy

DEFAULT_ALGORITHM = "ppo"
"""The algorithm of a ``config.yaml`` that names none (written before the field existed)."""


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """What the experiment layer knows of one algorithm.

    Attributes:
        name: The ``algorithm`` value of a ``config.yaml``.
        title: Its name in prose, for messages and ``batchppo list``.
        config: Its config class, a frozen dataclass that subclasses
            [`RunConfig`][batchppo.algorithms.run_config.RunConfig].
        presets: Its presets, by name.
        trainer: ``config -> trainer``, the object the experiment's driver iterates (see
            ``batchppo.experiment.run.training.TrainerLike``).
        seeds_trainer: ``(config, num_seeds) -> trainer`` over stacked states, for
            ``--seeds``; None where the algorithm trains seeds as separate runs only.
        metrics: The train metrics each iteration reports besides
            ``batchppo.experiment.run.training.EPISODE_METRICS`` (and what the env reports:
            ``env_restarts``, and ``games`` and ``game_score`` over Atari envs).
        member_fields: The config fields whose values members of one ``seeds_trainer``
            program may each have their own of (``batchppo tune --batch``): they change no
            shape and no code path, but for an optional one being None or not.
        members: ``(member configs) -> members``, an object whose ``attach(state,
            fresh=False)`` gives the members' stacked state their values of
            ``member_fields`` and whose ``detach(state)`` makes one member's part a run's
            state again; None where the algorithm carries no such values (``--batch 1`` only).
    """

    name: str
    title: str
    config: type
    presets: Mapping[str, Any]
    trainer: Callable[[Any], Any]
    seeds_trainer: Callable[[Any, int], Any] | None = None
    metrics: tuple[str, ...] = ()
    member_fields: tuple[str, ...] = ()
    members: Callable[[Any], Any] | None = None


def _check_joins(algorithm: Algorithm) -> None:
    """Refuses a record that the lookups by config class and by preset name could not tell
    from a registered one (``ALGORITHMS``' check)."""
    name = algorithm.name
    if not (isinstance(algorithm.config, type) and issubclass(algorithm.config, RunConfig)):
        raise ValueError(f"algorithm {name!r}: its config must be a subclass of RunConfig")
    for other in ALGORITHMS.registered().values():
        if other.config is algorithm.config:
            raise ValueError(
                f"algorithm {name!r}: config class {algorithm.config.__name__} belongs to "
                f"algorithm {other.name!r} already; give it a class of its own (a subclass "
                "will do)"
            )
        taken = sorted(set(algorithm.presets) & set(other.presets))
        if taken:
            raise ValueError(
                f"algorithm {name!r}: preset names {taken} belong to algorithm "
                f"{other.name!r} already; rename them"
            )


ALGORITHMS: Registry[Algorithm] = Registry(
    "algorithm", Algorithm, group="batchppo.algorithms", check=_check_joins
)
"""The algorithms by name, in registration order: the built-ins, then those of the entry
points of ``batchppo.algorithms``."""


def register(algorithm: Algorithm) -> Algorithm:
    """Adds ``algorithm`` to [`ALGORITHMS`][batchppo.algorithms.registry.ALGORITHMS].

    Raises:
        ValueError: A record of that name, config class or preset name exists already, or its
            config class is no ``RunConfig``.
    """
    return ALGORITHMS.register(algorithm)


def get_algorithm(name: str) -> Algorithm:
    """The record of algorithm ``name`` (the entry points loaded first if it is not
    registered).

    Raises:
        ValueError: Unknown name, in one line with a close match and the known names.
    """
    return ALGORITHMS.lookup(name)


def algorithm_of(config: Any) -> Algorithm:
    """The record whose config class ``config`` is an instance of.

    Raises:
        TypeError: ``config`` is no algorithm's config, naming the config classes.
    """
    for algorithm in ALGORITHMS.values():
        if type(config) is algorithm.config:
            return algorithm
    classes = ", ".join(a.config.__name__ for a in ALGORITHMS.values())
    raise TypeError(
        f"config must be one of {classes} (or a preset name), got {type(config).__name__}"
    )


register(
    Algorithm(
        name="ppo",
        title="PPO",
        config=ppo_config.PPOConfig,
        presets=ppo_presets.PRESETS,
        trainer=lazy("batchppo.algorithms.ppo.ppo:Trainer"),
        seeds_trainer=lazy("batchppo.algorithms.ppo.ppo:SeedsTrainer"),
        metrics=ppo_config.METRICS,
        member_fields=ppo_config.MEMBER_FIELDS,
        members=lazy("batchppo.algorithms.ppo.hparams:Members"),
    )
)
register(
    Algorithm(
        name="a2c",
        title="A2C",
        config=a2c_config.A2CConfig,
        presets=a2c_presets.PRESETS,
        trainer=lazy("batchppo.algorithms.a2c.a2c:Trainer"),
        seeds_trainer=lazy("batchppo.algorithms.a2c.a2c:SeedsTrainer"),
        metrics=a2c_config.METRICS,
    )
)

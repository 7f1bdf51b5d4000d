"""The set-up of a train call, one run's and ``--seeds``' alike (``launch``).

Its config (a preset, a recipe for an env, overrides, the env), the env check, the run dirs under
their locks and the trainer; then the driver trains (``batchppo.experiment.driver``). What differs
between one run and several seeds is a ``RunLayout``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import algorithm_of
from batchppo.experiment import configs, trainers
from batchppo.experiment.callbacks import Callback
from batchppo.experiment.driver import SingleRun, drive
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.ledger import TrainResult
from batchppo.experiment.rundir import prepare_run_dir
from batchppo.experiment.trainers import TrainerFactory, TrainerLike

EnvArg = str | Callable[..., Any]
"""An env for [`train`][batchppo.experiment.training.train]: an env id (``"Pendulum-v1"``,
``"module:EnvId"``, ``"module:factory"``) or a factory (a callable returning a
``gymnasium.Env``)."""


def env_id_of(env: EnvArg) -> str:
    """The env id a run records for ``env``: the id itself, or a factory's ``"module:qualname"``
    (``batchppo.envs.make.factory_env_id``).

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
        # The env is built with the env_kwargs and wrappers of the overrides to read its spaces.
        given = dict(configs.parse_override(o) for o in overrides)
        config, message = configs.recipe_for_env(
            env_id_of(env), given.get("env_kwargs"), given.get("env_wrappers", ())
        )
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


@dataclasses.dataclass(frozen=True)
class TrainCall:
    """What a train call asks its set-up (``launch``) for, one run's and ``--seeds``' alike: the
    arguments of [`train`][batchppo.experiment.training.train] that do not pick the kind of run
    (its ``RunLayout``).

    Attributes:
        config: A config, a preset name, or None for a recipe chosen from ``env``'s spaces.
        logdir: Parent directory of runs; None: no disk I/O.
        name: The run dir's suffix (before a seed's ``-s<i>``); None: the preset's or the env's.
        timestamp: The run dirs' prefix; existing dirs resume. None: now.
        overrides: ``KEY=VALUE`` strings.
        progress: The first run's progress output.
        resume: The run dirs must exist (``--resume``).
        env: The env replacing the config's.
        callbacks: The user's callbacks, called for every run.
    """

    config: RunConfig | str | None
    logdir: str | Path | None
    name: str | None
    timestamp: str | None
    overrides: Sequence[str]
    progress: str
    resume: bool
    env: EnvArg | None
    callbacks: Sequence[Callback]


@dataclasses.dataclass(frozen=True)
class RunDirRequest:
    """The run dirs a train call asks its ``RunLayout`` for.

    Attributes:
        logdir: Parent directory of runs.
        name: The run's name (a dir's suffix, before a seed's ``-s<i>``).
        config: The config of a new run.
        timestamp: The dirs' prefix; existing dirs resume. None: now.
        explicit: When resuming, the explicit changes asked for; None compares ``config`` with the
            stored one (``prepare_run_dir``).
        resume: The dirs must exist (``--resume``).
    """

    logdir: str | Path
    name: str
    config: RunConfig
    timestamp: str | None
    explicit: dict[str, Any] | None
    resume: bool


class RunLayout(Protocol):
    """What a train call's set-up (``launch``) asks of its kind of run: one run, or the seeds of
    ``--seeds``."""

    def check(self, config: RunConfig) -> None:
        """Refuses a config this kind of run cannot train (a ``ConfigError``)."""

    def dir_names(self, name: str) -> list[str]:
        """The run dirs' names after ``<timestamp>-``."""

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """Each ledger's config of a run without a logdir."""

    def prepare(
        self, request: RunDirRequest, locks: contextlib.ExitStack
    ) -> tuple[list[RunConfig], list[Path], bool]:
        """Makes or reopens the run dirs, their locks held in ``locks``: each ledger's
        config and run dir, and whether they were reopened (a resume)."""

    def build(self, config: RunConfig) -> Any:
        """The trainer (built with ``build_trainer``)."""

    def run(
        self,
        trainer: Any,
        run_configs: list[RunConfig],
        run_dirs: list[Any],
        progress: str,
        callbacks: Sequence[Callback],
    ) -> list[TrainResult]:
        """Trains the ledgers with ``trainer`` (``drive``)."""


class SingleRunLayout:
    """One run in ``<logdir>/<timestamp>-<name>/``.

    Args:
        factory: Builds the trainer from the config; None: the algorithm's.
    """

    def __init__(self, factory: TrainerFactory | None) -> None:
        self.factory = factory

    def check(self, config: RunConfig) -> None:
        """Any algorithm's config trains a single run."""

    def dir_names(self, name: str) -> list[str]:
        """The run dir's name: the run's."""
        return [name]

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """The config itself."""
        return [config]

    def prepare(
        self, request: RunDirRequest, locks: contextlib.ExitStack
    ) -> tuple[list[RunConfig], list[Path], bool]:
        """The run dir (``prepare_run_dir``)."""
        r = request
        config, run_dir, resumed = prepare_run_dir(
            r.logdir, r.name, r.config, r.timestamp, r.explicit, resume=r.resume, locks=locks
        )
        return [config], [run_dir], resumed

    def build(self, config: RunConfig) -> TrainerLike:
        """The run's trainer."""
        return trainers.build_trainer(self.factory, config)

    def run(
        self,
        trainer: Any,
        run_configs: list[RunConfig],
        run_dirs: list[Any],
        progress: str,
        callbacks: Sequence[Callback],
    ) -> list[TrainResult]:
        """Trains the run."""
        return drive(SingleRun(trainer), run_configs, run_dirs, progress, callbacks=callbacks)


def _build(layout: RunLayout, config: RunConfig) -> Any:
    """``layout.build(config)``, a network that does not fit the env's spaces (the config's
    ``network``, ``cnn``, or a space no encoder or head takes) made one user error.

    Raises:
        ConfigError: Naming the env, the mismatch and the setting that fits.
    """
    from batchppo.core.spaces import UnsupportedSpaceError

    try:
        return layout.build(config)
    except UnsupportedSpaceError as error:
        raise ConfigError(
            f"env {config.env!r}: the config's network does not fit the env's spaces: {error}; "
            "change it with --set KEY=VALUE"
        ) from error


def launch(layout: RunLayout, call: TrainCall) -> list[TrainResult]:
    """The set-up of a train call, for one run and for ``--seeds`` alike, then its training.

    Resolves the config, checks the env before a run dir is made for it (a resume checks the
    stored config's), makes or reopens the run dirs under their locks, builds the trainer (a
    failed build removes the run dirs it made) and trains (``layout.run``).

    Args:
        layout: One run or several seeds (``SingleRunLayout``, ``SeedsLayout``).
        call: The call's arguments.

    Returns:
        One result per ledger, in order.

    Raises:
        UserError: As [`train`][batchppo.experiment.training.train].
    """
    # With a preset, only the explicit overrides may differ from a resumed run's stored config
    # (the preset itself may have been retuned since); with a config, every differing field.
    # A recipe is a preset too: only the explicit overrides count on resume.
    from_preset = call.config is None or isinstance(call.config, str)
    config, name, changes = resolve_config(call.config, call.name, call.overrides, call.env)
    layout.check(config)
    names = layout.dir_names(name)
    logdir, timestamp = call.logdir, call.timestamp
    if (
        logdir is None
        or timestamp is None
        or not all((Path(logdir) / f"{timestamp}-{dir_name}").exists() for dir_name in names)
    ):
        # Before a run dir is made for it (a resume checks its own).
        images = configs.describe_images(config, configs.check_env(config))
        if images is not None:
            print(f"batchppo: {images}", file=sys.stderr, flush=True)
    resumed = False
    with contextlib.ExitStack() as locks:
        if logdir is None:
            run_configs, run_dirs = layout.configs(config), [None] * len(names)
        else:
            explicit = changes if from_preset else None
            request = RunDirRequest(logdir, name, config, timestamp, explicit, call.resume)
            run_configs, run_dirs, resumed = layout.prepare(request, locks)
            if resumed:
                configs.check_env(run_configs[0])
        try:
            trainer = _build(layout, run_configs[0])
        except BaseException:
            if not resumed:  # a failed start leaves no run dir behind
                for run_dir in run_dirs:
                    if run_dir is not None:
                        shutil.rmtree(run_dir, ignore_errors=True)
            raise
        try:
            return layout.run(trainer, run_configs, run_dirs, call.progress, call.callbacks)
        finally:
            trainer.close()

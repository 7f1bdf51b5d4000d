"""The set-up of a train call, one run's and ``--seeds``' alike (``launch``).

Its config (a preset, a recipe for an env, overrides, the env), the env check, the run dirs under
their locks and the trainer; then the driver trains (``batchppo.experiment.run.driver``). What
differs between one run and several seeds is the call's run set
(``batchppo.experiment.run.run_set``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.artifacts.checkpoint import checkpoint_path
from batchppo.experiment.artifacts.loading import load_run
from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR
from batchppo.experiment.config import configs, env_checks, recipes
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run.callbacks import Callback, RunCallbacks, RunInfo
from batchppo.experiment.run.driver import drive
from batchppo.experiment.run.ledger import TrainResult, complete_result
from batchppo.experiment.run.run_set import RunDirRequest, RunSet
from batchppo.experiment.trainers import TrainerFactory

EnvArg = str | Callable[..., Any]
"""An env for [`train`][batchppo.experiment.run.training.train]: an env id (``"Pendulum-v1"``,
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


def config_from_arguments(
    config: RunConfig | str | None,
    name: str | None,
    overrides: Sequence[str],
    env: EnvArg | None = None,
) -> tuple[RunConfig, str, dict[str, Any]]:
    """The config a train call trains, its run name and its explicit changes: the preset, the
    recipe chosen from the env's spaces or the config given, with the overrides and the env applied.

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
        config, message = recipes.recipe_for_env(
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
    arguments of [`train`][batchppo.experiment.run.training.train] that do not pick the kind of run
    (its ``RunSet``).

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


def _build(run_set: RunSet, config: RunConfig) -> Any:
    """``run_set.build(config)``, a network that does not fit the env's spaces (the config's
    ``network``, ``cnn``, or a space no encoder or head takes) made one user error.

    Raises:
        ConfigError: Naming the env, the mismatch and the setting that fits.
    """
    from batchppo.core.spaces import UnsupportedSpaceError

    try:
        return run_set.build(config)
    except UnsupportedSpaceError as error:
        raise ConfigError(
            f"env {config.env!r}: the config's network does not fit the env's spaces: {error}; "
            "change it with --set KEY=VALUE"
        ) from error


def _complete_runs(
    run_set: RunSet, call: TrainCall, run_configs: Sequence[RunConfig], run_dirs: Sequence[Path]
) -> list[TrainResult] | None:
    """The results of resumed runs that are all complete already (``complete_result``), each
    named in one line and its callbacks called at its start and end; None where one has steps
    left. Nothing is built or compiled: a result's ``train_state`` loads when read.
    """
    factory = run_set.run_factory()
    results = []
    for config, run_dir in zip(run_configs, run_dirs, strict=True):
        restore = functools.partial(_final_state, run_dir, factory)
        result = complete_result(config, run_dir, restore)
        if result is None:
            return None
        results.append(result)
    if call.progress != "none":
        for result in results:
            print(_complete_line(result), flush=True)
    runs = [
        RunCallbacks(call.callbacks, RunInfo(i, r.run_dir, r.config)) for i, r in enumerate(results)
    ]
    for callbacks, result in zip(runs, results, strict=True):
        callbacks.train_start(result.step)
    for callbacks, result in zip(runs, results, strict=True):
        callbacks.train_end(result)
    return results


def _final_state(run_dir: Path, factory: TrainerFactory | None, step: int) -> Any:
    """The train state of ``run_dir``'s checkpoint at ``step`` (``load_run``)."""
    _, trainer, state, _ = load_run(run_dir, step, factory)
    trainer.close()
    return state


def _complete_line(result: TrainResult) -> str:
    """The line that says a resumed run is complete already: its steps, its final checkpoint
    and how it trains on."""
    config = result.config
    try:
        config.extend(config.steps + 1)
        more = "to train on, raise steps (--set steps=N)"
    except ValueError as error:  # a schedule that leaves nothing to train past the budget
        more = f"{error}: to train longer, start a new run (another --timestamp)"
    checkpoint = checkpoint_path(result.run_dir / CHECKPOINT_DIR, result.step)
    return (
        f"run already complete at step {result.step:,} (steps={config.steps:,}), nothing to "
        f"train; final checkpoint {checkpoint}; {more}"
    )


def launch(run_set: RunSet, call: TrainCall) -> list[TrainResult]:
    """The set-up of a train call, for one run and for ``--seeds`` alike, then its training.

    Resolves the config, checks the env before a run dir is made for it (a resume checks the
    stored config's), makes or reopens the run dirs under their locks, builds the trainer (a
    failed build removes the run dirs it made) and trains (``drive``). Reopened runs that are
    complete already return before the env check and the build (``_complete_runs``).

    Args:
        run_set: One run or several seeds (``SingleRun``, ``StackedSeeds``).
        call: The call's arguments.

    Returns:
        One result per ledger, in order.

    Raises:
        UserError: As [`train`][batchppo.experiment.run.training.train].
    """
    # With a preset, only the explicit overrides may differ from a resumed run's stored config
    # (the preset itself may have been retuned since); with a config, every differing field.
    # A recipe is a preset too: only the explicit overrides count on resume.
    from_preset = call.config is None or isinstance(call.config, str)
    config, name, changes = config_from_arguments(call.config, call.name, call.overrides, call.env)
    run_set.check(config)
    names = run_set.dir_names(name)
    logdir, timestamp = call.logdir, call.timestamp
    if (
        logdir is None
        or timestamp is None
        or not all((Path(logdir) / f"{timestamp}-{dir_name}").exists() for dir_name in names)
    ):
        # Before a run dir is made for it (a resume checks its own).
        probe = env_checks.check_env(config)
        for line in (
            env_checks.describe_images(config, probe),
            env_checks.describe_action_mask(config, probe),
        ):
            if line is not None:
                print(f"batchppo: {line}", file=sys.stderr, flush=True)
    resumed = False
    with contextlib.ExitStack() as locks:
        if logdir is None:
            run_configs, run_dirs = run_set.configs(config), [None] * len(names)
        else:
            explicit = changes if from_preset else None
            request = RunDirRequest(logdir, name, config, timestamp, explicit, call.resume)
            run_configs, run_dirs, resumed = run_set.prepare(request, locks)
            if resumed:
                complete = _complete_runs(run_set, call, run_configs, run_dirs)
                if complete is not None:
                    return complete
                env_checks.check_env(run_configs[0])
        try:
            trainer = _build(run_set, run_configs[0])
        except BaseException:
            if not resumed:  # a failed start leaves no run dir behind
                for run_dir in run_dirs:
                    if run_dir is not None:
                        shutil.rmtree(run_dir, ignore_errors=True)
            raise
        try:
            return drive(
                run_set, trainer, run_configs, run_dirs, call.progress, callbacks=call.callbacks
            )
        finally:
            trainer.close()

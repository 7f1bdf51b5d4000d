"""``batchppo tune``: hyperparameter search with Optuna (the ``tune`` extra), as
rl-baselines3-zoo's ``train.py --optimize`` (TPE sampler, median pruner, a storage and a study
name) with several seeds per trial, as CleanRL's ``Tuner``.

[`tune`][batchppo.experiment.tune.tune] runs a study: each trial takes values from a search
space of the config's own keys (``batchppo.experiment.tune.space``), trains ``K`` seeds of the
config with them into ordinary run dirs under ``STUDY/trials/<number>/``, and scores them by the
IQM of their final evaluations or by the steps they take to a score
(``batchppo.experiment.tune.objective``); the periodic evaluations go to the pruner. The study
lives in an Optuna storage (``sqlite:///STUDY/study.db`` by default), which a rerun resumes and
several processes share (``batchppo.experiment.tune.study``); ``best.yaml``, ``history.png``
and ``importances.png`` are written to the study dir after each call
(``batchppo.experiment.tune.results``). With ``batch`` above 1 the trials are asked that many
at a time and trained as one compiled program (``batchppo.experiment.tune.batch``). The guide
is ``docs/tune.md``.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError, UserError
from batchppo.experiment.tune.batch import BatchRunner, check_batch
from batchppo.experiment.tune.objective import Objective, parse_objective
from batchppo.experiment.tune.results import (
    format_value,
    retries,
    trial_note,
    trial_rows,
    write_best,
    write_plots,
)
from batchppo.experiment.tune.space import SearchSpace, parse_space, read_space
from batchppo.experiment.tune.study import (
    DEFAULT_DB,
    SETTINGS_ATTR,
    check_settings,
    import_optuna,
    open_storage,
    plain,
    quiet_experimental,
    recover_trials,
    storage_url,
    stored_settings,
    study_names,
)
from batchppo.experiment.tune.trials import (
    InvalidTrialError,
    StudyStoppedError,
    TrialProgress,
    TrialRunner,
)

__all__ = ["PRUNERS", "TuneResult", "show", "summary_line", "tune"]

PRUNERS = ("median", "halving", "none")
"""``--pruner``: Optuna's ``MedianPruner`` (after ``MEDIAN_STARTUP_TRIALS`` trials, past the
first third of a run's steps), ``SuccessiveHalvingPruner``, or none."""
MEDIAN_STARTUP_TRIALS = 5
DEFAULT_SEEDS = 3
DEFAULT_HEARTBEAT_S = 60


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """What [`tune`][batchppo.experiment.tune.tune] did.

    Attributes:
        study: The Optuna study.
        ran: The trials this call ran to an end (complete, pruned or failed).
        recovered: The trials of ended processes this call failed and queued again.
        best: ``best.yaml``; None before a trial completed.
        lines: What the call wrote besides, one line each (the plots).
        stopped: The signal that stopped the study (Ctrl-C, SIGTERM); None.
        what: The objective in words.
    """

    study: Any
    ran: int
    recovered: list[int]
    best: Path | None
    lines: list[str]
    stopped: int | None
    what: str


@dataclasses.dataclass(frozen=True)
class _Settings:
    """A study's settings: what its trials train and how they are scored."""

    name: str
    config: RunConfig
    space: SearchSpace
    seeds: int
    objective: Objective

    def record(self) -> dict[str, Any]:
        """As the study records them (``SETTINGS_ATTR``)."""
        return plain(
            {
                "name": self.name,
                "config": configs.config_to_dict(self.config),
                "space": dict(self.space.data),
                "seeds": self.seeds,
                "objective": self.objective.spec,
            }
        )


def tune(
    config: RunConfig | str | None,
    space: str | Path | Mapping[str, Any] | None,
    trials: int,
    study_dir: str | Path,
    *,
    seeds: int | None = None,
    overrides: Sequence[str] = (),
    storage: str | None = None,
    study_name: str | None = None,
    objective: str | None = None,
    pruner: str = "median",
    sampler_seed: int | None = None,
    heartbeat: int | None = DEFAULT_HEARTBEAT_S,
    progress: str = "auto",
    batch: int = 1,
) -> TuneResult:
    """Runs (or resumes) a study until ``trials`` of its trials are complete or pruned.

    Args:
        config: A preset name, a config file or a config; None: the study's own (resuming).
        space: A search-space file or its content (``batchppo.experiment.tune.space``);
            None: the study's own.
        trials: The study's trials, complete or pruned, over every call and process.
        study_dir: The study's directory: its trials' run dirs, ``best.yaml``, the plots, and
            its SQLite database unless ``storage`` names another.
        seeds: Seeds per trial (``config.seed + i``); None: the study's, else 3.
        overrides: ``KEY=VALUE`` changes to ``config``.
        storage: An Optuna storage URL or ``journal:PATH``; None: ``sqlite:///STUDY/study.db``.
        study_name: The study's name in the storage; None: the study dir's name.
        objective: ``iqm`` or ``steps-to:VALUE``; None: the study's, else ``iqm``.
        pruner: One of ``PRUNERS``.
        sampler_seed: Seed of the TPE sampler; None: random.
        heartbeat: Seconds between running trials' heartbeats (database storages); None: none.
        progress: ``auto`` (a bar on a terminal, else lines), ``bar``, ``lines`` or ``none``.
        batch: Trials trained at a time as one compiled program, on a fused backend
            (``batchppo.experiment.tune.batch``); 1: one trial after another.

    Returns:
        What the call did.

    Raises:
        UserError: Bad input (one line): the config, the space, the objective, the storage,
            settings that differ from the study's own; or optuna is not installed.
    """
    optuna = import_optuna()
    if trials < 1:
        raise UserError(f"--trials {trials}: must be >= 1")
    if pruner not in PRUNERS:
        raise UserError(f"--pruner {pruner}: choose one of {', '.join(PRUNERS)}")
    if heartbeat is not None and heartbeat < 1:
        raise UserError(f"--heartbeat {heartbeat}: must be >= 1 (seconds)")
    study_dir = Path(study_dir)
    name = study_name or study_dir.resolve().name
    url = storage_url(study_dir, storage)
    given = _Given(config, space, seeds, overrides, objective)
    settings, opened = _settings(given, study_dir, url, name, heartbeat)
    check_batch(batch, settings.config, settings.space)
    study_dir.mkdir(parents=True, exist_ok=True)
    opened = opened or open_storage(url, heartbeat)
    with quiet_experimental():
        study = optuna.create_study(
            storage=opened, study_name=name, direction=settings.objective.direction,
            sampler=optuna.samplers.TPESampler(seed=sampler_seed),
            pruner=_pruner(pruner, settings.config), load_if_exists=True,
        )  # fmt: skip
    if SETTINGS_ATTR not in study.user_attrs:
        study.set_user_attr(SETTINGS_ATTR, settings.record())
    mode = progress if progress != "auto" else ("bar" if sys.stderr.isatty() else "lines")
    recovered = recover_trials(study, opened)
    retried = retries(study)
    for number in recovered:
        _say(mode, f"trial {number}: its process ended while it ran; failed, and queued again "
             f"as trial {retried[number]}")  # fmt: skip
    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    remaining = trials - len(study.get_trials(deepcopy=False, states=done))
    what = settings.objective.describe(settings.seeds)
    stopped = None
    ran = 0
    if remaining > 0:
        where = _Where(study_dir, opened, mode, batch)
        ran, stopped = _optimize(study, settings, where, trials, remaining)
    best = write_best(study, settings.space, settings.config, study_dir, what)
    return TuneResult(study, ran, recovered, best, write_plots(study, study_dir), stopped, what)


def _say(mode: str, line: str) -> None:
    """Prints a line of the study's progress output (not with ``none``)."""
    if mode != "none":
        print(line, flush=True)


@dataclasses.dataclass(frozen=True)
class _Given:
    """The settings a call gives (None: the study's own), as ``tune``'s arguments."""

    config: RunConfig | str | None
    space: str | Path | Mapping[str, Any] | None
    seeds: int | None
    overrides: Sequence[str]
    objective: str | None


def _settings(
    given: _Given, study_dir: Path, url: str, name: str, heartbeat: int | None
) -> tuple[_Settings, Any]:
    """The study's settings: those given, the study's own for those not given; checked
    against each other and against the study's, before anything is written.

    Returns:
        The settings, and the storage where it was opened to read a study's own (else None).
    """
    config, space, seeds, overrides = given.config, given.space, given.seeds, given.overrides
    if config is not None:
        config, config_name = _config(config, overrides)
    elif overrides:
        raise UserError("--set changes --config: give --config with it")
    data = read_space(space) if isinstance(space, str | Path) else space
    default_db = url == storage_url(study_dir, None)
    opened = stored = None
    if not default_db or (study_dir / DEFAULT_DB).exists():
        opened = open_storage(url, heartbeat)
        stored = stored_settings(opened, name)
    if stored is None and (config is None or data is None):
        raise UserError(f"no study {name!r} in {url}: give --config and --space to start it")
    if config is None:
        config = configs.config_from_dict(stored["config"], f"study {name!r}'s config")
        config_name = stored["name"]
    source = str(space) if isinstance(space, str | Path) else f"study {name!r}'s space"
    settings = _Settings(
        config_name,
        config,
        parse_space(data if data is not None else stored["space"], config, source),
        seeds if seeds is not None else (stored or {}).get("seeds", DEFAULT_SEEDS),
        parse_objective(given.objective or (stored or {}).get("objective", "iqm")),
    )
    if settings.seeds < 1:
        raise UserError(f"--seeds {settings.seeds}: must be >= 1")
    if config.eval_every == 0:
        raise ConfigError(
            "eval_every=0 turns the evaluations off, and a trial is scored by them: leave "
            "eval_every unset (or > 0)"
        )
    if stored is not None:  # the runs' name may differ: it does not change what they learn
        record = {k: v for k, v in settings.record().items() if k != "name"}
        check_settings(stored, record, f"study {name!r} in {url}")
    return settings, opened


def _config(config: RunConfig | str, overrides: Sequence[str]) -> tuple[RunConfig, str]:
    """The config of ``--config`` (a preset, a file) or a config, with the overrides, and its
    runs' name."""
    if isinstance(config, str):
        config, name = configs.resolve_config(config)
    else:
        name = "custom"
    return configs.apply_overrides(config, overrides), name


def _pruner(name: str, config: RunConfig) -> Any:
    """The Optuna pruner of ``--pruner``."""
    optuna = import_optuna()
    if name == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=MEDIAN_STARTUP_TRIALS, n_warmup_steps=config.steps // 3
        )
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where and how a call runs its trials: the study dir, the storage opened, the progress
    output's mode and the trials a round (``--batch``)."""

    study_dir: Path
    storage: Any
    mode: str
    batch: int


def _optimize(
    study: Any, settings: _Settings, where: _Where, trials: int, remaining: int
) -> tuple[int, int | None]:
    """Runs up to ``remaining`` trials, until the study has ``trials`` complete or pruned ones
    (other processes' included: Optuna's ``MaxTrialsCallback``): one after another
    (``study.optimize``), or ``--batch`` at a time (``BatchRunner``).

    Returns:
        The trials run, and the signal that stopped the study (None).
    """
    optuna = import_optuna()
    output = TrialProgress(where.mode, remaining, _best_value(study))
    ran = 0

    def finished(study: Any, trial: Any) -> None:
        nonlocal ran
        ran += 1
        output.finished(trial_line(study, trial), _best_value(study))

    if where.batch > 1:
        batched = BatchRunner(
            settings.config, settings.name, settings.space, settings.seeds, settings.objective,
            where.study_dir, output, where.batch, where.storage,
            lambda trial: finished(study, trial),
        )  # fmt: skip
        try:
            stopped = batched.run(study, trials, remaining)
        finally:
            output.close()
        return ran, stopped
    runner = TrialRunner(
        settings.config, settings.name, settings.space, settings.seeds, settings.objective,
        where.study_dir, output,
    )  # fmt: skip
    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    callbacks = [optuna.study.MaxTrialsCallback(trials, states=done), finished]
    stopped = None
    try:
        study.optimize(runner, n_trials=remaining, catch=(InvalidTrialError,), callbacks=callbacks)
    except StudyStoppedError as error:
        stopped = error.signum
    except KeyboardInterrupt:
        stopped = signal.SIGINT
    finally:
        if runner.stopped is not None:
            ran += 1
            (trial,) = (t for t in study.get_trials() if t.number == runner.stopped)
            output.finished(trial_line(study, trial), _best_value(study))
        output.close()
    return ran, stopped


def _best_value(study: Any) -> float | None:
    """The study's best value; None before a trial completed."""
    try:
        return study.best_value
    except ValueError:
        return None


def trial_line(study: Any, trial: Any) -> str:
    """One line on a finished trial: its state, its value or note, its parameters, its runs."""
    params = ", ".join(f"{k}={format_value(v)}" for k, v in trial.params.items())
    if trial.state.name == "COMPLETE":  # a pruned trial's value is its last report
        best = _best_value(study)
        outcome = f"value {trial.value:.6g} (best {best:.6g})"
    else:
        outcome = trial_note(trial, retries(study)) or "no value"
    where = trial.user_attrs.get("logdir", "")
    return f"trial {trial.number} {trial.state.name}: {outcome}; {params}; {where}".rstrip("; ")


def show(
    study_dir: str | Path, storage: str | None = None, study_name: str | None = None
) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table of a study's trials and its summary lines (``batchppo tune --show``).

    Raises:
        UserError: No such study (the names in the storage listed), or optuna is missing.
    """
    optuna = import_optuna()
    study_dir = Path(study_dir)
    url = storage_url(study_dir, storage)
    name = study_name or study_dir.resolve().name
    if storage is None and not (study_dir / DEFAULT_DB).exists():
        raise UserError(f"--show {study_dir}: no {DEFAULT_DB} there: not a study dir")
    opened = open_storage(url, None)
    names = study_names(opened)
    if name not in names:
        raise UserError(
            f"no study {name!r} in {url}; its studies: {', '.join(names) or 'none'} "
            "(--study-name NAME)"
        )
    study = optuna.load_study(study_name=name, storage=opened)
    stored = study.user_attrs.get(SETTINGS_ATTR) or {}
    keys = tuple(stored.get("space") or {t for trial in study.trials for t in trial.params})
    lines = [f"study {name!r} in {url}: {_states(study)}"]
    best = _best_value(study)
    if best is not None:
        lines.append(f"best: trial {study.best_trial.number}, value {best:.6g}")
    return trial_rows(study, keys), lines


def summary_line(result: TuneResult) -> str:
    """One line on a call's study: its trials by state, and its best trial."""
    study = result.study
    line = f"study {study.study_name!r}: {result.ran} trials run now; {_states(study)}"
    best = _best_value(study)
    if best is None:
        return f"{line}; none complete yet"
    return f"{line}; best trial {study.best_trial.number}: value {best:.6g} ({result.what})"


def _states(study: Any) -> str:
    """``N trials (n complete, m pruned, ...)``."""
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    states = ", ".join(f"{n} {state.lower()}" for state, n in counts.items())
    return f"{sum(counts.values())} trials ({states or 'none'})"

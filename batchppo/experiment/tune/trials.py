"""One trial of ``batchppo tune``: its config, its seeds' runs, its value; and the progress
output of a study's trials.

A trial's runs are ordinary run dirs under ``STUDY/trials/<number>/``, one per seed
(``<timestamp>-<name>-s<i>``), so ``batchppo evaluate``, ``plot`` and TensorBoard read them. On
a fused backend the seeds train in one program (``train(..., seeds=K)``), elsewhere one after
another (single runs of seeds ``seed + i``, each its own ``train`` call).

A stop by Ctrl-C or SIGTERM (the runs' checkpoints saved) fails the trial with a note, queues
its retry with the same parameters, and raises ``StudyStoppedError``; a second Ctrl-C (a
``KeyboardInterrupt`` through the runs) does the same and propagates.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.experiment.artifacts.rundir import make_timestamp
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.tune.objective import Objective, TrialMonitor
from batchppo.experiment.tune.space import SearchSpace
from batchppo.experiment.tune.study import (
    NOTE_ATTR,
    OWNER_ATTR,
    import_optuna,
    owner,
    quiet_experimental,
)

TRIALS_DIR = "trials"


class StudyStoppedError(Exception):
    """A signal (Ctrl-C, SIGTERM) stopped a trial's runs after their checkpoints.

    Args:
        signum: The signal.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class InvalidTrialError(Exception):
    """The config rejects the combination of a trial's values (each passed the space's check
    alone): the trial fails with a note, and the study goes on."""


def trains_stacked(config: RunConfig) -> bool:
    """Whether a trial's seeds train in one program: a fused backend and an algorithm with a
    ``SeedsTrainer``."""
    return get_backend(config.backend).fused and algorithm_of(config).seeds_trainer is not None


@dataclasses.dataclass
class StudyRunner:
    """What a runner of a study's trials knows of the study, the fields every runner starts
    with: ``TrialRunner``'s (one trial at a time) and ``batchppo.experiment.tune.batch``'s
    ``BatchRunner``'s (a batch of trials in one program).

    Attributes:
        config: The config the trials start from.
        name: The runs' name (``<timestamp>-<name>-s<i>``).
        space: The search space.
        seeds: The seeds of each trial (``config.seed + i``).
        objective: The objective.
        study_dir: The study's directory (trials under ``trials/<number>``).
        progress: The study's progress output.
    """

    config: RunConfig
    name: str
    space: SearchSpace
    seeds: int
    objective: Objective
    study_dir: Path
    progress: TrialProgress


@dataclasses.dataclass
class TrialRunner(StudyRunner):
    """The objective function of a study: trains one trial and returns its value. Its fields
    are ``StudyRunner``'s, then ``stopped``."""

    stopped: int | None = None
    """The number of the trial a signal stopped (``_stopped``); None."""

    def __call__(self, trial: Any) -> float:
        """Trains ``trial``'s seeds; its value.

        Raises:
            optuna.TrialPruned: The pruner stopped it.
            InvalidTrialError: The config rejects its combination of values.
            StudyStoppedError: A signal stopped its runs (after a retry is queued).
        """
        optuna = import_optuna()
        config, logdir = begin_trial(trial, self.space, self.config, self.study_dir)
        stacked = trains_stacked(config)
        monitor = TrialMonitor(
            trial, self.objective, self.seeds, config.steps, stacked,
            lambda seed, step, value: self.progress.evaluated(trial.number, seed, step, value),
        )  # fmt: skip
        self.progress.started(trial.number, trial.params)
        try:
            results = self._train(config, logdir, monitor, stacked)
        except KeyboardInterrupt:
            self._stopped(trial, "interrupted by SIGINT (Ctrl-C) before its runs saved")
            raise
        stop = next((r.stop_signal for r in results if r.stop_signal), None)
        if stop is not None:
            which = "" if stacked else f" of seed {len(results) - 1}"
            name = signal.Signals(stop).name
            self._stopped(trial, f"stopped by {name} at step {results[-1].step:,}{which}")
            raise StudyStoppedError(stop)
        value = trial_value(trial, self.objective, results, monitor, config.steps)
        if value is None:
            raise optuna.TrialPruned(monitor.pruned)
        return value

    def _train(
        self, config: RunConfig, logdir: Path, monitor: TrialMonitor, stacked: bool
    ) -> list[Any]:
        """The trial's runs: the seeds in one program, or one after another (until one is
        stopped); their results."""
        from batchppo.experiment.run.training import train

        if stacked:
            return train(
                config, logdir, name=self.name, seeds=self.seeds, progress="none",
                callbacks=[monitor],
            )  # fmt: skip
        timestamp, results = make_timestamp(), []
        for i in range(self.seeds):
            monitor.seed = i
            result = train(
                dataclasses.replace(config, seed=config.seed + i), logdir,
                name=configs.seed_run_name(self.name, i), timestamp=timestamp, progress="none",
                callbacks=[monitor],
            )  # fmt: skip
            results.append(result)
            if result.interrupted:
                break
        return results

    def _stopped(self, trial: Any, how: str) -> None:
        """Notes why ``trial`` stopped and queues its retry (the trial fails as the exception
        in flight leaves the objective)."""
        self.stopped = trial.number
        stop_trial(trial, how)


def begin_trial(
    trial: Any, space: SearchSpace, base: RunConfig, study_dir: Path
) -> tuple[RunConfig, Path]:
    """Starts ``trial``: records its process, its note (a retry's) and its directory, and
    samples its values.

    Returns:
        The trial's config and its directory (``STUDY/trials/<number>``).

    Raises:
        InvalidTrialError: The config rejects the combination of its values (noted).
    """
    retry = frozen_trial(trial).system_attrs.get("failed_trial")
    trial.set_user_attr(OWNER_ATTR, {"trial": trial.number, **owner()})
    trial.set_user_attr(NOTE_ATTR, f"retry of trial {retry}" if retry is not None else "")
    logdir = study_dir / TRIALS_DIR / str(trial.number)
    trial.set_user_attr("logdir", str(logdir))
    space.sample(trial)
    try:
        config = space.config(base, trial.params)
    except ConfigError as error:
        trial.set_user_attr(NOTE_ATTR, f"invalid combination: {error}")
        raise InvalidTrialError(str(error)) from None
    return config, logdir


def trial_value(
    trial: Any, objective: Objective, results: list[Any], monitor: TrialMonitor, steps: int
) -> float | None:
    """The value of a trial whose runs ended (their scores and dirs recorded); None where the
    pruner pruned it (its note recorded)."""
    if monitor.pruned is not None:
        trial.set_user_attr(NOTE_ATTR, monitor.pruned)
        return None
    scores = [float(r.score) for r in results]
    trial.set_user_attr("scores", scores)
    trial.set_user_attr("run_dirs", [str(r.run_dir) for r in results])
    return objective.final(scores, monitor.curves, steps)


def stop_trial(trial: Any, how: str) -> None:
    """Notes why a signal stopped ``trial`` and queues its retry with the same values (the
    caller fails it)."""
    optuna = import_optuna()
    trial.set_user_attr(NOTE_ATTR, how)
    with quiet_experimental():
        optuna.storages.RetryHeartbeatStaleTrialCallback()(trial.study, frozen_trial(trial))


def frozen_trial(trial: Any) -> Any:
    """The ``FrozenTrial`` of a running ``Trial``, as its study's storage holds it now."""
    return next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)


class TrialProgress:
    """The progress output of a study: a tqdm bar of trials with the best value so far (and
    the running trial's last evaluation), or one line per trial, or nothing.

    Args:
        mode: ``bar``, ``lines`` or ``none`` (``auto`` chosen by the caller).
        total: The trials to run.
        best: The study's best value so far (None: none yet).
    """

    def __init__(self, mode: str, total: int, best: float | None) -> None:
        self.mode, self.best = mode, best
        self.bar = None
        if mode == "bar":
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="trial", desc="tune", file=sys.stderr)
            self._postfix("")

    def _postfix(self, running: str) -> None:
        if self.bar is not None:
            best = "-" if self.best is None else f"{self.best:.4g}"
            self.bar.set_postfix_str(f"best {best}{running}", refresh=True)

    def started(self, number: int, params: dict[str, Any]) -> None:
        """A trial starts."""
        self._postfix(f", trial {number} started")

    def evaluated(self, number: int, seed: int, step: int, value: float) -> None:
        """A trial reported ``value`` at ``step`` (of ``seed``, where seeds run apart)."""
        self._postfix(f", trial {number} at step {step:,}: {value:.4g}")

    def finished(self, line: str, best: float | None) -> None:
        """A trial ended: its line, the best value now."""
        self.best = best
        if self.bar is not None:
            self.bar.update(1)
            self._postfix("")
            self.bar.write(line)
        elif self.mode == "lines":
            print(line, flush=True)

    def note(self, line: str) -> None:
        """A line of its own (above the bar; not with ``none``)."""
        if self.bar is not None:
            self.bar.write(line)
        elif self.mode == "lines":
            print(line, flush=True)

    def close(self) -> None:
        """Closes the bar."""
        if self.bar is not None:
            self.bar.close()

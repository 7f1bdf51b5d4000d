"""What a trial of ``batchppo tune`` scores, and the evaluations its pruner sees.

A trial trains ``K`` seeds of one config. Its objective (``parse_objective``):

* ``iqm`` (the default, maximised): the interquartile mean of the seeds' final evaluations
  (``scipy.stats.trim_mean`` with a quarter cut at each end, as ``batchppo evaluate``'s IQM:
  ``batchppo.experiment.analysis.stats``), each measured as the config's ``eval_actions`` and
  ``eval_episodes`` say;
* ``steps-to:VALUE`` (minimised): the first evaluation step at which the mean over the seeds of
  their evaluations reaches ``VALUE``; a trial that never reaches it scores its budget plus one.

Each periodic evaluation goes to the pruner (``TrialMonitor``, a run callback) as an
intermediate value of the same objective at that step: the IQM of the seeds' evaluations at
that step, or for ``steps-to`` the step it was reached at, or ``step + 1`` while it is not (the
least its final value can be). Where the seeds train in one program the value is reported once
all of them evaluated at that step; where they train one after another (host backends), seed
``i``'s evaluation at step ``s`` is reported on its own at step ``i * steps + s``, so that each
seed is compared with the same seed of the other trials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.stats

from batchppo.experiment.analysis.stats import IQM_CUT
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run.callbacks import Callback, RunInfo

IQM = "iqm"
STEPS_TO = "steps-to"


@dataclasses.dataclass(frozen=True)
class Objective:
    """A trial's objective (see the module docstring).

    Attributes:
        target: The score of ``steps-to:VALUE``; None: the IQM of the final evaluations.
    """

    target: float | None = None

    @property
    def spec(self) -> str:
        """The objective as ``--objective`` gives it."""
        return IQM if self.target is None else f"{STEPS_TO}:{self.target:g}"

    @property
    def direction(self) -> str:
        """Optuna's direction: ``maximize`` the IQM, ``minimize`` the steps."""
        return "maximize" if self.target is None else "minimize"

    def describe(self, seeds: int) -> str:
        """The objective in words, for the summary line."""
        if self.target is None:
            return f"IQM of {seeds} seeds' final evaluations"
        return f"first step at which the mean eval score of {seeds} seeds reaches {self.target:g}"

    def at(self, curves: Sequence[Mapping[int, float]], step: int) -> float:
        """The objective of ``curves`` (one ``{step: score}`` per seed) up to ``step``."""
        if self.target is None:
            return float(scipy.stats.trim_mean([c[step] for c in curves], IQM_CUT))
        for s in sorted(set.intersection(*(set(c) for c in curves))):
            if s > step:
                break
            if np.mean([c[s] for c in curves]) >= self.target:
                return float(s)
        return float(step + 1)

    def final(
        self, scores: Sequence[float], curves: Sequence[Mapping[int, float]], steps: int
    ) -> float:
        """The trial's value: of its seeds' final scores, or of their curves up to ``steps``."""
        if self.target is None:
            return float(scipy.stats.trim_mean(list(scores), IQM_CUT))
        return self.at(curves, steps)


def parse_objective(text: str) -> Objective:
    """``iqm`` or ``steps-to:VALUE``.

    Raises:
        ConfigError: Anything else, in one line.
    """
    if text == IQM:
        return Objective()
    kind, colon, value = text.partition(":")
    if kind == STEPS_TO and colon:
        try:
            return Objective(float(value))
        except ValueError:
            pass
    raise ConfigError(
        f"--objective {text}: give {IQM} (the IQM of the seeds' final evaluations) or "
        f"{STEPS_TO}:VALUE (the first step at which their mean eval score reaches VALUE)"
    )


class TrialMonitor(Callback):
    """The callback of a trial's runs: collects every seed's evaluations, reports them to the
    trial's pruner and asks the runs to stop when it prunes (see the module docstring).

    Args:
        trial: The Optuna trial.
        objective: Its objective.
        num_seeds: The seeds of the trial.
        steps: Each run's budget.
        stacked: The seeds train in one program (``RunInfo.index`` is the seed); False: one
            after another (``seed`` says which runs now).
        on_value: Called with the step and the value of each report (progress output).
    """

    def __init__(
        self,
        trial: Any,
        objective: Objective,
        num_seeds: int,
        steps: int,
        stacked: bool,
        on_value: Callable[[int, int, float], None] | None = None,
    ) -> None:
        self.trial, self.objective, self.steps, self.stacked = trial, objective, steps, stacked
        self.curves: list[dict[int, float]] = [{} for _ in range(num_seeds)]
        self.seed = 0
        self.pruned: str | None = None
        self.on_value = on_value

    def on_eval(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool | None:
        """Records the evaluation; reports it (with the other seeds' at ``step`` when they
        train together); False once the pruner prunes the trial."""
        seed = run.index if self.stacked else self.seed
        self.curves[seed][step] = float(metrics["score"])
        if self.stacked:
            if any(step not in curve for curve in self.curves):
                return None
            value, at = self.objective.at(self.curves, step), step
        else:
            value, at = self.objective.at([self.curves[seed]], step), seed * self.steps + step
        if self.on_value is not None:
            self.on_value(seed, step, value)
        self.trial.report(value, at)
        if self.trial.should_prune():
            which = "" if self.stacked else f" of seed {seed}"
            self.pruned = f"pruned at step {step:,}{which} (value {value:.4g})"
            return False
        return None

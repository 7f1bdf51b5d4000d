"""The metric window: a trainer's per-iteration metrics aggregated into one train report."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from batchppo.algorithms.training.episodes import ENDED, EndedEpisodes


def crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of ``every`` lies in ``(before, after]``."""
    return every > 0 and after // every > before // every


RUNNING_TOTALS = frozenset({"env_restarts"})
"""Trainer metrics that are running totals: a train report shows the latest value (not the
window's mean), and a resumed run continues it from the last report it kept."""


EPISODE_METRICS = ("env_steps", "episodes", "score", "length")
"""Metrics every trainer iteration reports: env steps collected, episodes that ended, and
their mean return and length (nan when none ended)."""

GAME_METRICS = ("games", "game_score")
"""Metrics of the trainers over Atari envs: the games that ended (all their lives) and their
mean raw score (nan when none ended), which a train report sums and averages over the games as
it does ``episodes`` and ``score``."""


class MetricWindow:
    """Aggregates the trainer's per-iteration metrics between two train reports.

    Every iteration reports the same metrics (a trainer's set is fixed), the ``EPISODE_METRICS``
    among them; an iteration that lacks one, or reports others than the window's first, raises
    ``ValueError`` naming them, rather than skewing the means. The episodes an iteration lists
    (``ENDED``, where the trainer reports them) wait in the window until the ledger takes them
    for the run's episodes file (``take_ended``).
    """

    def __init__(self) -> None:
        self.keys: frozenset[str] | None = None  # the metrics of the window's first iteration
        self.values: dict[str, list[float]] = {}
        self.totals: dict[str, float] = {}
        self.steps = self.episodes = self.iterations = 0
        self.score_sum = self.length_sum = 0.0
        self.games, self.game_score_sum = 0, 0.0
        self.seconds = self.all_seconds = 0.0
        self.all_steps = 0
        self.ended: list[EndedEpisodes] = []

    def add(self, metrics: Mapping[str, Any], seconds: float, compiling: bool = False) -> None:
        """Adds one iteration; one that compiled counts for speed only if it is alone.

        Args:
            metrics: The iteration's metrics (``Trainer.iteration``).
            seconds: Its wall time.
            compiling: Whether that time includes compiling the iteration.

        Raises:
            ValueError: ``metrics`` lacks one of ``EPISODE_METRICS``, or its metrics differ from
                those of the window's first iteration.
        """
        self._check_keys(metrics)
        self.iterations += 1
        steps = int(metrics["env_steps"])
        self.all_seconds += seconds
        self.all_steps += steps
        if not compiling:
            self.seconds += seconds
            self.steps += steps
        episodes = int(metrics["episodes"])
        if episodes and not math.isnan(float(metrics["score"])):
            self.episodes += episodes
            self.score_sum += episodes * float(metrics["score"])
            self.length_sum += episodes * float(metrics["length"])
        games = int(metrics.get("games", 0))
        if games:
            self.games += games
            self.game_score_sum += games * float(metrics["game_score"])
        if ENDED in metrics:
            self.ended.append(metrics[ENDED])
        for key, value in metrics.items():
            if key == ENDED:
                continue
            if key in RUNNING_TOTALS:
                self.totals[key] = float(value)
            elif key not in EPISODE_METRICS and key not in GAME_METRICS:
                self.values.setdefault(key, []).append(float(value))

    def take_ended(self) -> list[EndedEpisodes]:
        """The episodes listed by the iterations added since the last call, in order."""
        ended, self.ended = self.ended, []
        return ended

    def _check_keys(self, metrics: Mapping[str, Any]) -> None:
        missing = [key for key in EPISODE_METRICS if key not in metrics]
        if missing:
            raise ValueError(
                f"iteration metrics lack {', '.join(map(repr, missing))}: a trainer's "
                f"iteration reports {', '.join(EPISODE_METRICS)} (see TrainerLike)"
            )
        keys = frozenset(metrics)
        if self.keys is None:
            self.keys = keys
        elif keys != self.keys:
            lost, new = sorted(self.keys - keys), sorted(keys - self.keys)
            raise ValueError(
                "iteration metrics changed between iterations "
                f"(missing: {', '.join(lost) or 'none'}; new: {', '.join(new) or 'none'}); "
                "a trainer reports the same metrics every iteration"
            )

    def summary(self) -> dict[str, float]:
        """The train report's values: episode means, speed, the games' count and mean score
        where the iterations report them, metric means, running totals."""
        nan = float("nan")
        out = {
            "score": self.score_sum / self.episodes if self.episodes else nan,
            "length": self.length_sum / self.episodes if self.episodes else nan,
            "episodes": self.episodes,
            "sps": self.steps / self.seconds
            if self.seconds > 0 and self.steps
            else (self.all_steps / self.all_seconds if self.all_seconds > 0 else nan),
        }
        if self.keys is not None and "games" in self.keys:
            out["games"] = self.games
            out["game_score"] = self.game_score_sum / self.games if self.games else nan
        for key, values in self.values.items():
            finite = [v for v in values if not math.isnan(v)]
            out[key] = float(np.mean(finite)) if finite else nan
        out.update(self.totals)
        return out

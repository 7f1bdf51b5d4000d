"""Aggregate statistics over runs, after Agarwal et al. 2021 (rliable's definitions).

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS 2021)
reports, over the runs (seeds) of a group and the tasks it covers:

* **mean**: the mean over tasks of each task's mean score;
* **median**: the median over tasks of each task's mean score (with one task, its mean);
* **IQM**: the interquartile mean, the mean of the middle 50 % of all runs' scores
  (``scipy.stats.trim_mean`` with a quarter cut at each end);
* **optimality gap**: how far the scores fall short of a normalised score of 1 on average,
  ``1 - mean(min(score, 1))``; only for normalised scores;
* **probability of improvement** of group X over group Y: for each task the Mann-Whitney
  ``U / (n m)``, the chance that a run of X beats a run of Y (ties count half), averaged
  over tasks;
* **performance profiles**: the fraction of runs whose score exceeds ``tau``, per ``tau``
  (averaged over tasks).

Confidence intervals come from the *stratified* bootstrap: each task's runs are resampled on
their own (``scipy.stats.bootstrap`` with one sample per task, ``paired=False``), and the
percentile interval is taken, as rliable does. rliable itself is not used: its pinned
``arch<8`` fails to import with pandas 3.

Scores across tasks are only comparable once normalised: a ``Reference`` maps a task's raw return to
``(x - low) / (high - low)``. Reference sets are an explicit setting (``parse_references``); on a
single task the raw returns are used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import scipy.stats

from batchppo.experiment.errors import UserError

AGGREGATES = ("mean", "median", "iqm", "optimality_gap")
"""The aggregate metrics of ``aggregate_intervals``, in order."""
DEFAULT_RESAMPLES = 50_000
"""Bootstrap resamples (rliable's default)."""
IQM_CUT = 0.25

Scores = Mapping[str, np.ndarray]
"""Per-run scores of one group, by task (env id): 1-D arrays, one entry per run."""


@dataclasses.dataclass(frozen=True)
class Reference:
    """A task's normalisation: ``low`` maps to 0 and ``high`` to 1.

    Attributes:
        high: The score that counts as 1 (a target, or a baseline's published return).
        low: The score that counts as 0 (say a random policy's; 0 by default).
    """

    high: float
    low: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.high) and math.isfinite(self.low)) or self.high <= self.low:
            raise UserError(
                f"reference {self.low}:{self.high}: needs finite LOW < HIGH (ENV=HIGH or "
                "ENV=LOW:HIGH)"
            )

    def normalize(self, scores: np.ndarray) -> np.ndarray:
        """``(scores - low) / (high - low)``."""
        return (np.asarray(scores, np.float64) - self.low) / (self.high - self.low)


REFERENCE_SETS: dict[str, dict[str, Reference]] = {
    # SAC at 1M steps, the mean of 10 seeds of SimbaV2's baseline CSVs (results/baseline, Gym
    # v4 tasks).
    "sac-1m": {
        "HalfCheetah-v5": Reference(11321.0),
        "Hopper-v5": Reference(2787.0),
        "Walker2d-v5": Reference(4536.0),
        "Ant-v5": Reference(5734.0),
        "Humanoid-v5": Reference(4826.0),
    },
    # The project's targets for the MuJoCo presets at 1M steps (docs/benchmarks.md's MuJoCo
    # table judges the presets against them).
    "targets-1m": {
        "HalfCheetah-v5": Reference(6000.0),
        "Hopper-v5": Reference(2800.0),
        "Walker2d-v5": Reference(4600.0),
        "Ant-v5": Reference(4500.0),
        "Humanoid-v5": Reference(5500.0),
    },
}
"""Named reference sets for ``--reference NAME``."""


def parse_references(specs: Sequence[str]) -> dict[str, Reference]:
    """Reads ``--reference`` settings: a set's name, ``ENV=HIGH`` or ``ENV=LOW:HIGH``.

    Later settings override earlier ones for the same env.

    Raises:
        UserError: An unknown set or a malformed setting.
    """
    references: dict[str, Reference] = {}
    for spec in specs:
        if "=" not in spec:
            if spec not in REFERENCE_SETS:
                raise UserError(
                    f"--reference {spec}: not a reference set ({', '.join(REFERENCE_SETS)}) "
                    "nor ENV=HIGH or ENV=LOW:HIGH"
                )
            references.update(REFERENCE_SETS[spec])
            continue
        env, _, value = spec.partition("=")
        low, _, high = value.rpartition(":")
        try:
            reference = Reference(float(high), float(low) if low else 0.0)
        except ValueError:
            raise UserError(
                f"--reference {spec}: write ENV=HIGH or ENV=LOW:HIGH with numbers"
            ) from None
        if not env:
            raise UserError(f"--reference {spec}: the env id is missing (ENV=HIGH)")
        references[env] = reference
    return references


def normalize_scores(scores: Scores, references: Mapping[str, Reference]) -> dict[str, np.ndarray]:
    """Each task's scores normalised by its reference.

    Raises:
        UserError: A task without a reference.
    """
    missing = [task for task in scores if task not in references]
    if missing:
        raise UserError(
            f"no reference score for {', '.join(missing)}: add --reference ENV=HIGH (or a set: "
            f"{', '.join(REFERENCE_SETS)})"
        )
    return {task: references[task].normalize(values) for task, values in scores.items()}


# --- the statistics, vectorised over a leading batch of resamples (axis -1 holds the runs) ---


def _task_means(samples: Sequence[np.ndarray], axis: int) -> np.ndarray:
    return np.stack([np.mean(s, axis=axis) for s in samples], axis=-1)


def aggregate_metrics(*samples: np.ndarray, axis: int = -1, gap: bool = True) -> np.ndarray:
    """Mean, median, IQM and optimality gap of per-task run scores (one sample per task).

    Vectorised for ``scipy.stats.bootstrap``: each sample may carry leading batch axes.

    Args:
        *samples: Each task's scores, runs along ``axis``.
        axis: The runs' axis.
        gap: Compute the optimality gap too (normalised scores only).

    Returns:
        ``[4, ...]`` (``[3, ...]`` without the gap): the metrics of ``AGGREGATES``, in order.
    """
    samples = [np.moveaxis(np.asarray(s, np.float64), axis, -1) for s in samples]
    means = _task_means(samples, -1)
    runs = np.concatenate(samples, axis=-1)
    iqm = scipy.stats.trim_mean(runs, IQM_CUT, axis=-1)
    metrics = [means.mean(axis=-1), np.median(means, axis=-1), iqm]
    if gap:
        metrics.append(1.0 - np.mean(np.minimum(runs, 1.0), axis=-1))
    # Metrics on the first axis: scipy's bootstrap keeps the resamples on the last.
    return np.stack(metrics)


def probability_of_improvement(
    x: Sequence[np.ndarray], y: Sequence[np.ndarray], axis: int = -1
) -> np.ndarray:
    """P(X > Y): per task the Mann-Whitney ``U / (n m)`` of X's runs over Y's, averaged.

    Args:
        x: Group X's scores, one array per task.
        y: Group Y's scores for the same tasks, in the same order.
        axis: The runs' axis.
    """
    values = []
    for a, b in zip(x, y, strict=True):
        u = scipy.stats.mannwhitneyu(a, b, axis=axis, method="asymptotic").statistic
        values.append(u / (np.shape(a)[axis] * np.shape(b)[axis]))
    return np.mean(np.stack(values, axis=-1), axis=-1)


def run_score_distribution(*samples: np.ndarray, taus: np.ndarray, axis: int = -1) -> np.ndarray:
    """The performance profile: per ``tau``, the fraction of runs scoring above it, averaged
    over tasks (``[len(taus), ...]``)."""
    fractions = [
        np.mean(np.moveaxis(np.asarray(s), axis, -1) > taus.reshape(-1, *[1] * np.ndim(s)), -1)
        for s in samples
    ]
    return np.mean(np.stack(fractions), axis=0)


# --- estimates with stratified-bootstrap intervals ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A point estimate and its bootstrap confidence interval (arrays of one shape)."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray


def bootstrap_interval(
    samples: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """``statistic`` of the samples with its stratified-bootstrap percentile interval.

    Every sample (a task's runs) is resampled on its own, ``resamples`` times, by
    ``scipy.stats.bootstrap``.

    Args:
        samples: 1-D arrays, each with at least 2 runs.
        statistic: ``(*samples, axis) -> array``, vectorised.
        resamples: Bootstrap resamples.
        confidence: The interval's coverage.
        seed: Seed of the resampling (the same seed gives the same interval).

    Raises:
        UserError: A sample with fewer than 2 runs.
    """
    samples = [np.asarray(s, np.float64) for s in samples]
    if min(s.size for s in samples) < 2:
        raise UserError("a confidence interval needs at least 2 runs of every task")
    value = np.asarray(statistic(*samples, axis=-1))
    result = scipy.stats.bootstrap(
        samples,
        statistic,
        n_resamples=resamples,
        vectorized=True,
        paired=False,
        axis=-1,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return Estimate(value, np.asarray(interval.low), np.asarray(interval.high))


def aggregate_intervals(
    scores: Scores, *, normalized: bool, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, dict[str, float | None]]:
    """The ``AGGREGATES`` of one group with their 95 % intervals.

    Args:
        scores: The group's per-run scores by task.
        normalized: The scores are normalised (the optimality gap is computed; else None).
        resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        ``{metric: {"value", "low", "high"}}``.
    """

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        return aggregate_metrics(*samples, axis=axis, gap=normalized)

    estimate = bootstrap_interval(list(scores.values()), statistic, resamples=resamples, seed=seed)
    out: dict[str, dict[str, float | None]] = {}
    for i, name in enumerate(AGGREGATES):
        if i >= len(estimate.value):  # the optimality gap of raw scores
            out[name] = {"value": None, "low": None, "high": None}
        else:
            out[name] = {
                "value": float(estimate.value[i]),
                "low": float(estimate.low[i]),
                "high": float(estimate.high[i]),
            }
    return out


def improvement_interval(
    x: Scores, y: Scores, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, float]:
    """P(X > Y) over the tasks both groups cover, with its 95 % interval.

    Raises:
        UserError: The groups cover different tasks.
    """
    if set(x) != set(y):
        raise UserError(
            f"the groups cover different tasks ({', '.join(x)} against {', '.join(y)}): "
            "compare runs of the same envs"
        )
    tasks = list(x)
    k = len(tasks)

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        return probability_of_improvement(samples[:k], samples[k:], axis=axis)

    samples = [x[t] for t in tasks] + [y[t] for t in tasks]
    estimate = bootstrap_interval(samples, statistic, resamples=resamples, seed=seed)
    return {
        "value": float(estimate.value),
        "low": float(estimate.low),
        "high": float(estimate.high),
    }


def performance_profile(
    scores: Scores, taus: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Estimate:
    """The fraction of runs above each of ``taus``, with 95 % intervals."""
    taus = np.asarray(taus, np.float64)

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        return run_score_distribution(*samples, taus=taus, axis=axis)

    return bootstrap_interval(list(scores.values()), statistic, resamples=resamples, seed=seed)

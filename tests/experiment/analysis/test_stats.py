"""Aggregate statistics: exact values on fixed inputs, against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from batchppo.experiment.analysis import stats
from batchppo.experiment.errors import UserError

# Two tasks of normalised scores; 8 and 4 runs.
TASK_A = np.array([0.2, 1.4, 0.6, 0.8, 1.0, 0.0, 1.2, 0.4])
TASK_B = np.array([0.9, 0.3, 1.5, 0.5])


def test_iqm_of_a_fixed_array_by_hand():
    scores = np.array([7.0, 1.0, 5.0, 3.0, 8.0, 2.0, 6.0, 4.0])
    # A quarter cut at each end: the mean of 3, 4, 5 and 6.
    mean, median, iqm = stats.aggregate_metrics(scores, gap=False)
    assert iqm == 4.5 and mean == 4.5 and median == 4.5


def test_aggregates_of_two_tasks_by_hand():
    mean, median, iqm, gap = stats.aggregate_metrics(TASK_A, TASK_B)
    task_means = [0.7, 0.8]
    assert mean == pytest.approx(0.75, abs=1e-15)  # mean of the task means
    assert median == pytest.approx(np.median(task_means), abs=1e-15)
    # 12 runs, 3 cut at each end: 0.0 0.2 0.3 | 0.4 0.5 0.6 0.8 0.9 1.0 | 1.2 1.4 1.5.
    assert iqm == pytest.approx((0.4 + 0.5 + 0.6 + 0.8 + 0.9 + 1.0) / 6, abs=1e-15)
    # 1 - mean(min(x, 1)) over all 12 runs: the shortfalls 0.8 0.4 0.2 0 1 0.6 and 0.1 0.7 0.5.
    assert gap == pytest.approx((0.8 + 0.4 + 0.2 + 1.0 + 0.6 + 0.1 + 0.7 + 0.5) / 12, abs=1e-15)


def test_interval_is_scipys_stratified_percentile_bootstrap():
    got = stats.aggregate_intervals(
        {"a": TASK_A, "b": TASK_B}, normalized=True, resamples=2000, seed=7
    )

    def iqm(a, b, axis):
        return scipy.stats.trim_mean(np.concatenate([a, b], axis=axis), 0.25, axis=axis)

    direct = scipy.stats.bootstrap(
        (TASK_A, TASK_B), iqm, n_resamples=2000, vectorized=True, paired=False, axis=-1,
        method="percentile", rng=np.random.default_rng(7),
    )  # fmt: skip
    assert got["iqm"]["low"] == direct.confidence_interval.low
    assert got["iqm"]["high"] == direct.confidence_interval.high
    assert got["iqm"]["value"] == pytest.approx(0.7, abs=1e-15)
    assert set(got) == set(stats.AGGREGATES)
    for name in stats.AGGREGATES:
        assert got[name]["low"] <= got[name]["value"] <= got[name]["high"], name
    # The same seed gives the same interval; raw scores have no optimality gap.
    again = stats.aggregate_intervals(
        {"a": TASK_A, "b": TASK_B}, normalized=True, resamples=2000, seed=7
    )
    assert again == got
    raw = stats.aggregate_intervals({"a": TASK_A}, normalized=False, resamples=100)
    assert raw["optimality_gap"] == {"value": None, "low": None, "high": None}


def test_probability_of_improvement_by_hand():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([2.0, 2.0, 0.0, 5.0])
    # Pairs x > y: 1 > 0; 2 > 0 and two ties (half each); 3 > 2, 2, 0. 6 of 12.
    assert stats.probability_of_improvement([x], [y]) == 0.5
    # A second task where x always wins: the mean of 0.5 and 1.
    both = stats.probability_of_improvement([x, np.array([9.0, 8.0])], [y, np.array([1.0])])
    assert both == 0.75
    estimate = stats.improvement_interval({"t": x}, {"t": y}, resamples=1000, seed=1)
    assert estimate["value"] == 0.5
    assert 0.0 <= estimate["low"] < 0.5 < estimate["high"] <= 1.0
    with pytest.raises(UserError, match="the groups cover different tasks"):
        stats.improvement_interval({"t": x}, {"u": y})


def test_performance_profile_by_hand():
    taus = np.array([-1.0, 0.5, 1.0, 2.0])
    profile = stats.performance_profile({"a": TASK_A, "b": TASK_B}, taus, resamples=500)
    # Fraction above tau per task, averaged: (8/8 + 4/4) / 2, (5/8 + 2/4) / 2, (2/8 + 1/4) / 2.
    assert profile.value.tolist() == [1.0, 0.5625, 0.25, 0.0]
    assert profile.low.shape == profile.high.shape == (4,)
    assert (profile.low <= profile.value).all() and (profile.value <= profile.high).all()


def test_an_interval_needs_two_runs_per_task():
    with pytest.raises(UserError, match="at least 2 runs of every task"):
        stats.aggregate_intervals({"a": TASK_A, "b": np.array([1.0])}, normalized=True)


def test_references():
    refs = stats.parse_references(["sac-1m", "Hopper-v5=3000", "Pendulum-v1=-1200:-150"])
    assert refs["Hopper-v5"] == stats.Reference(3000.0)
    assert refs["Walker2d-v5"] == stats.Reference(4536.0)
    assert refs["Pendulum-v1"] == stats.Reference(-150.0, -1200.0)
    assert refs["Pendulum-v1"].normalize(np.array([-1200.0, -150.0, -675.0])).tolist() == [
        0.0,
        1.0,
        0.5,
    ]
    normalized = stats.normalize_scores({"Hopper-v5": np.array([1500.0])}, refs)
    assert normalized["Hopper-v5"].tolist() == [0.5]
    with pytest.raises(UserError, match=r"^no reference score for Ant-v5: add --reference"):
        stats.normalize_scores({"Ant-v5": np.array([1.0])}, {})
    for spec, message in [
        ("sac", r"^--reference sac: not a reference set \(sac-1m, targets-1m\)"),
        ("Hopper-v5=x", r"^--reference Hopper-v5=x: write ENV=HIGH or ENV=LOW:HIGH"),
        ("=3", r"^--reference =3: the env id is missing"),
        ("Hopper-v5=5:1", r"^reference 5.0:1.0: needs finite LOW < HIGH"),
    ]:
        with pytest.raises(UserError, match=message):
            stats.parse_references([spec])

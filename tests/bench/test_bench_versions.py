"""bench/versions.py's bookkeeping: which figures it compares and which value of the rounds it
keeps, exactly."""

from __future__ import annotations

from pathlib import Path

from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]


def bench_versions():
    return load_bench("versions")


def test_flatten_keeps_numeric_leaves_by_path_and_drops_lists_and_bools():
    tree = {
        "Pendulum-v1": {"8": {"batch": 1.5e5, "make_us": 12}},
        "pendulum": {"sb3": {"median_s": 40.0, "runs": [{"steps": 3}], "hit": True}},
        "label": "text",
    }
    assert bench_versions().flatten(tree) == {
        "Pendulum-v1/8/batch": 150_000.0,
        "Pendulum-v1/8/make_us": 12.0,
        "pendulum/sb3/median_s": 40.0,
    }


def test_keep_best_takes_the_highest_rate_and_the_lowest_time():
    versions = bench_versions()
    best: dict[str, float] = {}
    versions.keep_best(best, {"a/batch": 100.0, "a/cpu_us": 9.0, "b/median_s": 30.0})
    versions.keep_best(best, {"a/batch": 120.0, "a/cpu_us": 11.0, "b/median_s": 25.0, "c": 1.0})
    assert best == {"a/batch": 120.0, "a/cpu_us": 9.0, "b/median_s": 25.0, "c": 1.0}

"""bench/versions.py's bookkeeping: which figures it compares and which value of the rounds it
keeps, exactly."""

from __future__ import annotations

from pathlib import Path

from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]


def bench_versions():
    return load_bench("versions")


def test_flatten_keeps_numeric_leaves_by_path_and_drops_lists_bools_and_provenance():
    tree = {
        "Pendulum-v1": {"8": {"batch": 1.5e5, "make_us": 12}},
        "pendulum": {"sb3": {"median_s": 40.0, "runs": [{"steps": 3}], "hit": True}},
        "label": "text",
        "machine": {"cpus": 2},
        "commit": "abc1234",
    }
    assert bench_versions().flatten(tree) == {
        "Pendulum-v1/8/batch": 150_000.0,
        "Pendulum-v1/8/make_us": 12.0,
        "pendulum/sb3/median_s": 40.0,
    }


def test_best_takes_the_highest_rate_and_the_lowest_time_over_the_rounds():
    versions = bench_versions()
    rows = [
        {"a/batch": 100.0, "a/cpu_us": 9.0, "b/median_s": 30.0, "d_ms": 2.0, "side": "after",
         "round": 0},
        {"a/batch": 120.0, "a/cpu_us": 11.0, "b/median_s": 25.0, "d_ms": 3.0, "c": 1.0,
         "side": "after", "round": 1},
        {"a/batch": 500.0, "side": "before", "round": 0},
    ]  # fmt: skip
    result = versions.Result(["before", "after"], rows)
    assert versions.best(result, "after") == {
        "a/batch": 120.0,
        "a/cpu_us": 9.0,
        "b/median_s": 25.0,
        "d_ms": 2.0,
        "c": 1.0,
    }
    assert versions.best(result, "before") == {"a/batch": 500.0}


FAKE_BENCH = """
import json, sys
from pathlib import Path

runs = Path(__file__).with_name("runs")
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
rate = {{"1": 100.0, "2": 140.0}}[str(len(runs.read_text()))] * {scale}
out = sys.argv[sys.argv.index("--json") + 1]
Path(out).write_text(json.dumps({{"env": {{"batch": rate, "step_us": 1e6 / rate}}, "cores": 2}}))
"""


def test_each_tree_runs_its_own_script_alternating_and_keeps_its_best(tmp_path, capsys):
    """Two trees whose script reports 100 then 140 steps/s (the second tree twice as fast):
    each tree keeps its best rate and its lowest time, and the rounds alternate."""
    versions = bench_versions()
    trees = {}
    for name, scale in (("before", 1), ("after", 2)):
        (tmp_path / name / "bench").mkdir(parents=True)
        (tmp_path / name / "bench" / "fake.py").write_text(FAKE_BENCH.format(scale=scale))
        trees[name] = tmp_path / name
    found = versions.measure(trees, ["bench/fake.py", "--sizes", "8"], rounds=2, timeout=60)
    assert found == {
        "before": {"env/batch": 140.0, "env/step_us": 1e6 / 140.0, "cores": 2.0},
        "after": {"env/batch": 280.0, "env/step_us": 1e6 / 280.0, "cores": 2.0},
    }
    assert [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[versions]")] == [
        "[versions] round 1: before",
        "[versions] round 1: after",
        "[versions] round 2: after",
        "[versions] round 2: before",
    ]

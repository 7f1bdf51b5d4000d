"""evaluate: episode summaries, groups of runs, their statistics, CSV and JSON files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from batchppo import cli
from batchppo.experiment.analysis import evaluate, stats
from batchppo.experiment.errors import UserError


def run(name: str, env: str, mean: float, seed: int = 0, **extra) -> dict:
    """An evaluate_run result (with its run_dir) of 4 episodes."""
    return {
        "run_dir": f"logdir/T-{name}-s{seed}", "env": env, "checkpoint": 1000, "episodes": 4,
        "mean_return": mean, "std_return": 1.0, "stderr_return": 0.5, "mean_length": 10.0,
        "cut": 0, "returns": [mean] * 4, "lengths": [10] * 4, "preset": name, "seed": seed,
        **extra,
    }  # fmt: skip


def test_episode_summary_exact():
    walk = {
        "x_position": {"mean": 2.0, "first": 0.0, "last": 3.0},
        "x_velocity": {"mean": 2.0, "first": np.nan, "last": 3.0},
        "reward_forward": {"mean": 0.5, "first": np.nan, "last": 1.0},
    }
    fell = {
        "x_position": {"mean": 5.0, "first": 1.0, "last": 8.0},
        "x_velocity": {"mean": 4.0, "first": np.nan, "last": 6.0},
    }
    summary = evaluate.episode_summary([False, True], [walk, fell])
    assert summary == {
        "terminated_fraction": 0.5,
        "terminated": [False, True],
        "metrics": {"forward_velocity": 3.0, "distance": 5.0},
        "episode_metrics": {"forward_velocity": [2.0, 4.0], "distance": [3.0, 7.0]},
        "info_means": {"x_position": 3.5, "x_velocity": 3.0},  # keys of every episode
    }
    none = evaluate.episode_summary([True, True, False, False], [{}] * 4)
    assert none["terminated_fraction"] == 0.5
    assert none["metrics"] == none["episode_metrics"] == none["info_means"] == {}
    line = evaluate.format_run({**run("h", "Hopper-v5", 1.0), **summary, "episodes": 2})
    assert line == (
        "  terminated 1 of 2 episodes; mean forward velocity 3.000 m/s; final x minus "
        "initial x 5.000 m"
    )


def test_write_csv_exact(tmp_path):
    metrics = {"metrics": {"forward_velocity": 0.25, "distance": 2.5}, "terminated_fraction": 0.5}
    groups = {
        "new": [run("hopper_fast", "Hopper-v5", 3000.5, 0, protocol="final-mean", **metrics)],
        "old": [run("cheetah", "HalfCheetah-v5", 12.0, 3)],
    }
    groups["new"].append(run("hopper_fast", "Hopper-v5", 1.0, 1, protocol="final-sampled"))
    path = evaluate.write_csv(groups, tmp_path / "a" / "runs.csv")
    # `actions` as the entry names it, else as its protocol says (empty without a protocol).
    assert path.read_text().splitlines() == [
        "group,run_dir,preset,env,seed,protocol,actions,step,episodes,mean_return,std_return,"
        "stderr_return,mean_length,terminated_fraction,forward_velocity,distance,cut",
        "new,logdir/T-hopper_fast-s0,hopper_fast,Hopper-v5,0,final-mean,mean,1000,4,3000.5,1.0,"
        "0.5,10.0,0.5,0.25,2.5,0",
        "new,logdir/T-hopper_fast-s1,hopper_fast,Hopper-v5,1,final-sampled,sampled,1000,4,1.0,"
        "1.0,0.5,10.0,,,,0",
        "old,logdir/T-cheetah-s3,cheetah,HalfCheetah-v5,3,,,1000,4,12.0,1.0,0.5,10.0,,,,0",
    ]


def test_group_statistics_and_their_lines():
    a = [run("a", "Hopper-v5", m, i) for i, m in enumerate([1.0, 2.0, 3.0])]
    b = [run("b", "Hopper-v5", m, i) for i, m in enumerate([2.0, 2.0, 0.0, 5.0])]
    result = evaluate.group_statistics({"a": a, "b": b}, {}, resamples=1000, seed=3)
    direct = stats.aggregate_intervals(
        {"Hopper-v5": np.array([1.0, 2.0, 3.0])}, normalized=False, resamples=1000, seed=3
    )
    assert result["groups"]["a"] == {
        "runs": 3, "protocol": "4 episodes, mean action", "envs": {"Hopper-v5": direct},
        "normalized": None, "note": None,
    }  # fmt: skip
    assert result["improvement"]["value"] == 0.5 and result["improvement"]["x"] == "a"
    refs = {"Hopper-v5": stats.Reference(4.0)}
    normalized = evaluate.group_statistics({"a": a}, refs, resamples=1000, seed=3)
    assert normalized["groups"]["a"]["normalized"]["iqm"]["value"] == 0.5  # IQM 2 of 4
    assert normalized["groups"]["a"]["normalized"]["optimality_gap"]["value"] == 0.5
    assert normalized["improvement"] is None
    lines = evaluate.format_statistics(normalized)
    iqm = normalized["groups"]["a"]["normalized"]["iqm"]
    assert lines[0] == (
        "group a: 3 runs, each 4 episodes, mean action (95% stratified-bootstrap intervals)"
    )
    assert lines[1].startswith("  Hopper-v5 return: mean 2.0 [")
    assert f"IQM 0.500 [{iqm['low']:.3f}, {iqm['high']:.3f}]" in lines[2]
    assert lines[2].endswith("optimality gap 0.500 [0.250, 0.750]")
    one = evaluate.format_statistics(evaluate.group_statistics({"a": a[:1]}, {}))
    assert one == ["group a: 1 runs, each 4 episodes, mean action (95% stratified-bootstrap "
                   "intervals)", "  Hopper-v5: one run; an interval needs at least 2"]  # fmt: skip
    # Runs of two envs without references: per env only, and a line that says why.
    two = [*a, run("c", "Ant-v5", 7.0), run("c", "Ant-v5", 9.0)]
    lines = evaluate.format_statistics(evaluate.group_statistics({"x": two}, {}, resamples=100))
    assert lines[0] == (
        "group x: 5 runs, each 4 episodes, mean action (95% stratified-bootstrap intervals)"
    )
    assert lines[2].startswith("  Ant-v5 return: mean 8.0 [")
    assert lines[3] == (
        "  no aggregate across envs: group x spans 2 envs: aggregates across envs need a "
        "reference score for Ant-v5, Hopper-v5 (--reference ENV=HIGH, or a set: sac-1m, "
        "targets-1m)"
    )


def test_groups_are_checked_before_evaluation():
    with pytest.raises(UserError, match=r"^groups A and B cover different envs \(Ant-v5 against"):
        evaluate.check_groups({"A": ["Ant-v5"], "B": ["Hopper-v5"]})
    evaluate.check_groups({"A": ["Ant-v5", "Ant-v5"], "B": ["Ant-v5"]})
    refs = {"Hopper-v5": stats.Reference(1)}
    assert evaluate.missing_references("A", ["Hopper-v5", "Ant-v5"], refs) == (
        "group A spans 2 envs: aggregates across envs need a reference score for Ant-v5 "
        "(--reference ENV=HIGH, or a set: sac-1m, targets-1m)"
    )
    assert evaluate.missing_references("A", ["Ant-v5", "Ant-v5"], {}) is None
    assert evaluate.missing_references("A", ["Hopper-v5"], refs) is None
    assert evaluate.default_labels([["x", "x"], ["y"]]) == ["x", "y"]
    assert evaluate.default_labels([["x"], ["x"]]) == ["A", "B"]
    assert evaluate.default_labels([["x", "y"]]) == ["A"]
    assert evaluate.default_labels([["x"]]) == ["x"]


def test_cli_aggregates_results_files(tmp_path, capsys):
    new = [run("hopper_fast", "Hopper-v5", m, i) for i, m in enumerate([3000.0, 2000.0, 2500.0])]
    old = [run("hopper", "Hopper-v5", m, i) for i, m in enumerate([1000.0, 2200.0])]
    (tmp_path / "new.json").write_text(json.dumps(new))
    (tmp_path / "old.json").write_text(json.dumps(old))
    out_json, out_stats = tmp_path / "all.json", tmp_path / "stats.json"
    argv = ["evaluate", str(tmp_path / "new.json"), "--compare",
            str(tmp_path / "old.json"), "--bootstrap", "500", "--reference", "targets-1m",
            "--json", str(out_json), "--stats-json", str(out_stats)]  # fmt: skip
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = evaluate.group_statistics(
        {"hopper_fast": new, "hopper": old}, stats.REFERENCE_SETS["targets-1m"], resamples=500
    )
    assert json.loads(out_stats.read_text()) == expected
    written = json.loads(out_json.read_text())
    assert written["runs"] == [
        *({**r, "group": "hopper_fast"} for r in new),
        *({**r, "group": "hopper"} for r in old),
    ]
    # Files without provenance (written before it was recorded) give none to the new one.
    unknown = {"commit": None, "note": None, "config": None}
    assert written["provenance"] == {"hopper_fast": unknown, "hopper": unknown}
    assert lines[0] == (
        "logdir/T-hopper_fast-s0: Hopper-v5 checkpoint 1,000: mean return 3000.00 ± 0.50 "
        "(standard error; episodes' std 1.00) over 4 episodes with the mean action, mean "
        "length 10.0"
    )
    assert lines[5:7] == [
        "group hopper_fast: mean over 3 runs: 2500.00 ± 408.25 (std of the runs' means; each 4 "
        "episodes, mean action)",
        "group hopper: mean over 2 runs: 1600.00 ± 600.00 (std of the runs' means; each 4 "
        "episodes, mean action)",
    ]
    assert lines[7:-2] == evaluate.format_statistics(expected)
    improvement = expected["improvement"]
    assert lines[-3] == (
        f"P(hopper_fast > hopper) = 0.833 [{improvement['low']:.3f}, "
        f"{improvement['high']:.3f}] (probability of improvement)"
    )
    # The results file written reads back as the same runs, here in one group.
    csv = tmp_path / "runs.csv"
    assert cli.main(["evaluate", str(out_json), "--csv", str(csv)]) == 0
    rows = csv.read_text().splitlines()
    assert len(rows) == 6 and rows[1].startswith("A,logdir/T-hopper_fast-s0,hopper_fast,")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--labels", "x", "y"], "--labels: 2 names for 1 groups"),
        (["--compare", "NEW", "--labels", "x", "x"], "--labels: the names x x must differ"),
        (["--bootstrap", "0"], "--bootstrap 0: must be >= 1"),
        (["--checkpoint", "5"], "--checkpoint picks one run's checkpoint"),
        (["--stats-json", "s.json"], "--stats-json: aggregate statistics need at least 2 runs"),
    ],
)
def test_cli_bad_group_options(tmp_path, capsys, extra, message):
    path = tmp_path / "new.json"
    path.write_text(json.dumps([run("a", "Hopper-v5", 1.0)]))
    argv = ["evaluate", str(path), *[str(path) if a == "NEW" else a for a in extra]]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"batchppo: error: {message}") and err.count("\n") == 1


def test_load_results_rejects_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"runs": 1}))
    with pytest.raises(UserError, match=r"x.json: not a file of `batchppo evaluate --json`"):
        evaluate.load_results(path)
    assert evaluate.is_results_file(path) and not evaluate.is_results_file(tmp_path)

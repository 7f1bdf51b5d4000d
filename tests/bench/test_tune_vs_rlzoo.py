"""bench/tune_vs_rlzoo.py without its peer: the sides it accepts and refuses, the commands it
runs, and its arithmetic on a study's trials (no study is run, nothing is timed)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pytest
from benchlib import load_bench

bench = load_bench("tune_vs_rlzoo")
START = datetime.datetime(2026, 1, 1, 12, 0, 0)


def _at(seconds: float) -> datetime.datetime:
    return START + datetime.timedelta(seconds=seconds)


def _args(**changes) -> argparse.Namespace:
    values = {"rlzoo_python": "/venv/bin/python", "rlzoo_threads": 1, "steps": 100_000,
              "evaluations": 10, "eval_episodes": 10, "seeds": 1, "sampler_seed": 0}  # fmt: skip
    return argparse.Namespace(**{**values, **changes})


def test_sides_parse_to_their_presets_and_batch_sizes():
    specs = bench.parse_sides("rlzoo, host,fused,batch1,batch8")
    assert [(s.name, s.config, s.batch) for s in specs] == [
        ("rlzoo", None, None),
        ("host", "pendulum_fast", None),
        ("fused", "pendulum_jax", None),
        ("batch1", "pendulum_jax", 1),
        ("batch8", "pendulum_jax", 8),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rlzoo,cleanrl", "--sides: unknown side 'cleanrl'; the sides: rlzoo, host, fused, batchN"),
        ("batch0", "--sides: unknown side 'batch0'"),
        ("host,host", "--sides: host given twice: name each side once"),
        (",", "--sides: name at least one side"),
    ],
)
def test_bad_sides_are_refused_in_one_line(text, message):
    with pytest.raises(SystemExit) as error:
        bench.parse_sides(text)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_batch_side_is_refused_where_tune_has_no_batch_option():
    specs = bench.parse_sides("rlzoo,fused,batch8")
    with pytest.raises(SystemExit) as error:
        bench.check_sides(specs, 1, "usage: batchppo tune [--seeds K] [--study DIR]")
    assert str(error.value) == (
        "--sides batch8: this checkout's `batchppo tune` has no --batch (many trials in one "
        "program); drop the batchN sides from --sides"
    )
    bench.check_sides(specs, 1, "usage: batchppo tune [--seeds K] [--batch B] [--study DIR]")
    bench.check_sides(bench.parse_sides("rlzoo,host,fused"), 1, "usage: batchppo tune")


def test_more_than_one_seed_a_trial_is_refused_beside_rlzoo_only():
    with pytest.raises(SystemExit, match=r"^--seeds 3: rl-zoo's --optimize trains one seed"):
        bench.check_sides(bench.parse_sides("rlzoo,fused"), 3, "")
    bench.check_sides(bench.parse_sides("host,fused"), 3, "")


def test_both_commands_carry_the_same_budget_evaluations_and_sampler_seed(tmp_path):
    args = _args(sampler_seed=7)
    zoo = bench.rlzoo_command(args, tmp_path)
    flags = dict(zip(zoo[3::2], zoo[4::2], strict=False))
    assert zoo[:3] == ["/venv/bin/python", "-m", "rl_zoo3.train"] and "-optimize" in zoo
    for flag, value in [("--n-timesteps", "100000"), ("--n-evaluations", "10"),
                        ("--eval-episodes", "10"), ("--sampler", "tpe"), ("--pruner", "median"),
                        ("--n-startup-trials", "5"), ("--n-jobs", "1"), ("--seed", "7"),
                        ("--num-threads", "1"), ("--env", "Pendulum-v1")]:  # fmt: skip
        assert zoo[zoo.index(flag) + 1] == value, (flag, flags)
    spec = bench.parse_sides("batch8")[0]
    ours = bench.tune_command(spec, args, tmp_path / "batch8-r0", Path("space.yaml"))
    sets = [ours[i + 1] for i, item in enumerate(ours) if item == "--set"]
    assert sets == ["steps=100000", "eval_every=10000", "eval_episodes=10", "eval_actions=mean"]
    for flag, value in [("--config", "pendulum_jax"), ("--seeds", "1"), ("--objective", "iqm"),
                        ("--pruner", "median"), ("--sampler-seed", "7"),
                        ("--batch", "8")]:  # fmt: skip
        assert ours[ours.index(flag) + 1] == value, flag
    fused = bench.tune_command(bench.parse_sides("fused")[0], args, tmp_path, Path("s.yaml"))
    assert "--batch" not in fused


def test_evaluations_must_fit_the_budget():
    assert bench.eval_every(100_000, 3) == 33_333
    with pytest.raises(SystemExit, match=r"^--evaluations 0: must be between 1 and --steps"):
        bench.eval_every(100_000, 0)


def test_summary_counts_the_trials_ended_by_the_deadline_and_their_rates():
    record = bench.TrialRecord
    trials = [
        record(0, "COMPLETE", -900.0, _at(10), _at(70)),
        record(1, "PRUNED", -1200.0, _at(70), _at(100)),
        record(2, "COMPLETE", -300.0, _at(100), _at(190)),
        record(3, "FAIL", None, _at(190), _at(250)),
        record(4, "COMPLETE", -150.0, _at(190), _at(360)),  # after the deadline
        record(5, "RUNNING", None, _at(360), None),
    ]
    f = bench.summarize(trials, START, 300.0, 450.0)
    assert (f["trials"], f["complete"], f["pruned"], f["late"]) == (3, 2, 1, 1)
    assert f["trials_per_hour"] == 36.0  # 3 trials in 300 s
    assert f["trials_per_cpu_hour"] == 24.0  # 3 trials in 450 CPU seconds
    assert f["best"] == -300.0  # trial 4 ended too late, pruned trials have no value
    assert f["first_s"] == 70.0
    assert f["trial_s"] == 75.0  # the median of 60 and 90
    assert [(e["number"], e["at_s"]) for e in f["ended"]] == [(0, 70.0), (1, 100.0), (2, 190.0)]
    empty = bench.summarize([record(0, "RUNNING", None, _at(1), None)], START, 300.0, 0.0)
    assert (empty["trials"], empty["best"], empty["first_s"], empty["trials_per_cpu_hour"]) == (
        0, None, None, None)  # fmt: skip


def test_ratios_divide_by_rlzoo_and_batch_sides_by_batch1():
    figures = {
        "rlzoo": {"trials_per_hour": 4.0},
        "host": {"trials_per_hour": 10.0},
        "fused": {"trials_per_hour": 40.0},
        "batch1": {"trials_per_hour": 50.0},
        "batch8": {"trials_per_hour": 250.0},
        "batch4": {"trials_per_hour": None},
    }
    assert bench.ratios(figures, "trials_per_hour") == {
        "host/rlzoo": 2.5,
        "fused/rlzoo": 10.0,
        "batch1/rlzoo": 12.5,
        "batch8/rlzoo": 62.5,
        "batch8/batch1": 5.0,
    }
    assert bench.ratios({"fused": {"trials_per_hour": 3.0}}, "trials_per_hour") == {}


def test_the_table_prints_every_side_and_the_ratios():
    figures = {
        "rlzoo": {"config": None, "trials": 2, "pruned": 0, "trials_per_hour": 12.0,
                  "trials_per_cpu_hour": 6.0, "first_s": 250.0, "trial_s": 280.0,
                  "best": -800.0},
        "fused": {"config": "pendulum_jax", "trials": 20, "pruned": 5, "trials_per_hour": 120.0,
                  "trials_per_cpu_hour": 60.0, "first_s": 40.0, "trial_s": 25.0,
                  "best": -150.5},
    }  # fmt: skip
    lines = bench.table(figures)
    assert lines[1].split() == ["rlzoo", "-", "2", "0", "12.0", "6.0", "250.0", "280.0", "-800.0"]
    assert lines[2].split()[:5] == ["fused", "pendulum_jax", "20", "5", "120.0"]
    assert lines[3] == "trials/h: fused/rlzoo 10.00x"
    assert lines[4] == "trials/CPU-h: fused/rlzoo 10.00x"
    assert lines[5] == "best return minus rl-zoo's: fused +649.5"

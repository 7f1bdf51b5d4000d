"""bench/failure_modes.py reads the committed run logs as they are, and synthetic ones exactly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "runs"


@pytest.fixture(scope="module")
def failure_modes():
    return load_bench("failure_modes")


def test_signal_table_reads_the_rows_of_metrics_jsonl(failure_modes):
    dirs = [RUNS / "s0-hopper_fast-recompute", RUNS / "s2-hopper_fast-recompute"]
    table = failure_modes.signal_table(
        dirs, signals=("entropy", "value_loss", "score", "std"), steps=(10_000, 500_000)
    )
    # The train rows at steps 10240 and 501760 of the two runs' metrics.jsonl.
    assert table["entropy"][0, 0] == 2.6591795921325683
    assert table["entropy"][1, 1] == -0.9270528554916382
    assert table["value_loss"][1, 1] == 0.0007102105300873518
    assert table["score"][1, 1] == 1183.315384476273
    # Hopper's 3 action dims: H = 3 (log std + log(2 pi e) / 2).
    expected = math.exp(-0.9270528554916382 / 3 - 0.5 * math.log(2 * math.pi * math.e))
    assert table["std"][1, 1] == pytest.approx(expected, rel=1e-12)


def test_kl_cap_cuts_seen_in_the_logged_learning_rate(failure_modes):
    # HalfCheetah seed 1 is the one run of the two groups whose KL passed the cap: its row
    # at step 581632 (iterations 279-283 of 489) trains at the schedule's rate / 1.5.
    run = failure_modes.load_run(RUNS / "s1-cheetah_fast-recompute")
    rows, low, first, max_kl = failure_modes.kl_cap_cuts(run)
    assert first == 581632
    i = int(np.flatnonzero(run["train"]["step"] == 581632)[0])
    assert run["train"]["learning_rate"][i] == pytest.approx(3e-4 * (1 - 281 / 489) / 1.5, 1e-6)
    assert low == pytest.approx(1 / 1.5, abs=1e-3)
    assert rows == 19 and max_kl > 0.03
    # Hopper seed 2 never passed it: every row at the schedule's rate.
    assert (
        failure_modes.kl_cap_cuts(failure_modes.load_run(RUNS / "s2-hopper_fast-recompute"))[0] == 0
    )


def test_spearman_and_stable_step(failure_modes):
    assert failure_modes.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert failure_modes.spearman([1, 2, float("nan"), 4], [4, 3, 0, 1]) == pytest.approx(-1.0)
    # Hopper seed 7 first hopped whole episodes in its eval at step 200704; seed 2 never did.
    assert (
        failure_modes.stable_step(failure_modes.load_run(RUNS / "s7-hopper_fast-recompute"))
        == 200704
    )
    assert (
        failure_modes.stable_step(failure_modes.load_run(RUNS / "s2-hopper_fast-recompute")) is None
    )


# Synthetic runs: 2 envs x 512 steps an iteration, 10 iterations, a train row every 2.
TOY_CONFIG = {
    "env": "Humanoid-v5",
    "learning_rate": 1e-3,
    "anneal_lr": True,
    "steps": 10240,
    "num_agents": 2,
    "rollout_length": 512,
}
TOY_STEPS = (2048, 4096, 6144, 8192, 10240)


def _write_run(
    runs: Path,
    name: str,
    lengths: list[float | None],
    rates: list[float],
    logged: dict[str, list[float]] | None = None,
) -> None:
    """A run of train rows at TOY_STEPS; `logged` adds a metric's value to each row."""
    run = runs / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(TOY_CONFIG))
    rows = [
        {"step": s, "phase": "train", "length": n, "learning_rate": r}
        for s, n, r in zip(TOY_STEPS, lengths, rates, strict=True)
    ]
    for key, values in (logged or {}).items():
        for row, value in zip(rows, values, strict=True):
            row[key] = value
    rows.append({"step": 10240, "phase": "eval", "score": 1.0, "length": 1.0})
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


TOY_DIAGNOSTICS = {  # policy_feature_rank, value_feature_rank, *_preact_norm_0 per row
    0: ([60, 58, 59, 61, 62], [61, 61, 60, 60, 59], [1, 2, 3, 4, 5], [2, 3, 4, 5, 6]),
    1: ([61, 39, 50, 55, 56], [62, 60.2, 60, 61, 61], [1.5, 2.5, 3.5, 4.5, 5.5], [7, 6, 5, 4, 3]),
    5: ([62, 40, 45, 30, 35], [61] * 5, [10, 20.5, 30, 40, 50], [1] * 5),
}


def _diagnostics(seed: int) -> dict[str, list[float]]:
    keys = ("policy_feature_rank", "value_feature_rank")
    keys += ("policy_preact_norm_0", "value_preact_norm_0")
    return dict(zip(keys, TOY_DIAGNOSTICS[seed], strict=True))


EVALUATE_HEADER = "run_dir,seed,mean_return,mean_length,terminated_fraction,forward_velocity\n"


@pytest.fixture
def toy(tmp_path):
    """Four runs in two groups, their finals in both CSV formats."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    results.mkdir()
    rates = [9e-4, 7e-4, 5e-4, 3e-4, 1e-4]
    # A row where no episode ended has no length (None -> NaN) and never takes off.
    _write_run(runs, "s0-toy", [160, None, 140, 210, 260], rates, _diagnostics(0))
    _write_run(runs, "s1-toy", [90, None, 155, 190, 199], rates, _diagnostics(1))
    _write_run(runs, "s5-toy-b", [90, 100, 110, 149.9, 120], rates, _diagnostics(5))
    _write_run(runs, "s6-toy-b", [100, 100, 100, 150.0, 100], rates)  # logged none
    (results / "toy-1M-seeds0-1.csv").write_text(
        EVALUATE_HEADER
        + "runs/s0-toy,0,5000.5,990,0.02,0.6\n"
        + "runs/s1-toy,1,3000.0,400,1.0,0.4\n"
    )
    (results / "toy-b-1M-seeds5-6.csv").write_text("seed,score\n5,900\n6,4000\n")
    return runs, results


def test_takeoff_steps_and_learning_rates_of_synthetic_runs(failure_modes, toy):
    runs, results = toy
    sets = [failure_modes.SeedSet("toy", (0, 1)), failure_modes.SeedSet("toy-b", (5, 6))]
    rows = failure_modes.takeoff_rows(sets, (150, 200, 250), runs, results)
    assert [(r["group"], r["seed"]) for r in rows] == [
        ("toy", 0),
        ("toy", 1),
        ("toy-b", 5),
        ("toy-b", 6),
    ]
    assert [r["takeoff"] for r in rows] == [
        {150: 2048, 200: 8192, 250: 10240},
        {150: 6144, 200: None, 250: None},
        {150: None, 200: None, 250: None},  # 149.9 at best: never
        {150: 8192, 200: None, 250: None},  # exactly 150 reaches it
    ]
    assert [r["final"] for r in rows] == [5000.5, 3000.0, 900.0, 4000.0]
    assert [r["bar"] for r in rows] == [pytest.approx(3850.0)] * 4  # 70 % of 5500
    assert [r["below"] for r in rows] == [False, True, True, False]
    # The take-off row's iterations: 0-1 at step 2048, 4-5 at 6144, 6-7 at 8192, of 10, each
    # at 1 - u / 10 of the start rate; the logged rate is the row's, over the start's 1e-3.
    assert rows[0]["scheduled_lr"] == pytest.approx((1.0 + 0.9) / 2, rel=1e-12)
    assert rows[1]["scheduled_lr"] == pytest.approx((0.6 + 0.5) / 2, rel=1e-12)
    assert rows[3]["scheduled_lr"] == pytest.approx((0.4 + 0.3) / 2, rel=1e-12)
    assert [r["logged_lr"] for r in rows] == [
        pytest.approx(0.9),
        pytest.approx(0.5),
        None,
        pytest.approx(0.3),
    ]
    assert rows[2]["scheduled_lr"] is None
    report = failure_modes.takeoff_report(sets, (150, 200), None, runs, results)
    assert "### Take-off of 4 seeds (toy:0-1, toy-b:5-6; bar 3850)" in report
    # Ordered by take-off, a never last.
    assert report.index("| s0-toy |") < report.index("| s1-toy |") < report.index("| s6-toy-b |")
    assert report.index("| s6-toy-b |") < report.index("| s5-toy-b |")
    assert "| s1-toy | 3000 | yes | 6k | 0.550 | 0.500 | never |" in report


def test_representation_columns_and_summary_of_synthetic_runs(failure_modes, toy):
    runs, results = toy
    sets = [failure_modes.SeedSet("toy", (0, 1)), failure_modes.SeedSet("toy-b", (5, 6))]
    steps = (4096, 8192, 20000)
    report = failure_modes.takeoff_report(sets, (150,), None, runs, results, steps, 4096)
    lines = report.splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("| run | final |"))) :]
    assert table[0] == (
        "| run | final | below bar | take-off | rank 4k | rank 8k | rank 20k | rank end "
        "| min rank before take-off (length >= 150) | preact norm 4k | preact norm 8k "
        "| preact norm 20k | preact norm end |"
    )
    # Ordered by take-off (s6-toy-b, at 8192, logged none). 20000 is past the runs' end; s0
    # took off in its first row, so no row precedes it; s5 never did: its whole run's minimum.
    assert table[2:5] == [
        "| s0-toy | 5000 | no | 2k | 58.0 / 61.0 | 61.0 / 60.0 | - / - | 62.0 / 59.0 | - / - "
        "| 2.0 / 3.0 | 4.0 / 5.0 | - / - | 5.0 / 6.0 |",
        "| s1-toy | 3000 | yes | 6k | 39.0 / 60.2 | 55.0 / 61.0 | - / - | 56.0 / 61.0 "
        "| 39.0 / 60.2 | 2.5 / 6.0 | 4.5 / 4.0 | - / - | 5.5 / 3.0 |",
        "| s5-toy-b | 900 | yes | never | 40.0 / 61.0 | 30.0 / 61.0 | - / - | 35.0 / 61.0 "
        "| 30.0 / 61.0 | 20.5 / 1.0 | 40.0 / 1.0 | - / - | 50.0 / 1.0 |",
    ]
    # At 4096: s0 above the bar, s1 and s5 below (finals 5000.5, 3000, 900). Policy rank 58,
    # 39, 40 ranks 3, 1, 2 against the finals' 3, 2, 1: rho 0.5, and with one degree of
    # freedom p = 1 - 2 atan(t) / pi, t = 0.5 / sqrt(0.75): 2 / 3. Value rank 61, 60.2, 61
    # (ties at 2.5): rho 0. Policy norm 2, 2.5, 20.5: rho -1. Value norm 3, 6, 1: as the rank.
    assert table[6:12] == [
        "| at 4k | median above bar (seeds) | median below bar (seeds) "
        "| Spearman rho with final (p) |",
        "|---|---:|---:|---:|",
        "| policy_feature_rank | 58.0 (1) | 39.5 (2) | 0.500 (6.7e-01) |",
        "| value_feature_rank | 61.0 (1) | 60.6 (2) | 0.000 (1.0e+00) |",
        "| policy_preact_norm_0 | 2.0 (1) | 11.5 (2) | -1.000 (0.0e+00) |",
        "| value_preact_norm_0 | 3.0 (1) | 3.5 (2) | 0.500 (6.7e-01) |",
    ]
    assert table[12:] == [
        "",
        "No representation columns for s6-toy-b: their runs did not log them "
        "(train with `representation_diagnostics=true`).",
    ]
    # At the default 300k, past every run's end: no medians, and Spearman's rho is undefined.
    rows = failure_modes.takeoff_rows(sets, (150,), runs, results)
    lines = failure_modes.representation_lines(rows, 150, steps)
    assert "| value_preact_norm_0 | - (1) | - (2) | - (constant) |" in lines


def test_early_signals_against_the_take_off_step_of_synthetic_runs(failure_modes, toy):
    runs, results = toy
    sets = [failure_modes.SeedSet("toy", (0, 1)), failure_modes.SeedSet("toy-b", (5, 6))]
    rows = failure_modes.takeoff_rows(sets, (150,), runs, results)
    lines = failure_modes.early_signal_lines(
        rows, 150, ["policy_feature_rank", "entropy"], (4096, 20000)
    )
    # At 4096, s6 logged no rank: s0, s1, s5 take off at 2048, 6144 and never (ranks 1, 2, 3)
    # with ranks 58, 39, 40 (ranks 3, 1, 2): sum d^2 = 6, rho = 1 - 36 / 24, and with one
    # degree of freedom p = 1 - 2 atan(t) / pi, t = 0.5 / sqrt(0.75): 2 / 3. 20000 is past
    # every run's end, and no run logged an entropy: rho undefined.
    assert lines == [
        "| signal: Spearman rho with the take-off step (length >= 150), p | 4k | 20k |",
        "|---|---:|---:|",
        "| policy_feature_rank | -0.500 (6.7e-01) | - (constant) |",
        "| entropy | - (constant) | - (constant) |",
    ]
    report = failure_modes.takeoff_report(sets, (150,), None, runs, results, early=["length"])
    assert "| signal: Spearman rho with the take-off step (length >= 150), p | 100k |" in report
    assert "signal:" not in failure_modes.takeoff_report(sets, (150,), None, runs, results)


def test_representation_note_alone_where_no_run_logged_it(failure_modes, toy):
    runs, results = toy
    sets = [failure_modes.SeedSet("toy-b", (6,))]
    report = failure_modes.takeoff_report(sets, (150,), None, runs, results)
    assert "rank" not in report.split("Fisher's exact p")[1]
    assert report.endswith(
        "\n\nNo representation columns for s6-toy-b: their runs did not log them "
        "(train with `representation_diagnostics=true`)."
    )


def test_representation_of_committed_humanoid_runs(failure_modes):
    run = failure_modes.load_run(RUNS / "s4-humanoid_fast-adam99")
    assert failure_modes.logs_representation(run)
    # Its train rows at 290816 and 301056: the latter is nearer 300k.
    assert failure_modes.representation_at(run, "value_feature_rank", 300_000) == 60.8
    assert failure_modes.representation_at(run, "policy_preact_norm_0", 295_000) == (
        13.187335395812989
    )
    old = failure_modes.load_run(RUNS / "s0-humanoid_fast")
    assert not failure_modes.logs_representation(old)
    assert np.isnan(old["train"]["policy_feature_rank"]).all()


def test_takeoff_summary_ranks_a_never_last_and_splits_at_the_median(failure_modes):
    def row(step, final):
        return {"takeoff": {150: step}, "final": final, "below": final < 3850}

    rows = [row(2048, 5000), row(6144, 3000), row(8192, 4000), row(None, 900)]
    t = failure_modes.takeoff_summary(rows, 150)
    # Ranks of the take-off 1, 2, 3, 4 (never last), of the finals 4, 2, 3, 1: sum d^2 = 18,
    # rho = 1 - 6 * 18 / (4 * 15); with n - 2 = 2 degrees of freedom the t test's p is 1 - |rho|.
    assert t["rho"] == pytest.approx(-0.8, abs=1e-12)
    assert t["p"] == pytest.approx(0.2, abs=1e-12)
    assert t["never"] == 1
    assert t["split"] == 7168.0  # the median of 2048, 6144, 8192 and never
    assert t["early"] == (1, 2) and t["late"] == (1, 2)
    assert t["fisher_p"] == pytest.approx(1.0)
    # Three early seeds above the bar, three late below: Fisher's two tails of 1 / C(6, 3).
    rows = [row(s, f) for s, f in [(1, 5000), (2, 4000), (3, 6000), (4, 100), (5, 200), (None, 50)]]
    t = failure_modes.takeoff_summary(rows, 150, split=3)
    assert t["early"] == (0, 3) and t["late"] == (3, 3)
    assert t["fisher_p"] == pytest.approx(2 / 20, abs=1e-12)
    # Finals ranks 5, 4, 6, 2, 3, 1 against take-off ranks 1-6: sum d^2 = 16+4+9+4+4+25 = 62.
    assert t["rho"] == pytest.approx(1 - 6 * 62 / (6 * 35), abs=1e-12)


def test_takeoff_of_committed_humanoid_runs(failure_modes):
    rows = failure_modes.takeoff_rows([failure_modes.SeedSet("humanoid_fast", (0, 1))])
    # metrics.jsonl of s0-humanoid_fast: mean training length 153.1 at step 401408, the
    # first row at or above 150; s1 never reaches 250 (226 at most).
    assert rows[0]["takeoff"] == {150: 401408, 200: 512000, 250: 620544}
    assert rows[1]["takeoff"] == {150: 710656, 200: 911360, 250: None}
    assert rows[0]["final"] == 5281.178880004883  # humanoid_fast-1M-10seeds.csv, mean_return
    assert rows[1]["below"] and not rows[0]["below"]


def test_final_results_reads_both_csv_formats(failure_modes, tmp_path):
    evaluate = tmp_path / "evaluate.csv"
    evaluate.write_text(
        EVALUATE_HEADER
        + "docs/runs/s1-toy-ln,1,5441.5,1000,0.0,0.55\n"
        + "docs/runs/s1-toy-kl06,1,1107.0,212.1,1.0,0.42\n"
        + "docs/runs/s3-toy-ln,3,3374.75,598.5,0.87,0.68\n"
    )
    assert failure_modes.final_results(evaluate, "toy-ln") == {
        1: {"score": 5441.5, "length": 1000.0, "falls": 0.0, "velocity": 0.55},
        3: {"score": 3374.75, "length": 598.5, "falls": 0.87, "velocity": 0.68},
    }
    with pytest.raises(ValueError, match="several rows for seed 1"):
        failure_modes.final_results(evaluate)
    published = tmp_path / "published.csv"
    published.write_text("seed,score\n20,1148.5\n21,5402.25\n")
    assert failure_modes.final_results(published) == {20: {"score": 1148.5}, 21: {"score": 5402.25}}
    assert failure_modes.final_results(published, "toy") == {
        20: {"score": 1148.5},
        21: {"score": 5402.25},
    }
    other = tmp_path / "other.csv"
    other.write_text("seed,return\n0,1.0\n")
    with pytest.raises(ValueError, match="no mean_return or score column"):
        failure_modes.final_results(other)
    # The committed files of both formats.
    tuning = failure_modes.final_results(ROOT / "docs/results/humanoid_fast-1M-10seeds.csv")
    fresh = failure_modes.final_results(ROOT / "docs/results/humanoid_fast-1M-seeds20-29.csv")
    assert tuning[1]["score"] == 2068.2444897460937 and tuning[1]["falls"] == 1.0
    assert fresh[26] == {"score": 809.8918731689453}


def test_results_file_and_seed_set_names(failure_modes, tmp_path):
    (tmp_path / "g-1M-10seeds.csv").write_text("seed,score\n")
    (tmp_path / "g-1M-seeds20-29.csv").write_text("seed,score\n")
    (tmp_path / "g-ln-1M-seeds20-29.csv").write_text("seed,score\n")
    assert failure_modes.results_file("g", range(10), tmp_path).name == "g-1M-10seeds.csv"
    assert failure_modes.results_file("g", [1, 3], tmp_path).name == "g-1M-10seeds.csv"
    assert failure_modes.results_file("g", range(20, 30), tmp_path).name == "g-1M-seeds20-29.csv"
    assert failure_modes.results_file("g", [25], tmp_path).name == "g-1M-seeds20-29.csv"
    with pytest.raises(FileNotFoundError, match=r"no g-1M-seeds<first>-<last>\.csv .* seeds 10-19"):
        failure_modes.results_file("g", range(10, 20), tmp_path)
    with pytest.raises(FileNotFoundError, match="for seeds 5-9,20"):  # no file holds them all
        failure_modes.results_file("g", [5, 6, 7, 8, 9, 20], tmp_path)
    (tmp_path / "g-1M-seeds0-19.csv").write_text("seed,score\n")
    with pytest.raises(FileNotFoundError, match=r"g-1M-10seeds\.csv and g-1M-seeds0-19\.csv"):
        failure_modes.results_file("g", [4], tmp_path)
    parse = failure_modes.SeedSet.parse
    assert parse("humanoid_fast-ln:0-4,9@screens.csv") == failure_modes.SeedSet(
        "humanoid_fast-ln", (0, 1, 2, 3, 4, 9), "screens.csv"
    )
    assert parse("humanoid_fast:20-29").seeds == tuple(range(20, 30))
    for bad in ("humanoid_fast", "humanoid_fast:", ":0-9", "humanoid_fast:0-x"):
        with pytest.raises(ValueError, match="write GROUP:SEEDS"):
            parse(bad)


def test_takeoff_command_line(failure_modes, capsys):
    assert failure_modes.main(["--takeoff", "humanoid_fast:0-1", "--takeoff-lengths", "150"]) == 0
    out = capsys.readouterr().out
    assert "| s0-humanoid_fast | 5281 | no | 401k |" in out
    assert "signal:" not in out
    argv = ["--takeoff", "humanoid_fast:0-2", "--takeoff-lengths", "150", "--early", "entropy"]
    assert failure_modes.main(argv) == 0
    assert "\n| entropy | " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        failure_modes.main(["--takeoff", "humanoid_fast:0-x"])
    assert "seed set 'humanoid_fast:0-x': write GROUP:SEEDS" in capsys.readouterr().err

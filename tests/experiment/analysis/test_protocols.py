"""protocols: the training-window and max-eval-mean scores, exact, from written run dirs."""

from __future__ import annotations

import csv
import json
import lzma
import warnings

import numpy as np
import pytest

from batchppo import cli
from batchppo.experiment.analysis import protocols
from batchppo.experiment.config import configs
from batchppo.experiment.errors import UserError


def write_run(tmp_path, name: str, seed: int, records: list[dict]):
    """A run dir ``<tmp>/T-<name>-s<seed>`` of the pendulum_jax preset with these reports."""
    run_dir = tmp_path / f"T-{name}-s{seed}"
    run_dir.mkdir()
    config = configs.replace_config(configs.get_preset("pendulum_jax"), {"seed": seed})
    configs.save_config(config, run_dir / "config.yaml")
    text = "".join(json.dumps(r) + "\n" for r in records)
    (run_dir / "metrics.jsonl").write_text(text)
    return run_dir


def train(step: int, score: float | None, episodes: int) -> dict:
    return {"step": step, "phase": "train", "score": score, "episodes": episodes}


def evals(step: int, score: float, **more) -> dict:
    return {"step": step, "phase": "eval", "score": score, "episodes": 16, **more}


def episode(step: int, ret: float | None, length: int = 10, terminated: bool = True) -> dict:
    return {"step": step, "return": ret, "length": length, "terminated": terminated,
            "truncated": not terminated}  # fmt: skip


def write_episodes(run_dir, records: list[dict]) -> None:
    (run_dir / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_training_window_takes_exactly_the_last_episodes_of_episodes_jsonl(tmp_path):
    run_dir = write_run(tmp_path, "p", 3, [train(10, 100.0, 3), train(20, 2.0, 3)])
    # The reports' means would put the window's oldest episode at 100.0; the file has it.
    write_episodes(run_dir, [
        episode(4, 150.0), episode(8, 50.0, 20, False), episode(10, 100.0), episode(14, 1.5),
        episode(18, -0.25, 30, False), episode(20, 4.75),
    ])  # fmt: skip
    window = protocols.training_window(run_dir, 4)
    assert window["mean_return"] == (100.0 + 1.5 - 0.25 + 4.75) / 4
    returns = np.array([100.0, 1.5, -0.25, 4.75])
    assert window["std_return"] == returns.std()
    assert window["stderr_return"] == returns.std() / 2
    assert window["returns"] == returns.tolist() and window["mean_length"] == 15.0
    assert window["terminated_fraction"] == 0.75 and window["unit"] == "episodes"
    assert (window["first_step"], window["checkpoint"], window["episodes"]) == (10, 20, 4)
    assert (window["seed"], window["protocol"]) == (3, "training-window-exact")
    # Returns are float32: a record's decimal reads back as the float32 the run summed.
    write_episodes(run_dir, [episode(4, -1234.5679)])
    assert protocols.training_window(run_dir, 1)["mean_return"] == float(np.float32(-1234.5679))
    with pytest.raises(
        UserError, match=r"episodes\.jsonl holds 1 episodes, fewer than the 2 asked"
    ):
        protocols.training_window(run_dir, 2)
    write_episodes(run_dir, [episode(4, 1.0), episode(8, None)])  # a non-finite return
    assert np.isnan(protocols.training_window(run_dir, 2)["mean_return"])


def test_a_run_whose_logs_are_stored_xz_compressed_is_scored_the_same(tmp_path):
    # The repository keeps its published runs' logs as *.jsonl.xz (bench/rundata.py).
    run_dir = write_run(tmp_path, "p", 3, [train(10, 100.0, 3), train(20, 2.0, 3)])
    write_episodes(run_dir, [episode(4, 150.0), episode(10, 100.0), episode(20, 4.75)])
    plain = protocols.training_window(run_dir, 2)
    for name in ("metrics.jsonl", "episodes.jsonl"):
        log = run_dir / name
        (run_dir / f"{name}.xz").write_bytes(lzma.compress(log.read_bytes()))
        log.unlink()
    packed = protocols.training_window(run_dir, 2)
    assert packed == plain and packed["protocol"] == "training-window-exact"
    assert packed["mean_return"] == (100.0 + 4.75) / 2


def test_over_atari_envs_the_window_takes_the_last_whole_games(tmp_path):
    run_dir = write_run(tmp_path, "a", 0, [train(10, 1.0, 4)])
    games = [{"step": 10, "game_score": score} for score in (3.0, 12.0, 30.0)]
    write_episodes(run_dir, [episode(2, 1.0), episode(5, 1.0), *games, episode(12, 0.0)])
    window = protocols.training_window(run_dir, 2)
    assert (window["unit"], window["mean_return"], window["returns"]) == ("games", 21.0, [12, 30])
    assert "mean_length" not in window
    with pytest.raises(UserError, match="holds 3 games, fewer than the 4 asked"):
        protocols.training_window(run_dir, 4)


def test_without_episodes_jsonl_the_window_is_approximated_from_the_reports_and_says_so(
    tmp_path,
):
    run_dir = write_run(
        tmp_path, "p", 3,
        [train(10, 100.0, 50), train(20, None, 0), evals(20, 7.0), train(30, -10.0, 30),
         train(40, 2.0, 10), train(50, None, 0)],
    )  # fmt: skip
    with pytest.warns(protocols.ApproximateWindowWarning, match="has no episodes.jsonl"):
        window = protocols.training_window(run_dir, 40)
    assert window["episodes"] == 40 and window["first_step"] == 30
    assert window["first_episodes"] == [30, 30]
    assert window["mean_return"] == (-10.0 * 30 + 2.0 * 10) / 40
    assert window["std_return"] is None and window["stderr_return"] is None
    assert (window["checkpoint"], window["seed"]) == (40, 3)
    assert window["protocol"] == "training-window-approx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", protocols.ApproximateWindowWarning)
        # 41 episodes: the last 40, and 1 of the 50 of the report at step 10, at its mean.
        wide = protocols.training_window(run_dir, 41)
        assert (wide["episodes"], wide["first_step"], wide["first_episodes"]) == (41, 10, [1, 50])
        assert wide["mean_return"] == (100.0 - 300.0 + 20.0) / 41
        # Fewer than one report's worth: part of the last report alone.
        narrow = protocols.training_window(run_dir, 4)
        assert (narrow["episodes"], narrow["first_step"]) == (4, 40)
        assert narrow["first_episodes"] == [4, 10] and narrow["mean_return"] == 2.0
        assert protocols.training_window(run_dir, 90)["mean_return"] == (5000 - 300 + 20) / 90
        with pytest.raises(UserError, match="hold 90 episodes, fewer than the 91 asked"):
            protocols.training_window(run_dir, 91)
    with pytest.raises(UserError, match="must be >= 1"):
        protocols.training_window(run_dir, 0)


def test_max_eval_mean_over_the_shared_steps(tmp_path):
    a = write_run(tmp_path, "p", 0, [evals(10, 1.0), evals(20, 5.0), evals(30, 2.0)])
    b = write_run(tmp_path, "p", 1, [evals(10, 3.0), evals(20, 1.0), evals(30, 8.0)])
    c = write_run(tmp_path, "p", 2, [evals(10, 2.0), evals(30, 2.0)])  # never evaluated at 20
    m = protocols.max_eval_mean([a, b, c])
    # Shared steps 10 and 30: means 2.0 and 4.0.
    assert (m["value"], m["step"], m["points"], m["runs"]) == (4.0, 30, 2, 3)
    assert m["std"] == pytest.approx((((2 - 4) ** 2 * 2 + (8 - 4) ** 2) / 3) ** 0.5, rel=1e-12)
    assert protocols.max_eval_mean([a, b], max_step=20)["value"] == 3.0
    with pytest.raises(UserError, match="share no evaluation step up to step 5"):
        protocols.max_eval_mean([a, b], max_step=5)


def test_max_eval_mean_says_how_the_evaluations_acted_and_refuses_a_mix(tmp_path):
    old = write_run(tmp_path, "p", 0, [evals(10, 1.0)])  # written before eval_actions: mean
    mean = write_run(tmp_path, "p", 1, [evals(10, 3.0, actions="mean")])
    sampled = write_run(tmp_path, "p", 2, [evals(10, 2.0, actions="sampled")])
    assert protocols.max_eval_mean([old, mean])["actions"] == "mean"
    assert protocols.max_eval_mean([sampled])["actions"] == "sampled"
    with pytest.raises(UserError, match=r"act differently \(mean and sampled actions\)"):
        protocols.max_eval_mean([old, sampled])


def test_cli_scores_runs_by_training_window_and_max_eval_mean(tmp_path, capsys):
    runs = [
        write_run(tmp_path, "p", s, [train(10, 10.0 * (s + 1), 5), evals(10, float(s))])
        for s in range(3)
    ]
    for s in (0, 1):  # the third run predates episodes.jsonl
        write_episodes(runs[s], [episode(2 * i, 10.0 * (s + 1)) for i in range(1, 6)])
    out, table = tmp_path / "stats.json", tmp_path / "runs.csv"
    results = tmp_path / "results.json"
    argv = ["evaluate", *map(str, runs), "--training-window", "5", "--max-eval-mean",
            "--stats-json", str(out), "--bootstrap", "100", "--json", str(results),
            "--csv", str(table)]  # fmt: skip
    with pytest.warns(protocols.ApproximateWindowWarning) as warned:
        assert cli.main(argv) == 0
    assert [str(w.message).split(" has no")[0] for w in warned] == [str(runs[2])]
    printed = capsys.readouterr().out
    assert (
        f"{runs[1]}: Pendulum-v1 mean return 20.00 ± 0.00 (standard error) over its last 5 "
        "training episodes (steps 2-10; sampled actions; exact)"
    ) in printed
    assert (
        f"{runs[2]}: Pendulum-v1 mean return 30.00 over its last 5 training episodes (steps "
        "10-10; sampled actions; approximated from its train reports' means)"
    ) in printed
    assert "mean over 3 runs: 20.00 ± 8.16" in printed
    assert "group p: Pendulum-v1 max-eval-mean 1.0 at step 10" in printed
    assert "evaluation points of 16 episodes, mean actions)" in printed
    saved = json.loads(out.read_text())
    assert saved["max_eval_mean"]["p"]["Pendulum-v1"]["value"] == 1.0
    expected = ["training-window-exact"] * 2 + ["training-window-approx"]
    assert [r["protocol"] for r in json.loads(results.read_text())["runs"]] == expected
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert [(row["protocol"], row["actions"]) for row in rows] == [(p, "sampled") for p in expected]
    # A results file of before the two were told apart (protocol training-window) still prints.
    old = json.loads(results.read_text())
    old["runs"] = [{**old["runs"][2], "protocol": "training-window"}]
    results.write_text(json.dumps(old))
    assert cli.main(["evaluate", str(results)]) == 0
    assert "approximated from its train reports' means" in capsys.readouterr().out
    for flag in (["--sample"], ["--mean-action"], ["--episodes", "5"]):
        argv = ["evaluate", str(runs[0]), "--training-window", "5", *flag]
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == (
            "batchppo: error: --training-window reads the runs' training episodes: it takes none "
            "of --sample, --mean-action, --checkpoint and --episodes\n"
        )

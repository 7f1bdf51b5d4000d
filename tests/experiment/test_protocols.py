"""protocols: the training-window and max-eval-mean scores, exact, from written run dirs."""

from __future__ import annotations

import json

import pytest

from batchppo import cli
from batchppo.experiment import configs, protocols
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


def test_training_window_holds_exactly_the_last_episodes_asked(tmp_path):
    run_dir = write_run(
        tmp_path, "p", 3,
        [train(10, 100.0, 50), train(20, None, 0), evals(20, 7.0), train(30, -10.0, 30),
         train(40, 2.0, 10), train(50, None, 0)],
    )  # fmt: skip
    window = protocols.training_window(run_dir, 40)
    assert window["episodes"] == 40 and window["first_step"] == 30
    assert window["first_episodes"] == [30, 30]
    assert window["mean_return"] == (-10.0 * 30 + 2.0 * 10) / 40
    assert (window["checkpoint"], window["seed"], window["protocol"]) == (40, 3, "training-window")
    # 41 episodes: the last 40, and 1 of the 50 of the report at step 10, at its mean.
    wide = protocols.training_window(run_dir, 41)
    assert (wide["episodes"], wide["first_step"], wide["first_episodes"]) == (41, 10, [1, 50])
    assert wide["mean_return"] == (100.0 - 300.0 + 20.0) / 41
    # Fewer than one report's worth: part of the last report alone.
    narrow = protocols.training_window(run_dir, 4)
    assert (narrow["episodes"], narrow["first_step"], narrow["first_episodes"]) == (4, 40, [4, 10])
    assert narrow["mean_return"] == 2.0
    assert protocols.training_window(run_dir, 90)["mean_return"] == (5000.0 - 300.0 + 20.0) / 90
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
    out = tmp_path / "stats.json"
    argv = ["evaluate", *map(str, runs), "--training-window", "5",
            "--max-eval-mean", "--stats-json", str(out), "--bootstrap", "100"]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{runs[1]}: Pendulum-v1 mean return 20.00 over its last 5 training episodes" in printed
    assert "mean over 3 runs: 20.00 ± 8.16" in printed
    assert "group p: Pendulum-v1 max-eval-mean 1.0 at step 10" in printed
    assert "evaluation points of 16 episodes, mean actions)" in printed
    saved = json.loads(out.read_text())
    assert saved["max_eval_mean"]["p"]["Pendulum-v1"]["value"] == 1.0
    argv = ["evaluate", str(runs[0]), "--training-window", "5", "--sample"]
    assert cli.main(argv) == 2
    assert "takes neither --sample nor --checkpoint" in capsys.readouterr().err

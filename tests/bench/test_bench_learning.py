"""bench/learning.py's SAC and Atari comparisons: the extrapolation, the threshold read-off and
CleanRL's score, exactly."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from benchlib import load_bench

from batchppo.experiment.artifacts.logging import read_metrics

ROOT = Path(__file__).resolve().parents[2]


def bench_learning():
    return load_bench("learning")


def test_extrapolation_keeps_the_warmup_and_scales_the_learning_steps():
    learning = bench_learning()
    # 10,000 warm-up steps in 20 s; 2,000 learning steps in 50 s: 25 ms for each of 990,000.
    assert learning.extrapolate_seconds(20.0, 10_000, 50.0, 2_000, 1_000_000) == 24_770.0
    assert learning.extrapolate_seconds(20.0, 10_000, 50.0, 2_000, 12_000) == 70.0


def test_first_crossing_takes_the_first_eval_at_or_above():
    learning = bench_learning()
    records = [
        {"phase": "eval", "step": 300, "score": 9.0, "wall_time": 30.0},
        {"phase": "train", "step": 100, "score": 50.0, "wall_time": 10.0},
        {"phase": "eval", "step": 200, "score": 5.0, "wall_time": 20.0},
        {"phase": "eval", "step": 100, "score": 1.0, "wall_time": 10.0},
        {"phase": "eval", "step": 400, "score": 12.0, "wall_time": 40.0},
    ]
    assert learning.first_crossing(records, 5.0) == records[2]  # at, not above
    assert learning.first_crossing(records, 6.0) == records[0]
    assert learning.first_crossing(records, 12.5) is None
    with pytest.raises(ValueError, match="the eval at step 100 carries no wall_time"):
        learning.first_crossing([{"phase": "eval", "step": 100, "score": 3.0}], 1.0)


def test_first_crossing_of_the_committed_hopper_run():
    learning = bench_learning()
    records = read_metrics(ROOT / "docs" / "runs" / "s0-hopper_fast")
    crossing = learning.first_crossing(records, learning.SAC_1M_RETURN)
    assert crossing["step"] == 700_416
    assert crossing["score"] >= 2787.0
    evals = [r for r in records if r["phase"] == "eval" and r["step"] < 700_416]
    assert max(r["score"] for r in evals) < 2787.0


def test_cleanrl_s_score_is_the_mean_of_the_games_of_the_last_tenth():
    learning = bench_learning()
    returns = [(100, 1.0), (850, 2.0), (900, 3.0), (901, 5.0), (1000, 10.0)]
    assert learning.final_training_score(returns, 1000) == (7.5, 2)  # after step 900
    assert learning.final_training_score(returns, 1000, fraction=0.2) == (5.0, 4)
    with pytest.raises(ValueError, match="no episode ended after step 1,800"):
        learning.final_training_score(returns, 2000)


def test_cleanrl_s_windows_hold_the_games_of_the_tenth_up_to_each_point():
    learning = bench_learning()
    returns = [(100, 1.0), (450, 2.0), (500, 4.0), (501, 8.0), (900, 3.0), (901, 5.0)]
    assert learning.training_windows(returns, 1000, 500) == [
        {"step": 500, "mean_return": 3.0, "games": 2},  # steps 401-500
        {"step": 1000, "mean_return": 5.0, "games": 1},  # steps 901-1000
    ]
    empty = {"step": 250, "mean_return": None, "games": 0}  # no game in steps 151-250
    assert learning.training_windows(returns, 1000, 250)[0] == empty
    final = learning.training_windows(returns, 1000, 500)[-1]
    assert (final["mean_return"], final["games"]) == learning.final_training_score(returns, 1000)


def test_cleanrl_runs_the_game_without_frame_skip_on_the_cpu_and_saves_its_agent():
    learning = bench_learning()
    command = learning.cleanrl_command("/x/cleanrl", "Pong", 5000, 3)
    runner = str(Path(learning.__file__).with_name("cleanrl_atari.py"))
    assert command[1:] == [
        runner, "train", "--model", "ppo_atari.cleanrl_model", "--",
        "/x/cleanrl/cleanrl/ppo_atari.py", "--env-id", "PongNoFrameskip-v4",
        "--total-timesteps", "5000", "--seed", "3", "--no-cuda", "--exp-name", "bench",
    ]  # fmt: skip


def test_a_relative_cleanrl_dir_reaches_the_script_run_in_its_fresh_directory(
    tmp_path, monkeypatch
):
    learning = bench_learning()
    (tmp_path / "cl" / "cleanrl").mkdir(parents=True)
    (tmp_path / "cl" / "cleanrl" / "ppo_atari.py").touch()
    seen = {}

    def fake_run(command, timeout, cwd, env):
        seen.update(command=command, pythonpath=env["PYTHONPATH"])
        return load_bench("harness").Finished(2, "", "stopped here", 1.5, 0.5, timeout)

    monkeypatch.setattr(learning, "run_process", fake_run)
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(cleanrl_dir="cl", atari="Pong", steps=5000, seed=3, timeout=1.0)
    assert learning.run_cleanrl_atari(args) == {
        "error": "exit 2: stopped here",
        "exit": 2,
        "seconds": 1.5,
        "cpu_seconds": 0.5,
    }
    assert seen["command"][6] == str(tmp_path / "cl" / "cleanrl" / "ppo_atari.py")
    assert seen["pythonpath"] == str(tmp_path / "cl")


def test_sides_run_one_after_the_other_and_their_times_are_compared(tmp_path, monkeypatch, capsys):
    learning = bench_learning()
    figures = {
        "sb3": {"score": 1000.0, "returns": [900.0, 1100.0], "seconds": 600.0,
                "cpu_seconds": 1200.0},
        "batchppo": {"score": 1500.0, "returns": [1500.0, 1500.0], "seconds": 150.0,
                     "cpu_seconds": 300.0},
    }  # fmt: skip
    ran = []

    def spawn(runner, args, worker_args=()):
        ran.append((runner, args.steps, args.seed))
        return dict(figures[runner])

    monkeypatch.setattr(learning, "_spawn", spawn)
    out = tmp_path / "learning.json"
    argv = ["learning.py", "--steps", "2048", "--seed", "3", "--json", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    learning.main()
    assert ran == [("sb3", 2048, 3), ("batchppo", 2048, 3)]
    lines = capsys.readouterr().out.splitlines()
    assert "sb3: return 1000 (std over episodes 100), wall-clock 10.0 min, CPU 20.0 min" in lines
    assert lines[-3:] == [
        "ratio return batchppo / sb3 = 1.50",
        "ratio wall-clock batchppo / sb3 = 0.250",
        "ratio CPU time batchppo / sb3 = 0.250",
    ]
    written = json.loads(out.read_text())
    assert written["batchppo"] == {**figures["batchppo"], "side": "batchppo", "round": 0}
    assert written["command"] == "learning.py --steps 2048 --seed 3 --json " + str(out)


def test_our_atari_side_alone_needs_no_cleanrl_checkout(monkeypatch, capsys):
    learning = bench_learning()
    ran = []
    monkeypatch.setattr(learning, "atari", ran.append)
    monkeypatch.setattr(sys, "argv", ["learning.py", "--atari", "Breakout", "--only", "batchppo"])
    learning.main()
    assert [a.only for a in ran] == ["batchppo"]
    monkeypatch.setattr(sys, "argv", ["learning.py", "--atari", "Breakout"])
    with pytest.raises(SystemExit) as stop:
        learning.main()
    assert stop.value.code == 2 and len(ran) == 1
    assert "--atari needs --cleanrl-dir DIR" in capsys.readouterr().err

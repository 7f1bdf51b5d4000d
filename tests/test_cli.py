"""The command line: every bad input exits 2 with one line and no traceback."""

from __future__ import annotations

import errno
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from batchppo import cli
from batchppo.experiment import checkpoint as ckpt
from batchppo.experiment import configs

sys.path.insert(0, str(Path(__file__).parent / "experiment"))
from experiment_fakes import FakeSeedsTrainer, FakeTrainer


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *parts: str) -> None:
    assert code == 2
    assert err.startswith("batchppo: error: ")
    assert err.count("\n") == 1 and "Traceback" not in err
    for part in parts:
        assert part in err, (part, err)


def make_run(tmp_path: Path, name: str = "T-cartpole_jax") -> Path:
    run_dir = tmp_path / name
    (run_dir / "checkpoints").mkdir(parents=True)
    configs.save_config(configs.get_preset("cartpole_jax"), run_dir / "config.yaml")
    return run_dir


def test_list(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["config", "env", "backend", "steps", "algorithm"]
    assert len(lines) == 1 + len(configs.PRESETS)
    assert any(line.startswith("pendulum_jax") and "(default)" in line for line in lines)
    assert any(line.split()[:5] == ["humanoid", "Humanoid-v5", "process", "50,000,000", "ppo"]
               for line in lines)  # fmt: skip


def test_unknown_config_lists_valid_names(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "--config", "pendulm", "--logdir", str(tmp_path))
    assert_one_line_error(code, err, "unknown config 'pendulm'", "Did you mean 'pendulum'")
    for name in configs.PRESETS:
        assert name in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("override", "parts"),
    [
        ("stepz=10", ["unknown config key 'stepz'", "Did you mean 'steps'", "Allowed keys: env,"]),
        ("steps=ten", ["config key 'steps' expects int, got 'ten'"]),
        ("anneal_lr=maybe", ["config key 'anneal_lr' expects bool, got 'maybe'"]),
        ("policy_layers=[a]", ["'policy_layers' expects list of int, got ['a']"]),
        ("steps", ["override 'steps' is not of the form KEY=VALUE"]),
        ("discount=1.5", ["invalid config: discount=1.5: must be in (0, 1]"]),
        ("backend=cuda", ["backend='cuda': choose one of"]),
    ],
)
def test_bad_overrides(capsys, tmp_path, override, parts):
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--set", override]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, *parts)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("config", "env", "message"),
    [
        ("cartpole", "CartPole-v9", "unknown Gymnasium env id 'CartPole-v9'. Did you mean"),
        ("cartpole_jax", "Cartpole", "unknown gymnax env id 'Cartpole'"),
    ],
)
def test_unknown_env_id(capsys, tmp_path, config, env, message):
    argv = ["train", "--config", config, "--logdir", str(tmp_path), "--set", f"env={env}"]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, message)
    assert list(tmp_path.iterdir()) == []  # no run dir left behind


def test_resume_refuses_a_change_of_meaning(capsys, tmp_path):
    make_run(tmp_path)
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T"]
    code, _, err = run_cli(capsys, *argv, "--set", "learning_rate=0.5")
    assert_one_line_error(code, err, "cannot change a resumed run's meaning: learning_rate=0.5")


def test_bad_timestamp(capsys, tmp_path):
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "a/b"]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, "--timestamp 'a/b': use a plain name")


def test_existing_dir_that_is_not_a_run(capsys, tmp_path):
    (tmp_path / "T-cartpole_jax").mkdir()
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T"]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, "holds no config.yaml")


def test_visualize_missing_run_dir_and_checkpoints(capsys, tmp_path):
    out = str(tmp_path / "videos")
    code, _, err = run_cli(capsys, "visualize", "--logdir", str(tmp_path / "nope"), "--outdir", out)
    assert_one_line_error(code, err, "run dir", "does not exist")
    run_dir = make_run(tmp_path)
    code, _, err = run_cli(capsys, "visualize", "--logdir", str(run_dir), "--outdir", out)
    assert_one_line_error(code, err, "no checkpoint in")
    (run_dir / "config.yaml").write_text("steps: [\n")
    code, _, err = run_cli(capsys, "visualize", "--logdir", str(run_dir), "--outdir", out)
    assert_one_line_error(code, err, "config.yaml: not valid YAML")
    code, _, err = run_cli(capsys, "visualize", "--logdir", str(run_dir), "--outdir", out,
                           "--num_episodes", "0")  # fmt: skip
    assert_one_line_error(code, err, "--num_episodes 0: must be >= 1")


def test_evaluate_bad_input(capsys, tmp_path):
    code, _, err = run_cli(capsys, "evaluate", "--logdir", str(tmp_path / "nope"))
    assert_one_line_error(code, err, "run dir", "does not exist")
    run_dir = make_run(tmp_path)
    code, _, err = run_cli(capsys, "evaluate", "--logdir", str(run_dir))
    assert_one_line_error(code, err, "no checkpoint in")
    code, _, err = run_cli(capsys, "evaluate", "--logdir", str(run_dir), "--episodes", "0")
    assert_one_line_error(code, err, "--episodes 0: must be >= 1")
    code, _, err = run_cli(capsys, "evaluate", "--logdir", str(run_dir), "--seed", "-1")
    assert_one_line_error(code, err, "--seed -1: must be >= 0")
    argv = ["evaluate", "--logdir", str(run_dir), str(run_dir), "--checkpoint", "512"]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, "--checkpoint picks one run's checkpoint")


@pytest.mark.timeout(60)
def test_visualize_corrupt_or_absent_checkpoint(capsys, tmp_path):
    run_dir = make_run(tmp_path)
    ckpt.atomic_write_bytes(ckpt.checkpoint_path(run_dir / "checkpoints", 512), b"\x00garbage")
    argv = ["visualize", "--logdir", str(run_dir), "--outdir", str(tmp_path / "v")]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, "corrupt or incompatible checkpoint", "ckpt-000000000512")
    code, _, err = run_cli(capsys, *argv, "--checkpoint", "7")
    assert_one_line_error(code, err, "no checkpoint at step 7", "available steps: 512")


def test_plot_missing_run(capsys, tmp_path):
    code, _, err = run_cli(capsys, "plot", str(tmp_path / "nope"), "--out", str(tmp_path / "a.png"))
    assert_one_line_error(code, err, "does not exist")
    run_dir = make_run(tmp_path)
    code, _, err = run_cli(capsys, "plot", str(run_dir), "--out", str(tmp_path / "a.png"))
    assert_one_line_error(code, err, "holds no metrics.jsonl")


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["train", "--config", "cartpole_jax"])
    assert info.value.code == 2
    assert "--logdir" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["plot", "run", "--out", "x.png", "--x", "days"])
    assert info.value.code == 2


def test_train_success_and_ctrl_c_exit_codes(capsys, tmp_path, monkeypatch):
    from batchppo.experiment import loop

    monkeypatch.setattr(loop, "default_trainer_factory", FakeTrainer)
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--progress", "none", "--set", "num_agents=10", "--set", "rollout_length=10",
            "--set", "steps=500", "--set", "eval_every=200"]  # fmt: skip
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    assert out == f"done: 500 steps, eval score 500.00, run dir {tmp_path / 'T-cartpole_jax'}\n"

    monkeypatch.setattr(
        loop, "default_trainer_factory", lambda c: FakeTrainer(c, signal_at=7, signal_num=2)
    )
    code, out, err = run_cli(capsys, *argv[:-4], "--set", "steps=1000")
    assert code == 128 + signal.SIGINT
    assert "stopped at step 700; checkpoint saved at step 700" in err
    assert out.strip() == (
        f"resume with: batchppo train --config cartpole_jax --logdir {tmp_path} --timestamp T "
        "--resume"
    )


def test_a_full_disk_stops_train_with_one_line_and_status_2(capsys, tmp_path, monkeypatch):
    from batchppo.experiment import loop

    monkeypatch.setattr(loop, "default_trainer_factory", FakeTrainer)
    real = ckpt.atomic_write_bytes

    def write(path, data):  # the checkpoint at step 400 meets a full disk
        if path.name == ckpt.checkpoint_path(".", 400).name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, data)

    monkeypatch.setattr(ckpt, "atomic_write_bytes", write)
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--progress", "none", "--set", "num_agents=10", "--set", "rollout_length=10",
            "--set", "steps=1000", "--set", "checkpoint_every=200"]  # fmt: skip
    code, out, err = run_cli(capsys, *argv)
    run_dir = tmp_path / "T-cartpole_jax"
    assert code == 2 and not out
    assert err == (
        f"batchppo: error: writing the checkpoint at step 400 into {run_dir} failed ([Errno 28] "
        "No space left on device); the run stopped and its checkpoint at step 200 is intact: "
        "free some space, then resume it (the same train command with --resume)\n"
    )
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [200]


@pytest.mark.parametrize("seeds", [[], ["--seeds", "2"]], ids=["one-run", "seeds"])
def test_ctrl_c_prints_the_resume_command_of_a_timestamp_with_dashes(
    capsys, tmp_path, monkeypatch, seeds
):
    from batchppo.algorithms.ppo import seeds as ppo_seeds
    from batchppo.experiment import loop

    def trainers(signal_at: int | None) -> None:
        monkeypatch.setattr(
            loop, "default_trainer_factory", lambda c: FakeTrainer(c, signal_at, signal.SIGINT)
        )
        monkeypatch.setattr(
            ppo_seeds, "SeedsTrainer", lambda c, n: FakeSeedsTrainer(c, n, signal_at, signal.SIGINT)
        )

    timestamp = "2026-11-22T10-00-a"
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--progress", "none",
            *seeds, "--timestamp", timestamp, "--set", "num_agents=10",
            "--set", "rollout_length=10", "--set", "steps=1000"]  # fmt: skip
    trainers(signal_at=3)
    code, out, err = run_cli(capsys, *argv)
    assert code == 128 + signal.SIGINT
    assert "stopped at step 300; checkpoint" in err
    assert out.strip().splitlines()[-1] == (
        f"resume with: batchppo train --config cartpole_jax --logdir {tmp_path} "
        f"{' '.join(seeds)}{' ' if seeds else ''}--timestamp {timestamp} --resume"
    )

    trainers(signal_at=None)  # the printed command resumes the run (every seed) to its end
    resume = shlex.split(out.strip().splitlines()[-1].removeprefix("resume with: "))[1:]
    code, out, err = run_cli(capsys, *resume, "--progress", "none")
    assert code == 0, err
    names = [f"cartpole_jax-s{i}" for i in range(2)] if seeds else ["cartpole_jax"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{timestamp}-{n}" for n in names]
    assert all(f"1,000 steps, eval score 1000.00, run dir {tmp_path}/{timestamp}-" in line
               for line in out.strip().splitlines()), out  # fmt: skip


@pytest.mark.parametrize("seeds", [[], ["--seeds", "2"]], ids=["one-run", "seeds"])
def test_resume_of_a_run_that_is_not_there_is_an_error_not_a_new_run(capsys, tmp_path, seeds):
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), *seeds,
            "--timestamp", "T", "--resume"]  # fmt: skip
    code, _, err = run_cli(capsys, *argv)
    missing = "no run dir for cartpole_jax-s0, cartpole_jax-s1" if seeds else "there is no run"
    assert_one_line_error(code, err, missing)
    assert list(tmp_path.iterdir()) == []  # nothing was started
    code, _, err = run_cli(capsys, "train", "--config", "cartpole_jax", "--logdir", str(tmp_path),
                           "--resume")  # fmt: skip
    assert_one_line_error(code, err, "--resume needs --logdir and --timestamp")


@pytest.mark.timeout(60)
def test_python_dash_m_entry_point(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    ok = subprocess.run([sys.executable, "-m", "batchppo", "list"], capture_output=True,
                        text=True, env=env, timeout=60)  # fmt: skip
    assert ok.returncode == 0 and "pendulum_jax" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "batchppo", "train", "--config", "nope", "--logdir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.startswith("batchppo: error: unknown config 'nope'")
    assert bad.stderr.count("\n") == 1

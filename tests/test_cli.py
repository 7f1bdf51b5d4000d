"""The command line: every bad input exits 2 with one line and no traceback."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from batchppo import cli
from batchppo.experiment import trainers
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.config import configs

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


MEAN_16 = "16 episodes, mean action"
"""The protocol of the evaluations of the presets the tests train (``eval_episodes`` 16)."""


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
    # Aligned whatever the names' lengths: each column starts where its header does.
    starts = [lines[0].index(word) for word in ("env", "backend", "algorithm")]
    longest = max(configs.PRESETS, key=len)
    assert len(longest) >= 20  # space_invaders_minatar
    for line in lines[1:]:
        name, env, backend, steps, algorithm = line.split()[:5]
        assert [line.index(f" {env} ") + 1, line.index(f" {backend} ") + 1] == starts[:2]
        assert line.index(f" {algorithm}", len(name) + len(env)) + 1 == starts[2]
        assert line[: starts[2] - 2].endswith(steps)  # steps aligned right


def test_list_marks_each_preset_whose_package_is_missing(capsys, monkeypatch):
    import importlib.util

    absent = {"mujoco", "ale_py", "brax", "jumanji", "craftax"}
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in absent else real(name, *a)
    )
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    notes = {}
    for line in out.splitlines()[1:]:
        note = re.search(r"\(needs (\S+)\)$", line)
        if note:
            notes[line.split()[0]] = note.group(1)
    fast = ["cheetah_fast", "hopper_fast", "walker_fast", "ant_fast", "humanoid_fast"]
    mujoco = [*fast, "reacher_fast", "reacher", "cheetah", "walker", "hopper", "ant", "humanoid"]
    assert notes == {
        "craftax_symbolic": "craftax",
        "breakout_atari": "batchppo[atari]",
        "pong_atari": "batchppo[atari]",
        **dict.fromkeys(mujoco, "batchppo[mujoco]"),
        "ant_brax": "batchppo[brax]",
        "cheetah_brax": "batchppo[brax]",
        "humanoid_brax": "batchppo[brax]",
    }


def test_run_dirs_are_positional_and_the_old_flag_warns(capsys, tmp_path):
    """`evaluate` and `visualize` take RUN as export and plot do; --logdir still works, warned."""
    nope = str(tmp_path / "nope")
    for argv in (["evaluate", nope], ["visualize", nope, "--outdir", "v"], ["export", nope]):
        code, _, err = run_cli(capsys, *argv)
        assert err == f"batchppo: error: run dir {nope} does not exist\n", argv
    code, _, err = run_cli(capsys, "evaluate", "--logdir", nope)
    assert code == 2
    assert err == (
        "batchppo: warning: --logdir RUN is the old spelling of the positional RUN: batchppo "
        f"evaluate RUN ...\nbatchppo: error: run dir {nope} does not exist\n"
    )
    code, _, err = run_cli(capsys, "evaluate", nope, "--logdir", nope)
    assert err == (
        "batchppo: error: batchppo evaluate: name the run dirs once, as RUN (not also --logdir)\n"
    )
    code, _, err = run_cli(capsys, "visualize", "--outdir", "v")
    assert code == 2
    assert err == (
        "batchppo: error: batchppo visualize: the run dir is missing: batchppo visualize RUN ...\n"
    )


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


def annealed_run(tmp_path: Path, name: str) -> Path:
    """A run dir ``T-<name>`` of cartpole_jax with its learning rate annealed to 0."""
    run_dir = make_run(tmp_path, f"T-{name}")
    config = dataclasses.replace(configs.get_preset("cartpole_jax"), anneal_lr=True)
    configs.save_config(config, run_dir / "config.yaml")
    return run_dir


def test_resume_past_an_anneal_to_0_names_the_new_run_that_trains_longer(capsys, tmp_path):
    annealed_run(tmp_path, "cartpole_jax")
    annealed_run(tmp_path, "mine")  # started from a config file: resumed from its config.yaml
    for name, config in (
        ("cartpole_jax", "cartpole_jax"),
        ("mine", f"{tmp_path}/T-mine/config.yaml"),
    ):
        argv = ["train", "--logdir", str(tmp_path), "--timestamp", "T", "--resume", "--name",
                name, "--set", "steps=6e5"]  # fmt: skip
        code, _, err = run_cli(capsys, *argv)
        also = "" if name == "cartpole_jax" else " --name mine"
        assert_one_line_error(code, err)
        assert err == (
            "batchppo: error: cannot extend the run to steps=600000: anneal_lr anneals the "
            "learning rate to 0 over steps=300000 (anneal_lr_end=0), so past them it would train "
            f"at a rate of 0; train a new run of that budget instead: batchppo train --config "
            f"{config}{also} --logdir {tmp_path} --set steps=6e5\n"
        )
        stored = configs.load_config(tmp_path / f"T-{name}" / "config.yaml")
        assert stored.steps == 300_000 and stored.anneal_lr_steps is None  # unchanged


def test_resume_by_timestamp_alone_finds_the_one_run_or_names_the_candidates(capsys, tmp_path):
    argv = ["train", "--logdir", str(tmp_path), "--resume", "--set", "learning_rate=0.5"]
    make_run(tmp_path, "T-mine")
    code, _, err = run_cli(capsys, *argv, "--timestamp", "T")  # found: the change is refused
    assert_one_line_error(code, err, "cannot change a resumed run's meaning: learning_rate=0.5")
    code, _, err = run_cli(capsys, *argv, "--timestamp", "U")
    assert err == (
        f"batchppo: error: --resume --timestamp U: {tmp_path} holds no run dir U-<name>; check "
        "--logdir and --timestamp\n"
    )
    make_run(tmp_path, "T-cartpole_jax")
    for seed in (0, 1):
        make_run(tmp_path, f"T-cartpole_jax-s{seed}")
    (tmp_path / "T-broken").mkdir()  # no config.yaml: not a run
    code, _, err = run_cli(capsys, *argv, "--timestamp", "T")
    assert err == (
        f"batchppo: error: --resume --timestamp T: several runs in {tmp_path} have that "
        "timestamp (T-cartpole_jax, T-cartpole_jax-s0, T-cartpole_jax-s1, T-mine); say which "
        "with --name NAME (the part after the timestamp; a --seeds run's without -s<i>, with "
        "--seeds N)\n"
    )
    for more in (["--name", "cartpole_jax"], ["--seeds", "2"], ["--name", "mine"]):
        code, _, err = run_cli(capsys, *argv, "--timestamp", "T", *more)
        assert_one_line_error(code, err, "cannot change a resumed run's meaning: learning_rate")
    code, _, err = run_cli(capsys, *argv, "--timestamp", "T", "--name", "nope")
    assert_one_line_error(code, err, "--resume --timestamp T --name nope: ", "holds no run dir")
    code, _, err = run_cli(capsys, *argv, "--timestamp", "U", "--seeds", "2")
    assert_one_line_error(code, err, "holds no --seeds run U-<name>-s<i>")


def test_resume_by_timestamp_extends_a_run_whose_anneal_ends_above_0(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    argv = ["train", "--logdir", str(tmp_path), "--timestamp", "T", "--progress", "lines"]
    sets = ["num_agents=10", "rollout_length=10", "steps=1000", "anneal_lr=true",
            "anneal_lr_end=0.5"]  # fmt: skip
    code, _, err = run_cli(capsys, *argv, "--config", "cartpole_jax",
                           *[w for s in sets for w in ("--set", s)])  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(capsys, *argv, "--resume", "--set", "steps=1500")
    assert code == 0, err
    run_dir = tmp_path / "T-cartpole_jax"
    lines = out.splitlines()
    assert lines[:2] == [
        f"resuming {run_dir} from step 1,000",
        "the learning rate anneals from 0.001 to 0.0005 over the first 1,000 steps "
        "(anneal_lr_steps) and holds 0.0005 from there to steps=1,500",
    ]
    assert lines[-1] == (
        f"done: 1,500 steps, eval score 1500.00 (16 episodes, mean action), run dir {run_dir}"
    )
    stored = configs.load_config(run_dir / "config.yaml")
    assert (stored.steps, stored.anneal_lr_steps, stored.anneal_lr_end) == (1500, 1000, 0.5)


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
    code, _, err = run_cli(capsys, "visualize", str(tmp_path / "nope"), "--outdir", out)
    assert_one_line_error(code, err, "run dir", "does not exist")
    run_dir = make_run(tmp_path)
    code, _, err = run_cli(capsys, "visualize", str(run_dir), "--outdir", out)
    assert_one_line_error(code, err, "no checkpoint in")
    (run_dir / "config.yaml").write_text("steps: [\n")
    code, _, err = run_cli(capsys, "visualize", str(run_dir), "--outdir", out)
    assert_one_line_error(code, err, "config.yaml: not valid YAML")
    code, _, err = run_cli(capsys, "visualize", str(run_dir), "--outdir", out,
                           "--num_episodes", "0")  # fmt: skip
    assert_one_line_error(code, err, "--num_episodes 0: must be >= 1")


def test_evaluate_bad_input(capsys, tmp_path):
    code, _, err = run_cli(capsys, "evaluate", str(tmp_path / "nope"))
    assert_one_line_error(code, err, "run dir", "does not exist")
    run_dir = make_run(tmp_path)
    code, _, err = run_cli(capsys, "evaluate", str(run_dir))
    assert_one_line_error(code, err, "no checkpoint in")
    code, _, err = run_cli(capsys, "evaluate", str(run_dir), "--episodes", "0")
    assert_one_line_error(code, err, "--episodes 0: must be >= 1")
    code, _, err = run_cli(capsys, "evaluate", str(run_dir), "--seed", "-1")
    assert_one_line_error(code, err, "--seed -1: must be >= 0")
    argv = ["evaluate", str(run_dir), str(run_dir), "--checkpoint", "512"]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, "--checkpoint picks one run's checkpoint")


class ScoringTrainer(FakeTrainer):
    """A ``FakeTrainer`` that ``evaluate_run`` can score: every episode returns the state's
    step, plus 0.5 with sampled actions, and lasts 7 steps."""

    def evaluate(self, ts, num_episodes, key, task_metrics=False, sample=False) -> dict:
        self.sampled.append(sample)
        score = float(ts.step) + 0.5 * sample
        returns = [score] * num_episodes
        return {
            "score": score, "length": 7.0, "returns": returns, "lengths": [7] * num_episodes,
            "terminated": [False] * num_episodes, "infos": [{}] * num_episodes, "cut": 0,
        }  # fmt: skip


def test_evaluate_scores_by_the_runs_own_protocol_unless_told_and_says_which(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.setattr(trainers, "default_trainer_factory", ScoringTrainer)
    train = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--progress",
             "none", "--set", "num_agents=10", "--set", "rollout_length=10",
             "--set", "steps=500"]  # fmt: skip
    sampled_run, mean_run = tmp_path / "S-cartpole_jax", tmp_path / "M-cartpole_jax"
    code, out, _ = run_cli(capsys, *train, "--timestamp", "S", "--set", "eval_actions=sampled",
                           "--set", "eval_episodes=4")  # fmt: skip
    assert code == 0
    assert out == (
        f"done: 500 steps, eval score 500.50 (4 episodes, sampled actions), run dir {sampled_run}\n"
    )
    assert run_cli(capsys, *train, "--timestamp", "M")[:2] == (
        0, f"done: 500 steps, eval score 500.00 ({MEAN_16}), run dir {mean_run}\n"
    )  # fmt: skip

    def line(run_dir: Path, score: str, how: str) -> str:
        return (
            f"{run_dir}: CartPole-v1 checkpoint 500: mean return {score} ± 0.00 (standard "
            f"error; episodes' std 0.00) over {how}, mean length 7.0"
        )

    results = tmp_path / "r.json"
    code, out, _ = run_cli(capsys, "evaluate", str(sampled_run), "--json", str(results))
    assert code == 0
    assert out.splitlines() == [
        line(sampled_run, "500.50", "4 episodes with sampled actions (the run's own protocol)"),
        "  terminated 0 of 4 episodes",
        f"wrote {results}",
    ]
    (entry,) = json.loads(results.read_text())["runs"]
    assert [entry[k] for k in ("protocol", "actions", "episodes")] == [
        "final-sampled",
        "sampled",
        4,
    ]
    # --mean-action, --sample and --episodes override the run's protocol, each on its own.
    for flags, how in [
        (["--mean-action"], "4 episodes with the mean action (the run's eval_episodes)"),
        (["--episodes", "3"], "3 episodes with sampled actions (the run's eval_actions)"),
        (["--mean-action", "--episodes", "2"], "2 episodes with the mean action"),
    ]:
        code, out, _ = run_cli(capsys, "evaluate", str(sampled_run), *flags)
        score = "500.00" if "--mean-action" in flags else "500.50"
        assert (code, out.splitlines()[0]) == (0, line(sampled_run, score, how))
    code, out, _ = run_cli(capsys, "evaluate", str(mean_run), "--sample", "--episodes", "2")
    assert out.splitlines()[0] == line(mean_run, "500.50", "2 episodes with sampled actions")
    with pytest.raises(SystemExit) as info:
        cli.main(["evaluate", str(sampled_run), "--sample", "--mean-action"])
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err

    # Runs whose own protocols differ are not aggregated, nor compared, until told how.
    for argv in ([str(sampled_run), str(mean_run)], [str(sampled_run), "--compare", str(mean_run)],
                 [str(results), str(mean_run)]):  # fmt: skip
        code, _, err = run_cli(capsys, "evaluate", *argv)
        assert_one_line_error(
            code, err, "the runs would be scored by different protocols (final-sampled: 1 run; "
            "final-mean: 1 run), whose scores do not compare: pass --mean-action or --sample",
        )  # fmt: skip
    code, out, _ = run_cli(capsys, "evaluate", str(sampled_run), str(mean_run), "--mean-action",
                           "--bootstrap", "10")  # fmt: skip
    assert code == 0
    assert out.splitlines()[4:6] == [
        "mean over 2 runs: 500.00 ± 0.00 (std of the runs' means; each 4 or 16 episodes, mean "
        "action)",
        "group cartpole_jax: 2 runs, each 4 or 16 episodes, mean action (95% stratified-"
        "bootstrap intervals)",
    ]

    # A run that does not evaluate has no number of episodes of its own.
    assert run_cli(capsys, *train, "--timestamp", "N", "--set", "eval_episodes=0")[:2] == (
        0, f"done: 500 steps, eval score n/a, run dir {tmp_path / 'N-cartpole_jax'}\n"
    )  # fmt: skip
    code, _, err = run_cli(capsys, "evaluate", str(tmp_path / "N-cartpole_jax"))
    assert_one_line_error(
        code, err, "N-cartpole_jax: its config evaluates no episodes (eval_episodes=0), so it has "
        "no number of episodes of its own: pass --episodes N",
    )  # fmt: skip


@pytest.mark.timeout(60)
def test_visualize_corrupt_or_absent_checkpoint(capsys, tmp_path):
    run_dir = make_run(tmp_path)
    ckpt.atomic_write_bytes(ckpt.checkpoint_path(run_dir / "checkpoints", 512), b"\x00garbage")
    argv = ["visualize", str(run_dir), "--outdir", str(tmp_path / "v")]
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

    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--progress", "none", "--set", "num_agents=10", "--set", "rollout_length=10",
            "--set", "steps=500", "--set", "eval_every=200"]  # fmt: skip
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    assert out == (
        "done: 500 steps, eval score 500.00 (16 episodes, mean action), run dir "
        f"{tmp_path / 'T-cartpole_jax'}\n"
    )

    monkeypatch.setattr(
        trainers, "default_trainer_factory", lambda c: FakeTrainer(c, signal_at=7, signal_num=2)
    )
    code, out, err = run_cli(capsys, *argv[:-4], "--set", "steps=1000")
    assert code == 128 + signal.SIGINT
    assert "stopped at step 700; checkpoint saved at step 700" in err
    assert out.strip() == (
        f"resume with: batchppo train --config cartpole_jax --logdir {tmp_path} --timestamp T "
        "--resume"
    )


def test_train_of_a_complete_run_says_so_in_one_line_and_builds_nothing(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--set", "num_agents=10", "--set", "rollout_length=10",
            "--set", "steps=500"]  # fmt: skip
    assert run_cli(capsys, *argv, "--progress", "none")[0] == 0
    built = len(FakeTrainer.instances)
    code, out, err = run_cli(capsys, *argv, "--resume", "--progress", "lines")
    assert (code, err) == (0, "") and len(FakeTrainer.instances) == built
    run_dir = tmp_path / "T-cartpole_jax"
    final = run_dir / "checkpoints" / "ckpt-000000000500.msgpack"
    assert out == (
        f"run already complete at step 500 (steps=500), nothing to train; final checkpoint "
        f"{final}; to train on, raise steps (--set steps=N)\n"
        f"done: 500 steps, eval score 500.00 (16 episodes, mean action), run dir {run_dir}\n"
    )
    code, out, _ = run_cli(capsys, *argv[:-2], "--set", "steps=600", "--progress", "none")
    assert (code, len(FakeTrainer.instances)) == (0, built + 1)  # more steps: it trains on
    assert out == f"done: 600 steps, eval score 600.00 ({MEAN_16}), run dir {run_dir}\n"


def test_a_full_disk_stops_train_with_one_line_and_status_2(capsys, tmp_path, monkeypatch):

    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
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
    from batchppo.algorithms.ppo import ppo as ppo_module

    def use_trainers(signal_at: int | None) -> None:
        monkeypatch.setattr(
            trainers, "default_trainer_factory", lambda c: FakeTrainer(c, signal_at, signal.SIGINT)
        )
        monkeypatch.setattr(
            ppo_module,
            "SeedsTrainer",
            lambda c, n: FakeSeedsTrainer(c, n, signal_at, signal.SIGINT),
        )

    timestamp = "2026-11-22T10-00-a"
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--progress", "none",
            *seeds, "--timestamp", timestamp, "--set", "num_agents=10",
            "--set", "rollout_length=10", "--set", "steps=1000"]  # fmt: skip
    use_trainers(signal_at=3)
    code, out, err = run_cli(capsys, *argv)
    assert code == 128 + signal.SIGINT
    assert "stopped at step 300; checkpoint" in err
    assert out.strip().splitlines()[-1] == (
        f"resume with: batchppo train --config cartpole_jax --logdir {tmp_path} "
        f"{' '.join(seeds)}{' ' if seeds else ''}--timestamp {timestamp} --resume"
    )

    use_trainers(signal_at=None)  # the printed command resumes the run (every seed) to its end
    resume = shlex.split(out.strip().splitlines()[-1].removeprefix("resume with: "))[1:]
    code, out, err = run_cli(capsys, *resume, "--progress", "none")
    assert code == 0, err
    names = [f"cartpole_jax-s{i}" for i in range(2)] if seeds else ["cartpole_jax"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{timestamp}-{n}" for n in names]
    score = "eval score 1000.00 (16 episodes, mean action)"
    assert all(f"1,000 steps, {score}, run dir {tmp_path}/{timestamp}-" in line
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


# --- Your env, your config ---------------------------------------------------------------------


def broken_line(user_envs: Path, message: str = "the simulator licence expired") -> int:
    """The line of ``myenvs.py`` that raises ``RuntimeError(message)`` (``make_broken``'s)."""
    lines = [line.strip() for line in (user_envs / "myenvs.py").read_text().splitlines()]
    return lines.index(f'raise RuntimeError("{message}")') + 1


def train_own(capsys, logdir: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(capsys, "train", "--logdir", str(logdir), "--progress", "none", *argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--env", "nomodule:MyEnv-v0"],
            "env 'nomodule:MyEnv-v0': cannot import 'nomodule' (No module named 'nomodule'): "
            "put nomodule.py in the working directory or on PYTHONPATH (--debug shows the "
            "traceback)",
        ),
        (
            ["--config", "pendulum_fast", "--set", "env=myenvs:make_reach", "--set",
             "env_kwargs={speed: 2}"],
            "env 'myenvs:make_reach': its constructor does not take an argument of env_kwargs "
            "{'speed': 2} (TypeError: make_reach() got an unexpected keyword argument 'speed'): "
            "fix env_kwargs (--set 'env_kwargs={...}') (--debug shows the traceback)",
        ),
        (
            ["--env", "myenvs:make_broken"],
            "env 'myenvs:make_broken': its constructor raised RuntimeError: the simulator "
            "licence expired at myenvs.py:{broken_line} (`raise RuntimeError(\"the simulator "
            'licence expired")`); fix the env (or env_kwargs) (--debug shows the traceback)',
        ),
        (
            ["--config", "pendulum_fast", "--set", "env=myenvs:make_unresettable"],
            "env 'myenvs:make_unresettable': its reset raised RuntimeError: the simulator lost "
            "its state at myenvs.py:{reset_line} (`raise RuntimeError(\"the simulator lost its "
            'state")`); fix the env (or env_kwargs) (--debug shows the traceback)',
        ),
        (
            ["--env", "brokenenvs:X"],
            "env 'brokenenvs:X': importing 'brokenenvs' failed: NameError: oops (--debug shows "
            "the traceback)",
        ),
        (
            ["--env", "myenvs:make_reech"],
            "env 'myenvs:make_reech': 'make_reech' is neither an env id that myenvs registers "
            "nor a name in myenvs. Did you mean 'make_reach'? Give 'module:EnvId' or "
            "'module:factory'",
        ),
        (
            ["--env", "myenvs:make_nothing"],
            "env 'myenvs:make_nothing': myenvs:make_nothing returned int, not a gymnasium.Env: "
            "return the env instance (--debug shows the traceback)",
        ),
        (
            ["--env", "myenvs:needs_size"],
            "env 'myenvs:needs_size': its constructor needs arguments that env_kwargs {} does "
            "not give (TypeError: needs_size() missing 1 required positional argument: 'size'): "
            "set them, e.g. --set 'env_kwargs={name: value}' (--debug shows the traceback)",
        ),
        (
            ["--env", "myenvs:make_worded"],
            "env 'myenvs:make_worded': HostEnv observation space: space Text(1, 5, charset="
            "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz) is not supported; "
            "supported: Box (any dtype and rank), Discrete (start 0), MultiDiscrete and "
            "MultiBinary, nested in Dict and Tuple. (--debug shows the traceback)",
        ),
        (
            ["--config", "my.yaml"],
            "--config my.yaml: cannot read it (No such file or directory); give a preset name "
            "(`batchppo list`) or the path of a YAML config file",
        ),
    ],
)  # fmt: skip
def test_start_up_failures_are_one_line_exit_2_and_leave_no_run_dir(
    capsys, tmp_path, user_envs, argv, message
):
    code, _, err = train_own(capsys, tmp_path / "logs", *argv)
    assert_one_line_error(code, err)
    message = message.replace("{broken_line}", str(broken_line(user_envs)))
    reset_line = broken_line(user_envs, "the simulator lost its state")
    message = message.replace("{reset_line}", str(reset_line))
    assert err == f"batchppo: error: {message}\n"
    assert not (tmp_path / "logs").exists()  # nothing made


def test_debug_shows_the_traceback_of_what_the_env_raised(capsys, tmp_path, user_envs):
    code, _, err = train_own(capsys, tmp_path, "--env", "myenvs:make_broken", "--debug")
    assert code == 2
    assert "Traceback" in err and "RuntimeError: the simulator licence expired" in err
    assert list(tmp_path.iterdir()) == []


def test_the_working_directory_is_importable_only_while_the_command_runs(capsys, user_envs):
    import sys as system

    assert str(user_envs) not in system.path
    assert run_cli(capsys, "show", "pendulum_fast")[0] == 0
    assert str(user_envs) not in system.path


def test_env_alone_picks_a_recipe_from_the_spaces(capsys, tmp_path, user_envs, monkeypatch):
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    code, _, err = train_own(
        capsys, tmp_path, "--env", "myenvs:MyReach-v0", "--timestamp", "T", "--set", "steps=1000"
    )
    assert code == 0, err
    assert err == (
        "batchppo: no --config: myenvs:MyReach-v0 has continuous control (vector observations, "
        "Box actions), so the run starts from the walker_fast recipe (1,000,000 steps); the "
        "env's own time limit (50 steps) ends episodes\n"
    )
    stored = configs.load_config(tmp_path / "T-MyReach-v0" / "config.yaml")
    walker = configs.get_preset("walker_fast")
    assert stored == dataclasses.replace(
        walker, env="myenvs:MyReach-v0", max_length=None, steps=1000
    )
    code, _, err = train_own(capsys, tmp_path, "--env", "myenvs:make_choose", "--set", "steps=500")
    assert code == 0, err
    assert (
        "has discrete actions (vector observations, Discrete actions), so the run starts "
        "from the cartpole_jax recipe (300,000 steps); the env declares no time limit (no "
        "max_episode_steps): max_length=500 bounds its episodes (--set max_length=N)" in err
    )
    (run_dir,) = tmp_path.glob("*-make_choose")
    stored = configs.load_config(run_dir / "config.yaml")
    assert stored == dataclasses.replace(
        configs.get_preset("cartpole_jax"), env="myenvs:make_choose", backend="process", steps=500
    )
    code, _, err = train_own(capsys, tmp_path, "--env", "myenvs:make_frames", "--set", "steps=64")
    assert code == 0, err
    assert "has image observations (36 px or more a side), so the run starts from the " in err
    (run_dir,) = tmp_path.glob("*-make_frames")
    stored = configs.load_config(run_dir / "config.yaml")
    assert (stored.cnn, stored.eval_env_kwargs, stored.steps) == ("nature", {}, 64)


def test_config_files_full_and_partial_with_set_on_top(capsys, tmp_path, user_envs, monkeypatch):
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    code, shown, _ = run_cli(capsys, "show", "pendulum_fast")
    assert code == 0
    assert configs.config_from_yaml(shown) == configs.get_preset("pendulum_fast")
    # A full config: show's output, edited.
    full = Path("full.yaml")
    full.write_text(shown.replace("env: Pendulum-v1", "env: myenvs:make_reach"))
    code, out, err = train_own(capsys, tmp_path, "--config", "full.yaml", "--timestamp", "T",
                               "--set", "steps=1000")  # fmt: skip
    assert code == 0, err
    assert out.endswith(f"run dir {tmp_path / 'T-full'}\n")
    stored = configs.load_config(tmp_path / "T-full" / "config.yaml")
    expected = dataclasses.replace(
        configs.get_preset("pendulum_fast"), env="myenvs:make_reach", steps=1000
    )
    assert stored == expected
    # A partial one: a preset and the keys that change; --name names the run.
    Path("part.yaml").write_text("base: pendulum_fast\nenv: myenvs:make_reach\nsteps: 2000\n")
    code, _, err = train_own(capsys, tmp_path, "--config", "part.yaml", "--name", "reach",
                               "--timestamp", "T", "--set", "steps=1000")  # fmt: skip
    assert code == 0, err
    assert configs.load_config(tmp_path / "T-reach" / "config.yaml") == expected
    # A run's own config.yaml trains again as a config file.
    code, out, err = train_own(capsys, tmp_path, "--config", str(tmp_path / "T-reach" /
                               "config.yaml"), "--timestamp", "U")  # fmt: skip
    assert code == 0, err
    assert configs.load_config(tmp_path / "U-config" / "config.yaml") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("base: pendulum_fast\nlr: 0.1\n",
         "part.yaml: unknown config keys ['lr']. Did you mean 'learning_rate'? Allowed keys: "),
        ("base: pendulum_fast\nenv_kwarg: {}\n",
         "part.yaml: unknown config keys ['env_kwarg']. Did you mean 'env_kwargs'? Allowed "
         "keys: "),
        ("env: Pendulum-v1\nsteps: 1000\n",
         "part.yaml: missing config keys ['backend', 'env_kwargs', "),
        ("base: pendulm\n", "part.yaml: base: unknown config 'pendulm'. Did you mean 'pendulum'?"),
        ("base: pendulum_fast\nalgorithm: a2c\n",
         "part.yaml: algorithm 'a2c' differs from base 'pendulum_fast''s (ppo): drop the "
         "algorithm key or pick a base of a2c"),
        ("base: pendulum_fast\nsteps: many\n",
         "part.yaml: config key 'steps' expects int, got 'many'"),
    ],
)  # fmt: skip
def test_bad_config_files_are_one_line(capsys, tmp_path, user_envs, text, message):
    Path("part.yaml").write_text(text)
    code, _, err = train_own(capsys, tmp_path / "logs", "--config", "part.yaml")
    assert_one_line_error(code, err)
    assert err.startswith(f"batchppo: error: {message}")
    assert not (tmp_path / "logs").exists()
    code, _, err = run_cli(capsys, "show", "part.yaml")
    assert_one_line_error(code, err)
    assert err.startswith(f"batchppo: error: {message}")


def test_set_names_the_nearest_key_even_when_it_is_far(capsys, tmp_path):
    code, _, err = train_own(capsys, tmp_path, "--config", "cartpole_jax", "--set", "lr=0.1")
    assert_one_line_error(code, err, "unknown config key 'lr'. Did you mean 'learning_rate'?")


def test_preset_with_env_names_the_run_after_both_and_resumes(capsys, tmp_path, user_envs,
                                                              monkeypatch):  # fmt: skip
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    argv = ["--config", "pendulum_fast", "--env", "myenvs:make_reach", "--timestamp", "T"]
    code, out, err = train_own(capsys, tmp_path, *argv, "--set", "steps=1000")
    assert code == 0, err
    run_dir = tmp_path / "T-pendulum_fast-make_reach"
    assert out == f"done: 2,048 steps, eval score 2048.00 ({MEAN_16}), run dir {run_dir}\n"
    code, again, err = train_own(capsys, tmp_path, *argv, "--resume")  # complete already
    assert (code, again, err) == (0, out, "")


def test_a_failed_resume_keeps_the_run_dir(capsys, tmp_path, user_envs, monkeypatch):
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    argv = ["--config", "pendulum_fast", "--timestamp", "T"]
    assert train_own(capsys, tmp_path, *argv, "--set", "env=myenvs:make_reach")[0] == 0
    run_dir = tmp_path / "T-pendulum_fast"
    config = configs.load_config(run_dir / "config.yaml")
    # An env broken since, and steps left to train (a complete run is not reopened).
    configs.save_config(dataclasses.replace(config, env="myenvs:make_broken", steps=200_000),
                        run_dir / "config.yaml")  # fmt: skip
    code, _, err = train_own(capsys, tmp_path, *argv, "--resume")
    assert_one_line_error(code, err, "env 'myenvs:make_broken': its constructor raised")
    assert (run_dir / "config.yaml").is_file()
    assert ckpt.latest_checkpoint(run_dir / "checkpoints")[0] == 100_352  # kept


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["--env", "myenvs:make_reach"], "make_reach"),
        (["--config", "pendulum_fast", "--env", "myenvs:make_reach"], "pendulum_fast-make_reach"),
        (["--env", "myenvs:make_reach", "--name", "mine"], "mine"),
        (["--config", "part.yaml"], "part"),
    ],
)
def test_ctrl_c_prints_a_resume_command_that_names_the_same_run(
    capsys, tmp_path, user_envs, monkeypatch, argv, name
):
    Path("part.yaml").write_text("base: pendulum_fast\nenv: myenvs:make_reach\n")
    monkeypatch.setattr(
        trainers, "default_trainer_factory", lambda c: FakeTrainer(c, signal_at=2, signal_num=2)
    )
    code, out, _ = train_own(capsys, tmp_path, *argv, "--timestamp", "T")
    assert code == 128 + signal.SIGINT
    assert (tmp_path / f"T-{name}").is_dir()
    command = out.strip().removeprefix("resume with: ")
    assert command == shlex.join(
        ["batchppo", "train", *argv, "--logdir", str(tmp_path), "--timestamp", "T", "--resume"]
    )
    monkeypatch.setattr(trainers, "default_trainer_factory", FakeTrainer)
    code, out, err = run_cli(capsys, *shlex.split(command)[1:], "--progress", "none")
    assert code == 0, err
    assert out.endswith(f"run dir {tmp_path / f'T-{name}'}\n")


def test_evaluating_a_run_whose_env_module_is_not_importable_is_one_line(
    capsys, tmp_path, monkeypatch
):
    run_dir = make_run(tmp_path, "T-reach")
    config = configs.load_config(run_dir / "config.yaml")
    stored = dataclasses.replace(config, env="reachenvs:make_reach", backend="process")
    configs.save_config(stored, run_dir / "config.yaml")
    ckpt.save_checkpoint(run_dir / "checkpoints", {"x": 0}, 10)
    monkeypatch.chdir(tmp_path)  # no reachenvs.py here
    code, _, err = run_cli(capsys, "evaluate", str(run_dir))
    assert_one_line_error(code, err)
    assert err == (
        "batchppo: error: env 'reachenvs:make_reach': cannot import 'reachenvs' (No module "
        "named 'reachenvs'): put reachenvs.py in the working directory or on PYTHONPATH\n"
    )


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ("learning_rat: {log_uniform: [1.0e-5, 1.0e-2]}",
         "S: unknown config key 'learning_rat'. Did you mean 'learning_rate'?"),
        ("polcy_layers.x: {choice: [1]}", "S: unknown config key 'polcy_layers.x'. Did you mean "
         "'policy_layers'?"),
        ("learning_rate: {log_unifrom: [1.0e-5, 1.0e-2]}",
         "S: learning_rate: unknown range 'log_unifrom'. Did you mean 'log_uniform'? Ranges: "
         "uniform, log_uniform, int, log_int, choice"),
        ("update_epochs: {uniform: [3, 15]}",
         "S: update_epochs: the field holds int, not a uniform range: use {int: [3, 15]}"),
        ("learning_rate: {log_uniform: [0, 1.0e-2]}",
         "S: learning_rate: log_uniform [0.0, 0.01]: a log range needs low > 0"),
        ("update_epochs: {int: [15, 3]}", "S: update_epochs: int [15, 3]: low must be below high"),
        ("discount: {uniform: [0.9, 1.1]}",
         "S: discount: the config rejects 1.1: discount=1.1: must be in (0, 1]"),
        ("mlp: {choice: [plain, 3]}", "S: mlp: config key 'mlp' expects str, got 3"),
        ("mlp: {choice: [plain, simbaa]}", "S: mlp: the config rejects 'simbaa': "),
        ("seed: {int: [0, 9]}", "S: seed is not tuned: seeds are tune's --seeds"),
        ("steps.x: {int: [1, 2]}", "S: 'steps.x': FIELD.NAME tunes one entry of a mapping field "
         "(env_kwargs, eval_env_kwargs, backend_options); steps is not one"),
        ("[learning_rate]", "--space S: expected a mapping of config keys to ranges"),
    ],
    ids=["key", "dotted-key", "range", "type", "log", "bounds", "rejected", "choice-type",
         "choice-rejected", "seed", "not-a-mapping-field", "not-a-mapping"],
)  # fmt: skip
def test_tune_refuses_a_bad_space_in_one_line_before_a_trial(capsys, tmp_path, space, message):
    path = tmp_path / "space.yaml"
    path.write_text(space + "\n")
    study = tmp_path / "study"
    code, _, err = run_cli(capsys, "tune", "--config", "cartpole_jax", "--space", str(path),
                           "--trials", "2", "--study", str(study))  # fmt: skip
    assert_one_line_error(code, err, message.replace("S", str(path), 1))
    assert not study.exists()  # checked before anything is written


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "cartpole_jax", "--space", "s.yaml"], "batchppo tune: give --trials N"),
        (["--trials", "2"], "give --config (a new study) or --study DIR (resume one)"),
        (["--study", "nowhere", "--trials", "2"],
         "no study 'nowhere' in sqlite:///nowhere/study.db: give --config and --space to start it"),
        (["--config", "cartpole_jax", "--space", "missing.yaml", "--trials", "2"],
         "--space missing.yaml: cannot read it (No such file or directory)"),
        (["--config", "cartpole_jax", "--space", "s.yaml", "--trials", "2", "--objective",
          "steps:10"], "--objective steps:10: give iqm (the IQM of the seeds' final evaluations)"),
        (["--config", "cartpole_jax", "--space", "s.yaml", "--trials", "2", "--set",
          "eval_every=0"], "eval_every=0 turns the evaluations off, and a trial is scored by them"),
        (["--show", "nowhere"], "--show nowhere: no study.db there: not a study dir"),
        (["--config", "cartpole_jax", "--space", "s.yaml", "--trials", "2", "--storage",
          "nosuchdb://x"], "--storage nosuchdb://x: Optuna cannot open it"),
    ],
    ids=["trials", "config-or-study", "no-study", "space-file", "objective", "no-evals", "show",
         "storage"],
)  # fmt: skip
def test_tune_bad_input_is_one_line(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("learning_rate: {log_uniform: [1.0e-5, 1.0e-2]}\n")
    code, _, err = run_cli(capsys, "tune", *argv)
    assert_one_line_error(code, err, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]

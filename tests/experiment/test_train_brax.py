"""A Brax preset trains end to end on CPU (the ``brax`` extra is part of the test extra)."""

from __future__ import annotations

import math

import pytest

from batchppo import cli
from batchppo.experiment.logging import read_metrics

# cheetah_brax's networks and physics at a CI size: 64 envs x 16 steps = 1024 env steps per
# iteration, two iterations, an evaluation of 4 episodes of 100 steps after each. Most of the
# time is XLA compiling the Brax step into the training and evaluation programs.
SMALL = (
    "steps=2048",
    "num_agents=64",
    "num_minibatches=4",
    "max_length=100",
    "eval_episodes=4",
    "eval_every=1024",
    "log_every=1024",
    "policy_layers=[32,32]",
    "value_layers=[32,32]",
)


@pytest.mark.timeout(900)
def test_cheetah_brax_trains_on_cpu(tmp_path, capsys):
    argv = ["train", "--config", "cheetah_brax", "--logdir", str(tmp_path), "--timestamp", "B",
            "--progress", "none"]  # fmt: skip
    for override in SMALL:
        argv += ["--set", override]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    run_dir = tmp_path / "B-cheetah_brax"
    assert code == 0, err
    # mujoco-mjx prints notes of its own on stdout when imported: the summary is the last line.
    assert out.splitlines()[-1].startswith("done: 2,048 steps, eval score ")
    records = read_metrics(run_dir)
    assert [(r["phase"], r["step"]) for r in records] == [
        ("train", 1024), ("eval", 1024), ("train", 2048), ("eval", 2048),
    ]  # fmt: skip
    evals = [r for r in records if r["phase"] == "eval"]
    assert [(r["length"], r["episodes"]) for r in evals] == [(100.0, 4), (100.0, 4)]
    assert all(math.isfinite(r["score"]) for r in records if r["score"] is not None)

"""A2C through the unchanged experiment layer and CLI: train, checkpoint, resume, load,
visualize and plot a ``cartpole_a2c`` run, and ``--seeds``."""

import json

import numpy as np
import pytest
import yaml

from batchppo import cli
from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run import training

pytestmark = pytest.mark.usefixtures("cold_training_programs")  # its runs are a few iterations

SHORT = ["--set", "num_agents=4", "--set", "steps=400", "--set", "eval_episodes=2",
         "--set", "max_length=50"]  # fmt: skip


def _train(tmp_path, *extra: str) -> int:
    argv = ["train", "--config", "cartpole_a2c", "--logdir", str(tmp_path), "--timestamp", "T",
            "--progress", "none", *SHORT, *extra]  # fmt: skip
    return cli.main(argv)


@pytest.mark.timeout(300)
def test_train_resume_load_visualize_and_plot(tmp_path, capsys):
    assert _train(tmp_path) == 0
    run_dir = tmp_path / "T-cartpole_a2c"
    stored = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert stored["algorithm"] == "a2c" and stored["rollout_length"] == 5
    assert type(configs.load_config(run_dir / "config.yaml")) is A2CConfig
    records = read_metrics(run_dir)
    assert records[-1]["step"] == 400 and {r["phase"] for r in records} == {"train", "eval"}
    assert "policy_loss" in records[0] and "beta" not in records[0]
    # Resume with a larger budget: the curves continue from the checkpoint at step 400.
    assert _train(tmp_path, "--set", "steps=800") == 0
    steps = [r["step"] for r in read_metrics(run_dir) if r["phase"] == "eval"]
    assert steps == sorted(set(steps)) and steps[-1] == 800
    policy = training.load_policy(run_dir)
    assert policy(np.zeros((3, 4), np.float32)).shape == (3,)
    capsys.readouterr()
    outdir = tmp_path / "videos"
    argv = ["visualize", str(run_dir), "--outdir", str(outdir), "--num_episodes", "1"]
    assert cli.main(argv) == 0
    stats = json.loads((outdir / "stats.json").read_text())
    assert stats["env"] == "CartPole-v1" and stats["checkpoint"] == 800
    assert cli.main(["plot", str(run_dir), "--out", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_a_run_of_one_algorithm_does_not_resume_with_another(tmp_path):
    config = configs.apply_overrides(configs.get_preset("cartpole_a2c"), ["steps=40"])
    training.prepare_run_dir(tmp_path, "run", config, "T")
    ppo = configs.get_preset("cartpole_jax")
    with pytest.raises(ConfigError, match="holds a run of algorithm 'a2c', not 'ppo'"):
        training.prepare_run_dir(tmp_path, "run", ppo, "T")


@pytest.mark.timeout(300)
def test_seeds_train_together(tmp_path):
    assert _train(tmp_path, "--seeds", "2") == 0
    for i in range(2):
        records = read_metrics(tmp_path / f"T-cartpole_a2c-s{i}")
        assert records[-1]["step"] == 400

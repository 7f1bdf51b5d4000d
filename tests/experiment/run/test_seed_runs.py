"""Seeds in one program (``train(..., seeds=N)``, ``batchppo train --seeds N``).

Each seed of a multi-seed run must compute what a separate run with its seed computes: the
same train and eval reports to float tolerance (vmapped matmuls may differ in the last bits).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from experiment_fakes import FakeSeedsTrainer
from tiny_runs import tiny_run

import batchppo.algorithms.ppo.ppo  # noqa: F401  (the trainer the loop imports late)
from batchppo import cli
from batchppo.experiment import trainers
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config.configs import load_config
from batchppo.experiment.run import training

TINY = tiny_run(
    update_epochs=2,
    num_minibatches=2,
    eval_episodes=2,
    eval_every=512,
    checkpoint_every=512,
    steps=1536,
)
COMPARED = ("score", "length", "policy_loss", "value_loss", "kl", "entropy", "obs_mean")


def assert_same_reports(a: list[dict], b: list[dict]) -> None:
    """The reports of two runs agree in step, phase and metrics (to float tolerance)."""
    assert [(r["step"], r["phase"]) for r in a] == [(r["step"], r["phase"]) for r in b]
    for ra, rb in zip(a, b, strict=True):
        for key in COMPARED:
            if key not in ra:
                continue
            x, y = ra[key], rb[key]
            if x is None or (isinstance(x, float) and math.isnan(x)):
                assert y is None or math.isnan(y), (ra["step"], key)
                continue
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6, err_msg=f"{ra['step']} {key}")


# Its runs are a few iterations each; both sides compile with the same options.
@pytest.mark.usefixtures("cold_training_programs")
@pytest.mark.parametrize(
    "preset, extra",
    [
        # CI covers the loop's seeds with [process], and the vmapped seeds of pure-JAX envs
        # against separate runs with test_stacked_seeds.py's pure-JAX test.
        pytest.param("pendulum_jax", [], marks=pytest.mark.extended),
        ("pendulum_fast", ["backend_options.num_workers=1"]),
    ],
    ids=["gymnax", "process"],
)
def test_seeds_equal_separate_runs(tmp_path: Path, preset: str, extra: list[str]) -> None:
    overrides = [*TINY, *extra, "seed=5"]
    results = training.train(
        preset, tmp_path, timestamp="T", overrides=overrides, progress="none", seeds=2
    )
    assert [r.config.seed for r in results] == [5, 6]
    for i, result in enumerate(results):
        run_dir = tmp_path / f"T-{preset}-s{i}"
        assert result.run_dir == run_dir and result.step == 1536
        assert load_config(run_dir / "config.yaml").seed == 5 + i
        alone = training.train(preset, overrides=[*TINY, *extra, f"seed={5 + i}"], progress="none")
        assert_same_reports(result.records, alone.records)
        assert_same_reports(read_metrics(run_dir), alone.records)
        np.testing.assert_allclose(result.score, alone.score, rtol=1e-4)


def test_resume_needs_every_seed_dir(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from batchppo.experiment.config import configs

    assert configs.get_preset("pendulum_jax-s1") == configs.get_preset("pendulum_jax")
    training.prepare_run_dir(tmp_path, "pendulum_jax-s0", configs.get_preset("pendulum_jax"), "T")
    argv = ["train", "--config", "pendulum_jax", "--logdir", str(tmp_path), "--seeds", "2"]
    assert cli.main([*argv, "--timestamp", "T"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no run dir for pendulum_jax-s1" in err


def test_host_loop_with_seeds_is_a_warning_not_a_silent_switch() -> None:
    from batchppo.algorithms.ppo.ppo import SeedsTrainer
    from batchppo.experiment.config import configs

    config = configs.apply_overrides(
        configs.get_preset("pendulum_fast"), ["backend=sync", "host_loop=true", *TINY]
    )
    with pytest.warns(UserWarning, match="host_loop=True is not used with several seeds"):
        trainer = SeedsTrainer(config, 2)
    trainer.close()


def test_a_failed_start_removes_only_the_seed_dirs_it_made(tmp_path: Path, monkeypatch) -> None:
    from batchppo.experiment.errors import ConfigError

    def no_trainer(factory, config):
        raise ConfigError("no trainer today")

    monkeypatch.setattr(trainers, "build_trainer", no_trainer)
    (tmp_path / "other").mkdir()  # not this run's: kept
    with pytest.raises(ConfigError, match="no trainer today"):
        training.train("cartpole_jax", tmp_path, seeds=2, timestamp="T", progress="none")
    assert [p.name for p in tmp_path.iterdir()] == ["other"]


def test_a_resume_whose_seeds_skip_to_different_steps_stops_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from batchppo.algorithms.ppo import ppo as ppo_module
    from batchppo.experiment.artifacts import checkpoint as ckpt

    monkeypatch.setattr(ppo_module, "SeedsTrainer", FakeSeedsTrainer)
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--progress", "none", "--seeds", "2", "--set", "num_agents=10", "--set",
            "rollout_length=10", "--set", "steps=500", "--set", "checkpoint_every=200"]  # fmt: skip
    assert cli.main(argv) == 0
    ckpt_dir = tmp_path / "T-cartpole_jax-s1" / "checkpoints"
    newest = ckpt.checkpoint_path(ckpt_dir, 500)
    newest.write_bytes(newest.read_bytes()[:40])  # seed 1's newest checkpoint is torn
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "batchppo: error: the seeds resume from different steps (s0: 500, s1: 400): damaged "
        "checkpoints were skipped; resume each alone (--config NAME-s<i> without --seeds)"
    )
    assert [s for s, _ in ckpt.list_checkpoints(ckpt_dir / "corrupt")] == [500]


def test_seeds_that_are_all_complete_build_nothing_and_say_so_each(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from batchppo.algorithms.ppo import ppo as ppo_module

    built = []
    monkeypatch.setattr(
        ppo_module, "SeedsTrainer", lambda c, n: built.append(n) or FakeSeedsTrainer(c, n)
    )
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--seeds", "2", "--set", "num_agents=10", "--set", "rollout_length=10",
            "--set", "steps=500"]  # fmt: skip
    assert cli.main([*argv, "--progress", "none"]) == 0 and built == [2]
    capsys.readouterr()
    assert cli.main([*argv, "--progress", "lines"]) == 0 and built == [2]
    lines = capsys.readouterr().out.splitlines()
    for i in range(2):
        run_dir = tmp_path / f"T-cartpole_jax-s{i}"
        assert lines[i].startswith(
            f"run already complete at step 500 (steps=500), nothing to train; final checkpoint "
            f"{run_dir / 'checkpoints' / 'ckpt-000000000500.msgpack'}; "
        )
        assert lines[2 + i] == (
            f"done: seed {i}: 500 steps, eval score 500.00 (16 episodes, mean action), run dir "
            f"{run_dir}"
        )
    assert len(lines) == 4

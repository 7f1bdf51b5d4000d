"""A real ``batchppo train`` on envs that crash at random steps, with
``backend_options.max_restarts``."""

from __future__ import annotations

import numpy as np
import pytest
from crash_envs import env_workers, train_argv
from experiment_fakes import FakeTrainer, fake_config

from batchppo import cli
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.backends import make_env
from batchppo.envs import EnvRestartWarning
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import resume
from batchppo.experiment.run import training

pytestmark = pytest.mark.timeout(120)

ENV = "crash_envs:CrashingPendulum-v0"  # each step crashes with probability 0.002


def _argv(logdir, timestamp: str, *overrides: str) -> list[str]:
    return train_argv(logdir, timestamp, ENV, *overrides)


def test_training_goes_on_through_env_crashes_and_counts_the_restarts(tmp_path, capsys):
    with pytest.warns(EnvRestartWarning, match="CrashingPendulum: the simulator crashed"):
        code = cli.main(_argv(tmp_path, "R", "backend_options.max_restarts=200"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("done: 4,096 steps")
    records = read_metrics(tmp_path / "R-pendulum_fast")
    train = [r for r in records if r["phase"] == "train"]
    assert [r["step"] for r in train] == [1024, 2048, 3072, 4096]
    restarts = [r["env_restarts"] for r in train]
    assert restarts == sorted(restarts) and 0 < restarts[-1] <= 200, restarts
    assert all(isinstance(r["score"], float) for r in train)
    assert not env_workers()


class _RestartingFakeTrainer(FakeTrainer):
    """A fake trainer whose envs restart once per iteration (counted from 0 in each process)."""

    def __init__(self, config):
        super().__init__(config)
        self.restarts = 0

    def iteration(self, ts, ss):
        ts, ss, metrics = super().iteration(ts, ss)
        self.restarts += 1
        return ts, ss, {**metrics, "env_restarts": float(self.restarts)}


def test_env_restarts_is_a_running_total_that_a_resume_continues(tmp_path):
    # 100 steps per iteration; train reports at 300, 500, 800 and 1000, then 1300 and 1500.
    def run(steps: int):
        return training.train(
            fake_config(steps=steps), tmp_path, name="fake", timestamp="T", progress="none",
            trainer_factory=_RestartingFakeTrainer,
        )  # fmt: skip

    run(1000)
    run(1500)  # a new process's trainer counts from 0 again
    train = [r for r in read_metrics(tmp_path / "T-fake") if r["phase"] == "train"]
    assert [r["step"] for r in train] == [300, 500, 800, 1000, 1300, 1500]
    assert [r["env_restarts"] for r in train] == [3, 5, 8, 10, 13, 15]


def test_host_env_counts_restarts_of_the_sync_backend_and_stops_at_the_budget():
    env = make_env(
        ENV, 2, "sync", options={"max_restarts": 4}, env_kwargs={"crash_probability": 1.0}
    )  # every step crashes
    try:
        obs = env.host_reset(0)
        action = np.zeros((2, 1), np.float32)
        for restarts in (2, 4):
            with pytest.warns(EnvRestartWarning):
                new_obs, reward, terminated, truncated, final_obs = env.host_step(action)
            assert truncated.tolist() == [True, True] and not terminated.any()
            assert reward.tolist() == [0.0, 0.0]
            np.testing.assert_array_equal(final_obs, obs)  # the last obs before the crash
            assert env.restarts == restarts
            obs = new_obs
        with pytest.raises(
            RuntimeError, match=r"max_restarts=4, 4 restarts done.*backend_options.max_restarts"
        ):
            env.host_step(action)
    finally:
        env.close()


def test_config_checks_and_resume_accepts_a_new_budget():
    with pytest.raises(ValueError) as info:
        PPOConfig(backend_options={"max_restarts": -1})
    assert str(info.value) == "backend_options.max_restarts must be an int >= 0; got -1."
    for backend in ("gymnax", "ray"):  # a backend without restarts has no such option
        no_option = rf"^backend_options.max_restarts: backend '{backend}' has no option"
        with pytest.raises(ValueError, match=no_option):
            PPOConfig(backend=backend, env="Pendulum-v1", backend_options={"max_restarts": 3})
    with pytest.raises(ValueError, match="backend 'gymnax' has no option 'max_restarts'"):
        make_env("Pendulum-v1", 2, "gymnax", options={"max_restarts": 1})
    stored = PPOConfig(backend="process", backend_options={"max_restarts": 2, "num_workers": 3})
    resumed = resume.check_resume_overrides(stored, {"backend_options.max_restarts": 7})
    assert resumed.backend_options == {"max_restarts": 7, "num_workers": 3}

"""Fail-fast training (issue 10): an env error stops ``batchppo train`` with the env's own
exception type, a checkpoint of the last completed iteration and a resume command, and
leaves no worker process behind."""

from __future__ import annotations

import dataclasses
import re
import shlex

import jax
import numpy as np
import pytest
from crash_envs import FailingError, env_workers, train_argv
from experiment_fakes import FakeSeedsTrainer, FakeTrainer, fake_config

from batchppo import cli
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.ppo import Trainer
from batchppo.backends import make_env
from batchppo.core.env import is_env_error, mark_env_error
from batchppo.envs import EnvRestartWarning
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.run import seed_runs, training
from batchppo.experiment.run.driver import drive
from batchppo.experiment.run.run_set import StackedSeeds

# Its real runs are a few iterations each: their programs compile with the options of the
# programs that run once (the fake trainers' tests compile nothing).
pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("cold_training_programs")]

ENV = "crash_envs:FailingPendulum-v0"  # its step number `fail_at` fails
# No checkpoint but the one the failure writes.
NO_CHECKPOINTS = "checkpoint_every=0"


def _argv(logdir, timestamp: str, *overrides: str) -> list[str]:
    return train_argv(logdir, timestamp, ENV, NO_CHECKPOINTS, *overrides)


def _train_steps(run_dir) -> list[int]:
    return [r["step"] for r in read_metrics(run_dir) if r["phase"] == "train"]


def test_an_env_error_stops_train_with_its_type_a_checkpoint_and_the_resume_command(
    tmp_path, capsys
):
    # Each env's 200th step (in the 4th iteration, 1536 -> 2048) raises FailingError.
    code = cli.main(_argv(tmp_path, "F", "env_kwargs={fail_at: 200}"))
    out, err = capsys.readouterr()
    run_dir = tmp_path / "F-pendulum_fast"
    assert code == 1, err
    lines = err.strip().splitlines()
    assert lines[-2] == (
        f"batchppo: stopped at step 1,536 by an env error; checkpoint at step 1,536 in "
        f"{run_dir / 'checkpoints'}; resume with: batchppo train --config pendulum_fast "
        f"--logdir {tmp_path} --timestamp F --resume"
    )
    assert lines[-1] == (
        "batchppo: error: the env raised FailingError: FailingPendulum: step 200 failed on "
        f"purpose (full text: {run_dir / 'env_error.txt'})"
    )
    assert not out
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [1536]
    assert _train_steps(run_dir) == [1024, 1536]  # the open window, as after Ctrl-C
    text = (run_dir / "env_error.txt").read_text()
    assert "FailingError: FailingPendulum: step 200 failed on purpose" in text
    assert "Worker traceback" in text and "in step" in text  # the worker's traceback
    assert "JaxRuntimeError" not in text
    assert not env_workers()

    # The printed command resumes from the checkpoint; envs that fail now restart.
    with pytest.warns(EnvRestartWarning, match="step 200 failed on purpose"):
        code = cli.main(_argv(tmp_path, "F", "backend_options.max_restarts=16"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("done: 4,096 steps")
    assert _train_steps(run_dir) == [1024, 1536, 2048, 3072, 4096]
    train = [r for r in read_metrics(run_dir) if r["phase"] == "train"]
    assert train[-1]["env_restarts"] >= 8  # each env failed again at its 200th step
    assert not env_workers()


def test_a_worker_that_exits_stops_train_with_worker_died_error(tmp_path, capsys):
    # Each env's 70th step (in the 2nd iteration) ends its worker with os._exit(3).
    code = cli.main(_argv(tmp_path, "X", "env_kwargs={fail_at: 70, how: exit}"))
    _, err = capsys.readouterr()
    run_dir = tmp_path / "X-pendulum_fast"
    assert code == 1, err
    lines = err.strip().splitlines()
    assert "stopped at step 512 by an env error; checkpoint at step 512" in lines[-2]
    assert lines[-1].startswith("batchppo: error: the env raised WorkerDiedError: worker ")
    assert "died (exit code 3)" in lines[-1]
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [512]
    assert not env_workers()


def _config(**changes) -> PPOConfig:
    base = PPOConfig(
        env=ENV, backend="process", num_agents=4, backend_options={"num_workers": 2},
        rollout_length=16,
        max_length=50, update_epochs=1, num_minibatches=1, policy_layers=(16,),
        value_layers=(16,), steps=640, checkpoint_every=0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_the_host_loop_driver_raises_the_envs_own_error_and_checkpoints(tmp_path):
    # 64 steps per iteration; each env's 40th step fails: in the 3rd iteration (128 -> 192).
    config = _config(host_loop=True, env_kwargs={"fail_at": 40}, eval_every=0)
    with pytest.raises(FailingError, match="step 40 failed on purpose") as raised:
        training.train(config, tmp_path, name="hl", timestamp="H", progress="none")
    assert is_env_error(raised.value)
    failure = training.env_failure(raised.value)
    assert failure == training.EnvFailure(
        128, 128, tmp_path / "H-hl", tmp_path / "H-hl" / training.ENV_ERROR_FILE
    )
    assert any(
        "training stopped at step 128 by this env error" in n for n in raised.value.__notes__
    )
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "H-hl" / "checkpoints")] == [128]
    assert not env_workers()


def test_the_eval_env_raises_its_own_error_not_jax_runtime_error():
    # The training env never fails; the eval env (built from the config) fails at step 5.
    config = _config(env_kwargs={"fail_at": 5})
    env = make_env(ENV, config.num_agents, "process", options={"num_workers": 2}, max_length=50)
    trainer = Trainer(config, env=env)
    try:
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        ts, ss, _ = trainer.iteration(ts, ss)
        with pytest.raises(FailingError, match=r"(?s)step 5 failed on purpose.*Worker traceback"):
            trainer.evaluate(ts, 2, jax.random.key(2))
    finally:
        trainer.close()
    assert not env_workers()


class _FailingFakeTrainer(FakeTrainer):
    """A fake trainer whose env fails in the iteration reaching ``at`` steps, or in the
    evaluation at ``eval_at`` steps."""

    at: int | None = None
    eval_at: int | None = None

    def iteration(self, ts, ss):
        if int(ts.step) + self.steps_per_iteration == self.at:
            raise mark_env_error(FailingError("the env failed in the iteration"))
        return super().iteration(ts, ss)

    def evaluate(self, ts, num_episodes, key, sample=False):
        if int(ts.step) == self.eval_at:
            raise mark_env_error(FailingError("the eval env failed"))
        return super().evaluate(ts, num_episodes, key, sample)


def _fake_run(tmp_path, at=None, eval_at=None):
    # 100 steps per iteration; train reports every 250, evals every 400, checkpoints every 300.
    factory = type("Factory", (_FailingFakeTrainer,), {"at": at, "eval_at": eval_at})
    return training.train(
        fake_config(), tmp_path, name="fake", timestamp="T", progress="none",
        trainer_factory=factory,
    )  # fmt: skip


def test_an_iteration_that_fails_checkpoints_the_one_before_and_resume_continues(tmp_path):
    run_dir = tmp_path / "T-fake"
    with pytest.raises(FailingError):
        _fake_run(tmp_path, at=500)  # the iteration 400 -> 500 fails
    assert _train_steps(run_dir) == [300, 400]  # 400: the open window
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [300, 400]
    result = _fake_run(tmp_path)
    assert float(result.train_state.params["w"][0]) == 10.0  # 4 iterations, then 6 more
    records = read_metrics(run_dir)
    assert _train_steps(run_dir) == [300, 400, 500, 800, 1000]
    assert [r["step"] for r in records if r["phase"] == "eval"] == [400, 800, 1000]


def test_an_evaluation_that_fails_checkpoints_its_iteration_without_a_second_report(tmp_path):
    run_dir = tmp_path / "T-fake"
    with pytest.raises(FailingError) as raised:
        _fake_run(tmp_path, eval_at=800)  # the train report at 800 came before
    assert training.env_failure(raised.value).checkpoint_step == 800
    assert _train_steps(run_dir) == [300, 500, 800]
    np.testing.assert_array_equal(
        [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")], [600, 800]
    )
    _fake_run(tmp_path)
    assert _train_steps(run_dir) == [300, 500, 800, 1000]
    evals = [r["step"] for r in read_metrics(run_dir) if r["phase"] == "eval"]
    assert evals == [400, 1000]  # the failed evaluation is not run again


def test_other_errors_propagate_unchanged_without_a_checkpoint(tmp_path):
    class Broken(FakeTrainer):
        def iteration(self, ts, ss):
            if int(ts.step) == 400:
                raise RuntimeError("a bug in the learner")
            return super().iteration(ts, ss)

    with pytest.raises(RuntimeError, match="a bug in the learner") as raised:
        training.train(fake_config(), tmp_path, name="fake", timestamp="T", progress="none",
                   trainer_factory=Broken)  # fmt: skip
    assert training.env_failure(raised.value) is None
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "T-fake" / "checkpoints")] == [300]


def test_an_env_error_stops_every_seed_of_a_seeds_run_and_the_resume_command_resumes_them(
    tmp_path, capsys
):
    # Two seeds share 16 envs in 2 workers; each env's 200th step (in the 4th iteration,
    # 1536 -> 2048) raises. The timestamp holds '-', which the resume command must keep.
    timestamp = "2026-11-22T10-00"
    argv = [*_argv(tmp_path, timestamp, "steps=2048"), "--seeds", "2"]
    code = cli.main([*argv, "--set", "env_kwargs={fail_at: 200}"])
    out, err = capsys.readouterr()
    run_dirs = [tmp_path / f"{timestamp}-pendulum_fast-s{i}" for i in range(2)]
    assert code == 1, err
    lines = err.strip().splitlines()
    where = ", ".join(str(d / "checkpoints") for d in run_dirs)
    assert lines[-2] == (
        f"batchppo: stopped at step 1,536 by an env error; checkpoints at step 1,536 in "
        f"{where}; resume with: batchppo train --config pendulum_fast --logdir {tmp_path} "
        f"--seeds 2 --timestamp {timestamp} --resume"
    )
    assert lines[-1] == (
        "batchppo: error: the env raised FailingError: FailingPendulum: step 200 failed on "
        f"purpose (full text: {run_dirs[0] / 'env_error.txt'} and the other seeds' run dirs)"
    )
    assert "eval at step" not in out  # no evaluation before the failure
    for run_dir in run_dirs:
        assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [1536]
        assert _train_steps(run_dir) == [1024, 1536]  # the open window, as after Ctrl-C
        text = (run_dir / "env_error.txt").read_text()
        assert "FailingError: FailingPendulum: step 200 failed on purpose" in text
        assert "Worker traceback" in text and "JaxRuntimeError" not in text
    assert not env_workers()

    # The printed command resumes both seeds from their checkpoints and completes.
    resume = shlex.split(lines[-2].split("resume with: ", 1)[1])[1:]  # without "batchppo"
    assert resume == [*argv[:5], "--seeds", "2", "--timestamp", timestamp, "--resume"]
    with pytest.warns(EnvRestartWarning, match="step 200 failed on purpose"):  # eval envs
        code = cli.main([*resume, "--progress", "none", "--set", "backend_options.max_restarts=16"])
    out, err = capsys.readouterr()
    assert code == 0, err
    done = out.strip().splitlines()
    assert len(done) == 2 and all(line.startswith("done: seed ") for line in done), out
    assert all(": 2,048 steps, eval score" in line for line in done), out
    for run_dir in run_dirs:
        assert _train_steps(run_dir) == [1024, 1536, 2048]
        assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")][-1] == 2048
    assert not env_workers()


class _FailingFakeSeedsTrainer(FakeSeedsTrainer):
    """A fake seeds trainer whose iteration reaching ``at`` steps fails, or the evaluation of
    seed ``eval_seed`` at ``eval_at`` steps (the seeds evaluate in seed order)."""

    def __init__(self, config, num_seeds, at=None, eval_at=None, eval_seed=0):
        super().__init__(config, num_seeds)
        self.at, self.eval_at, self.eval_seed = at, eval_at, eval_seed
        self.evaluated = 0  # evaluations at eval_at so far

    def iteration(self, ts, ss):
        if int(ts.step[0]) + self.one.steps_per_iteration == self.at:
            raise mark_env_error(FailingError("the env failed in the iteration"))
        return super().iteration(ts, ss)

    def evaluate(self, ts, num_episodes, key, sample=False):
        if int(ts.step) == self.eval_at:
            if self.evaluated == self.eval_seed:
                raise mark_env_error(FailingError("the eval env failed"))
            self.evaluated += 1
        return super().evaluate(ts, num_episodes, key, sample)


def _fake_seeds_run(tmp_path, **fail):
    run_configs, run_dirs = seed_runs.prepare_seed_dirs(
        tmp_path, "fake", fake_config(), 2, "T", None
    )
    trainer = _FailingFakeSeedsTrainer(run_configs[0], 2, **fail)
    return drive(StackedSeeds(2), trainer, run_configs, run_dirs, "none")


@pytest.mark.parametrize(
    "fail, step, train_steps, evals",
    [
        # The iteration 400 -> 500 fails: the open window (400) is reported and saved.
        ({"at": 500}, 400, [300, 400], [[400], [400]]),
        # Seed 0's evaluation at 800 fails; seed 1's bookkeeping at 800 was not done yet.
        ({"eval_at": 800, "eval_seed": 0}, 800, [300, 500, 800], [[400], [400]]),
        # Seed 1's evaluation at 800 fails after seed 0's succeeded.
        ({"eval_at": 800, "eval_seed": 1}, 800, [300, 500, 800], [[400, 800], [400]]),
    ],
    ids=["iteration", "eval-seed-0", "eval-seed-1"],
)
def test_an_env_error_in_a_seeds_run_checkpoints_every_seed_at_one_step(
    tmp_path, fail, step, train_steps, evals
):
    run_dirs = [tmp_path / f"T-fake-s{i}" for i in range(2)]
    with pytest.raises(FailingError) as raised:
        _fake_seeds_run(tmp_path, **fail)
    failure = training.env_failure(raised.value)
    assert [s.run_dir for s in failure.seeds] == run_dirs
    assert [s.error_file for s in failure.seeds] == [d / training.ENV_ERROR_FILE for d in run_dirs]
    assert (failure.step, failure.checkpoint_step, failure.run_dir) == (step, step, run_dirs[0])
    where = ", ".join(str(d / "checkpoints") for d in run_dirs)
    assert failure.checkpoints() == f"checkpoints at step {step:,} in {where}"
    assert raised.value.__notes__ == [
        f"batchppo: training stopped at step {step:,} by this env error; {failure.checkpoints()}"
    ]
    for run_dir, seed_evals in zip(run_dirs, evals, strict=True):
        assert _train_steps(run_dir) == train_steps
        assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")][-1] == step
        assert [r["step"] for r in read_metrics(run_dir) if r["phase"] == "eval"] == seed_evals
        assert "FailingError" in (run_dir / training.ENV_ERROR_FILE).read_text()

    results = _fake_seeds_run(tmp_path)  # resumes both seeds at `step` and completes
    for result, run_dir, seed_evals in zip(results, run_dirs, evals, strict=True):
        assert result.step == 1000 and float(result.train_state.params["w"][0]) == 10.0
        assert _train_steps(run_dir) == [*train_steps, *(s for s in (500, 800, 1000) if s > step)]
        assert [r["step"] for r in read_metrics(run_dir) if r["phase"] == "eval"] == [
            *seed_evals, *(s for s in (800, 1000) if s > step)
        ]  # fmt: skip


def test_an_env_that_hangs_stops_train_after_its_step_timeout_as_an_env_error(tmp_path, capsys):
    # Each env's 200th step (in the 4th iteration, 1536 -> 2048) sleeps for an hour.
    hang = "env_kwargs={fail_at: 200, how: hang}"
    argv = _argv(tmp_path, "H", hang, "backend_options.step_timeout=2")
    code = cli.main(argv)
    out, err = capsys.readouterr()
    run_dir = tmp_path / "H-pendulum_fast"
    assert code == 1, err
    lines = err.strip().splitlines()
    assert lines[-2] == (
        f"batchppo: stopped at step 1,536 by an env error; checkpoint at step 1,536 in "
        f"{run_dir / 'checkpoints'}; resume with: batchppo train --config pendulum_fast "
        f"--logdir {tmp_path} --timestamp H --resume"
    )
    assert re.fullmatch(
        r"batchppo: error: the env raised EnvTimeoutError: envs 0\.\.3 \(worker 0, pid \d+\); "
        r"envs 4\.\.7 \(worker 1, pid \d+\) did not answer a step within step_timeout=2 s, so "
        r"their workers were killed and the batch env cannot continue \(raise step_timeout, "
        r"backend_options.step_timeout in a config, if the env is only slow\)\. \(full text: "
        + re.escape(str(run_dir / "env_error.txt"))
        + r"\)",
        lines[-1],
    )
    text = (run_dir / "env_error.txt").read_text()
    assert re.search(r'crash_envs\.py", line \d+ in step', text)  # where each was stuck
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [1536]
    assert not out
    assert not env_workers()


def test_with_restarts_a_hung_worker_is_respawned_and_training_goes_on(tmp_path, capsys):
    argv = _argv(
        tmp_path, "HR", "env_kwargs={fail_at: 300, how: hang}", "backend_options.step_timeout=1",
        "backend_options.max_restarts=40",
    )  # fmt: skip
    with pytest.warns(EnvRestartWarning, match="did not answer a step within step_timeout=1 s"):
        code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("done: 4,096 steps")
    train = [r for r in read_metrics(tmp_path / "HR-pendulum_fast") if r["phase"] == "train"]
    assert [r["step"] for r in train] == [1024, 2048, 3072, 4096]
    # The 8 training envs hang at their 300th step (2400 env steps in), so both workers are
    # respawned once: 8 restarts by the report at 3072.
    assert [r["env_restarts"] for r in train] == [0, 0, 8, 8]
    assert not env_workers()

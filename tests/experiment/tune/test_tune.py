"""``batchppo tune``: the search space, the trials and their objective, the pruner, the study's
storage (resume, retries of killed and stopped trials, several processes) and its results.

The trials of most tests train the loop's fake trainers, whose evaluation scores
``step * learning_rate * 1000``, so that every value the study records is known exactly. The
tests whose names say they train run real trials at a tiny budget, on a fused backend
(cartpole_jax, its seeds in one program) and on host backends (cartpole on the sync and the
process backends, its seeds one after another), from the command line and in processes that are
killed or stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import psutil
import pytest
import scipy.stats
from experiment_fakes import FakeSeedsTrainer, FakeTrainer
from tiny_runs import tiny_run

import batchppo.algorithms.ppo.ppo as ppo_module
from batchppo import cli
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.experiment import trainers
from batchppo.experiment import tune as tune_module
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import configs
from batchppo.experiment.run.callbacks import RunInfo
from batchppo.experiment.tune import study as study_module
from batchppo.experiment.tune.objective import Objective, TrialMonitor, parse_objective
from batchppo.experiment.tune.space import parse_space

ROOT = Path(__file__).resolve().parents[2]

FAKE = ["--set", "num_agents=10", "--set", "rollout_length=10", "--set", "steps=1000",
        "--set", "eval_every=200", "--seeds", "2", "--progress", "lines"]  # fmt: skip
"""A fake trial: 10 iterations of 100 steps, an evaluation every 200 steps, 2 seeds."""
LR_CHOICE = "learning_rate: {choice: [0.001, 0.01]}\n"


class ScaledTrainer(FakeTrainer):
    """``FakeTrainer`` whose evaluations score ``step * learning_rate * 1000``."""

    def evaluate(self, ts, num_episodes, key, sample=False):
        result = super().evaluate(ts, num_episodes, key, sample)
        score = float(ts.step) * self.config.learning_rate * 1000
        return {**result, "score": score, "returns": np.full((num_episodes,), score)}


class ScaledSeedsTrainer(FakeSeedsTrainer):
    """``FakeSeedsTrainer`` over a ``ScaledTrainer``."""

    def __init__(self, config, num_seeds, signal_at=None, signal_num=signal.SIGTERM):
        super().__init__(config, num_seeds, signal_at, signal_num)
        self.one = ScaledTrainer(config)


def scaled(config) -> float:
    """The final score of every seed of a fake trial of ``config``."""
    return float(config.steps) * config.learning_rate * 1000


@pytest.fixture
def fakes(monkeypatch):
    """The trials train ``ScaledTrainer``s; ``fakes(signal_at=N)`` sends SIGINT at update N."""

    def use(signal_at=None):
        monkeypatch.setattr(
            trainers, "default_trainer_factory",
            lambda c: ScaledTrainer(c, signal_at, signal.SIGINT),
        )  # fmt: skip
        monkeypatch.setattr(
            ppo_module, "SeedsTrainer",
            lambda c, n: ScaledSeedsTrainer(c, n, signal_at, signal.SIGINT),
        )  # fmt: skip

    use()
    return use


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def space_file(tmp_path: Path, text: str = LR_CHOICE) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return str(path)


def load(study_dir: Path, name: str | None = None) -> optuna.Study:
    storage = f"sqlite:///{study_dir / 'study.db'}"
    return optuna.load_study(study_name=name or study_dir.name, storage=storage)


def states(study: optuna.Study) -> list[str]:
    return [t.state.name for t in study.get_trials()]


# --- The search space -----------------------------------------------------------------------


def test_a_space_becomes_each_trials_config():
    config = configs.get_preset("cartpole_jax")
    data = {
        "learning_rate": {"log_uniform": [1.0e-5, 1.0e-2]},
        "update_epochs": {"int": [3, 15]},
        "clip_epsilon": {"int": [0, 1]},  # an int range of a float field: floats
        "policy_layers": {"choice": [[64, 64], [32]]},
        "backend_options.reset_ratio": {"choice": [1, 2]},
    }
    space = parse_space(data, config, "s.yaml")
    assert [d.choices for d in space.dimensions if d.kind == "choice"] == [
        ("[64, 64]", "[32]"), (1, 2)
    ]  # fmt: skip
    params = {"learning_rate": 0.003, "update_epochs": 7, "clip_epsilon": 1,
              "policy_layers": "[64, 64]", "backend_options.reset_ratio": 2}  # fmt: skip
    trial = space.config(config, params)
    assert (trial.learning_rate, trial.update_epochs, trial.policy_layers) == (0.003, 7, (64, 64))
    assert trial.clip_epsilon == 1.0 and isinstance(trial.clip_epsilon, float)
    assert trial.backend_options == {**config.backend_options, "reset_ratio": 2}
    assert trial.value_layers == config.value_layers


def test_objectives_score_the_seeds_as_documented():
    curves = [{100: 1.0, 200: 5.0}, {100: 2.0, 200: 7.0}, {100: 3.0, 200: 9.0},
              {100: 100.0, 200: 1.0}]  # fmt: skip
    iqm = parse_objective("iqm")
    assert (iqm.direction, iqm.at(curves, 100)) == ("maximize", 2.5)  # mean of 2 and 3
    assert iqm.final([1.0, 2.0, 3.0, 100.0], curves, 200) == 2.5
    reach = parse_objective("steps-to:5.5")
    assert (reach.direction, reach.spec) == ("minimize", "steps-to:5.5")
    means = [{100: 1.0, 200: 5.0}, {100: 2.0, 200: 6.0}]  # means 1.5 and 5.5
    assert reach.at(means, 100) == 101.0  # not reached yet: at least step + 1
    assert reach.at(means, 200) == reach.final([], means, 200) == 200.0
    assert parse_objective("steps-to:6").final([], means, 200) == 201.0  # never: budget + 1


def test_the_monitor_reports_the_seeds_together_or_each_on_its_own_steps():
    class Trial:
        def __init__(self):
            self.reports = []

        def report(self, value, step):
            self.reports.append((value, step))

        def should_prune(self):
            return len(self.reports) == 2

    config = PPOConfig()
    trial = Trial()
    together = TrialMonitor(trial, Objective(), 2, 1000, stacked=True)
    assert together.on_eval(RunInfo(0, None, config), 100, {"score": 1.0}) is None
    assert trial.reports == []  # seed 1 has not evaluated at step 100 yet
    assert together.on_eval(RunInfo(1, None, config), 100, {"score": 3.0}) is None
    assert together.on_eval(RunInfo(0, None, config), 200, {"score": 4.0}) is None
    assert together.on_eval(RunInfo(1, None, config), 200, {"score": 6.0}) is False
    assert trial.reports == [(2.0, 100), (5.0, 200)]
    assert together.pruned == "pruned at step 200 (value 5)"

    apart = TrialMonitor(Trial(), Objective(), 2, 1000, stacked=False)
    apart.seed = 1
    assert apart.on_eval(RunInfo(0, None, config), 100, {"score": 3.0}) is None
    assert apart.trial.reports == [(3.0, 1100)]  # seed 1's step 100: 1 * steps + 100
    assert apart.curves == [{}, {100: 3.0}]


# --- Studies of fake trials -----------------------------------------------------------------


def test_a_study_runs_resumes_with_the_rest_and_shows_its_trials(capsys, tmp_path, fakes):
    study_dir = tmp_path / "cp"
    argv = ["tune", "--config", "cartpole_jax", "--space", space_file(tmp_path), "--trials", "3",
            "--study", str(study_dir), *FAKE]  # fmt: skip
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["COMPLETE"] * 3
    base = configs.apply_overrides(configs.get_preset("cartpole_jax"), FAKE[1:8:2])
    for trial in study.trials:
        config = configs.replace_config(base, trial.params)
        assert trial.value == scaled(config)  # the IQM of two seeds that score alike
        runs = sorted((study_dir / "trials" / str(trial.number)).iterdir())
        assert [r.name.rpartition("-")[2] for r in runs] == ["s0", "s1"]
        assert [configs.load_config(r / "config.yaml") for r in runs] == [
            config, configs.replace_config(config, {"seed": 1})
        ]  # fmt: skip
        assert f"trial {trial.number} COMPLETE: value {trial.value:.6g}" in out
    best = configs.config_from_file(study_dir / "best.yaml")
    assert best == configs.replace_config(base, study.best_params)
    assert (study_dir / "history.png").stat().st_size > 0
    assert (study_dir / "importances.png").stat().st_size > 0
    assert f"wrote {study_dir / 'best.yaml'}; train it: batchppo train --config" in out

    code, out, _ = run_cli(capsys, *argv)  # complete: nothing to run
    assert code == 0 and "0 trials run now; 3 trials (3 complete)" in out
    # More trials, the config and the space taken from the study.
    code, out, _ = run_cli(capsys, "tune", "--study", str(study_dir), "--trials", "4")
    assert code == 0 and "1 trials run now; 4 trials (4 complete)" in out
    assert len(load(study_dir).trials) == 4

    code, out, err = run_cli(capsys, *argv[:-4], "--seeds", "3", "--progress", "lines")
    assert code == 2 and err.count("\n") == 1
    assert "was started with another seeds: resume it with the ones it was started" in err

    code, out, _ = run_cli(capsys, "tune", "--show", str(study_dir))
    lines = out.splitlines()
    assert lines[0] == f"study 'cp' in sqlite:///{study_dir}/study.db: 4 trials (4 complete)"
    assert lines[2].split() == ["trial", "state", "value", "learning_rate", "note"]
    assert [line.split()[:2] for line in lines[3:]] == [[str(i), "COMPLETE"] for i in range(4)]


@pytest.mark.parametrize("backend", ["gymnax", "sync"], ids=["one-program", "one-by-one"])
def test_the_pruner_stops_a_trial_below_the_median(capsys, tmp_path, fakes, monkeypatch, backend):
    monkeypatch.setattr(tune_module, "MEDIAN_STARTUP_TRIALS", 1)
    study_dir = tmp_path / "cp"
    study_dir.mkdir()
    study = optuna.create_study(
        study_name="cp", storage=f"sqlite:///{study_dir / 'study.db'}", direction="maximize"
    )
    study.enqueue_trial({"learning_rate": 0.01})
    study.enqueue_trial({"learning_rate": 0.001})
    code, out, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space_file(tmp_path), "--trials",
        "2", "--study", str(study_dir), *FAKE, "--set", f"backend={backend}",
    )  # fmt: skip
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["COMPLETE", "PRUNED"]
    # Past the first third of 1,000 steps, the first evaluation (step 400) is below the
    # median of trial 0's at that step (400 x 0.01 x 1000 = 4000).
    seed = "" if backend == "gymnax" else " of seed 0"
    note = f"pruned at step 400{seed} (value 400)"
    assert study.trials[1].user_attrs["note"] == note
    assert f"trial 1 PRUNED: {note}; learning_rate=0.001" in out
    pruned_runs = sorted((study_dir / "trials" / "1").iterdir())
    assert len(pruned_runs) == (2 if backend == "gymnax" else 1)  # seed 1 never started apart
    for run in pruned_runs:  # stopped after the iteration that evaluated, with a checkpoint
        steps = [r["step"] for r in read_metrics(run) if r["phase"] == "eval"]
        assert steps == [200, 400]
        assert ckpt.latest_checkpoint(run / "checkpoints")[0] == 400


def test_steps_to_a_score_is_minimised(capsys, tmp_path, fakes):
    study_dir = tmp_path / "cp"
    code, _, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space_file(tmp_path), "--trials",
        "3", "--study", str(study_dir), *FAKE, "--objective", "steps-to:2000",
        "--pruner", "none",
    )  # fmt: skip
    assert code == 0, err
    study = load(study_dir)
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    # 0.01 scores 10 x step: 2000 at step 200; 0.001 scores step: never within 1,000 steps.
    expected = {0.01: 200.0, 0.001: 1001.0}
    assert [t.value for t in study.trials] == [
        expected[t.params["learning_rate"]] for t in study.trials
    ]


def test_ctrl_c_fails_the_trial_with_a_note_and_a_rerun_retries_it(capsys, tmp_path, fakes):
    fakes(signal_at=3)
    study_dir = tmp_path / "cp"
    argv = ["tune", "--config", "cartpole_jax", "--space", space_file(tmp_path), "--trials", "2",
            "--study", str(study_dir), *FAKE]  # fmt: skip
    code, out, err = run_cli(capsys, *argv)
    assert code == 128 + signal.SIGINT
    assert "stopped the study by SIGINT; the trial is failed and queued again" in err
    study = load(study_dir)
    assert states(study) == ["FAIL", "WAITING"]
    stopped, retry = study.trials
    assert stopped.user_attrs["note"] == "stopped by SIGINT at step 300"
    assert retry.params == stopped.params and retry.system_attrs["failed_trial"] == 0
    assert "trial 0 FAIL: stopped by SIGINT at step 300; retried as trial 1" in out

    fakes(signal_at=None)
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["FAIL", "COMPLETE", "COMPLETE"]
    assert study.trials[1].params == stopped.params
    assert study.trials[1].user_attrs["note"] == "retry of trial 0"


def test_a_journal_storage_holds_a_study_that_show_reads(capsys, tmp_path, fakes):
    journal = tmp_path / "cp.journal"
    where = ["--storage", f"journal:{journal}", "--study-name", "shared"]
    code, _, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space_file(tmp_path), "--trials",
        "2", "--study", str(tmp_path / "cp"), *where, *FAKE,
    )  # fmt: skip
    assert code == 0, err
    assert not (tmp_path / "cp" / "study.db").exists()
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))
    )
    study = optuna.load_study(study_name="shared", storage=storage)
    assert states(study) == ["COMPLETE", "COMPLETE"]
    code, out, _ = run_cli(capsys, "tune", "--show", str(tmp_path / "cp"), *where)
    assert code == 0
    assert out.splitlines()[0] == f"study 'shared' in journal:{journal}: 2 trials (2 complete)"


def test_a_combination_the_config_rejects_fails_its_trial_and_the_study_goes_on(
    capsys, tmp_path, fakes
):
    # Each value alone passes the space's check; together the config refuses them.
    space = "target_kl: {choice: [0.01]}\nminibatch_diagnostics: {choice: [false]}\n"
    study_dir = tmp_path / "cp"
    code, out, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space_file(tmp_path, space),
        "--trials", "1", "--study", str(study_dir), *FAKE,
    )  # fmt: skip
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["FAIL"]
    note = study.trials[0].user_attrs["note"]
    assert note.startswith("invalid combination: invalid config: minibatch_diagnostics=False")
    assert f"trial 0 FAIL: {note}" in out
    assert "study 'cp': 1 trials run now; 1 trials (1 fail); none complete yet" in out
    assert not (study_dir / "trials" / "0").exists()


def test_the_trials_of_a_process_that_ended_are_failed_and_queued_again(tmp_path):
    study_dir = tmp_path / "cp"
    study_dir.mkdir()
    storage = study_module.open_storage(f"sqlite:///{study_dir / 'study.db'}", heartbeat=None)
    study = optuna.create_study(study_name="cp", storage=storage)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    here = study_module.owner()
    records = [
        {**here, "trial": 0, "pid": int(ended.stdout), "started": 1.0},  # ended: failed
        {**here, "trial": 0},  # names another trial (a retry's copy): left alone
        {**here, "trial": 2},  # this process, alive: left alone
        {**here, "trial": 3, "host": "elsewhere", "pid": int(ended.stdout)},  # not this host's
    ]
    for number, record in enumerate(records):
        trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
        trial.set_user_attr(study_module.OWNER_ATTR, record)
        assert trial.number == number
    assert study_module.recover_trials(study, storage) == [0]
    # Other machines' trials: Optuna's heartbeat on a database storage, retried alike.
    beating = study_module.open_storage(f"sqlite:///{study_dir / 'study.db'}", heartbeat=7)
    assert beating.get_heartbeat_interval() == 7
    retry = beating.get_heartbeat_stale_trial_callback()
    assert isinstance(retry, optuna.storages.RetryHeartbeatStaleTrialCallback)
    assert states(study) == ["FAIL", "RUNNING", "RUNNING", "RUNNING", "WAITING"]
    failed, *_, retry = study.trials
    assert failed.user_attrs["note"].startswith(f"its process (pid {int(ended.stdout)} on ")
    assert retry.params == failed.params and retry.system_attrs["failed_trial"] == 0


def test_optuna_missing_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # its import fails
    code, _, err = run_cli(capsys, "tune", "--config", "cartpole_jax", "--space",
                           space_file(tmp_path), "--trials", "2")  # fmt: skip
    assert code == 2
    assert err == (
        'batchppo: error: batchppo tune needs optuna: pip install -e ".[tune]" (or pip '
        "install 'batchppo[tune]')\n"
    )


# --- Real runs at a tiny budget -------------------------------------------------------------

TINY = [word for o in tiny_run(steps=512, eval_episodes=2, max_length=30)
        for word in ("--set", o)]  # fmt: skip
"""2 iterations of 8 envs x 32 steps, evaluations of 2 episodes of at most 30 steps."""
PROCESS = [*TINY, "--set", "backend_options.num_workers=1"]
"""The cartpole preset's process backend, with one worker."""
SYNC = [*TINY, "--set", "backend=sync"]
"""The envs in the learner's process: no worker to start."""
ONE_RATE = "learning_rate: {choice: [0.003]}\n"
"""The space of the real runs: every trial trains one program, compiled once."""


def tune_command(study_dir: Path, *argv: str) -> list[str]:
    return [sys.executable, "-m", "batchppo", "tune", "--study", str(study_dir), "--progress",
            "lines", *argv]  # fmt: skip


def subprocess_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}


def wait_for(base: Path, pattern: str, process: subprocess.Popen, timeout: float = 240) -> Path:
    """The first path under ``base`` matching ``pattern`` once one exists (while ``process``
    runs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(base.glob(pattern))
        if found:
            return found[0]
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError(f"{base / pattern} did not appear")


def final_scores(run_dirs: list[Path]) -> list[float]:
    return [[r for r in read_metrics(d) if r["phase"] == "eval"][-1]["score"] for d in run_dirs]


# Its trials and the results it checks are all of this process: its programs compile with the
# options of the programs that run once.
@pytest.mark.usefixtures("cold_training_programs")
def test_a_fused_study_from_the_command_line_trains(capsys, tmp_path):
    study_dir = tmp_path / "cp"
    space = space_file(tmp_path, ONE_RATE)
    code, out, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space, "--trials", "2",
        "--seeds", "2", "--study", str(study_dir), *TINY,
    )  # fmt: skip
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["COMPLETE", "COMPLETE"]
    for trial in study.trials:
        runs = sorted((study_dir / "trials" / str(trial.number)).iterdir())
        assert [configs.load_config(r / "config.yaml").seed for r in runs] == [0, 1]
        assert {configs.load_config(r / "config.yaml").learning_rate for r in runs} == {0.003}
        scores = final_scores(runs)
        assert trial.user_attrs["scores"] == scores
        assert trial.value == scipy.stats.trim_mean(scores, 0.25)
    assert "importances.png (PED-ANOVA over 2 complete trials)" in out


@pytest.mark.extended  # CI covers recovery with fake trials (an ended process's trials)
def test_a_killed_host_study_resumes_and_its_best_trains(capsys, tmp_path):
    study_dir = tmp_path / "cp"
    argv = ["--config", "cartpole", "--space", space_file(tmp_path, ONE_RATE), "--trials", "2",
            "--seeds", "2", *SYNC]  # fmt: skip
    killed = subprocess.Popen(tune_command(study_dir, *argv), env=subprocess_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    wait_for(study_dir, "trials/1", killed)  # trial 1 has started
    killed.kill()
    killed.communicate()
    code, out, err = run_cli(capsys, "tune", "--study", str(study_dir), *argv)
    assert code == 0, err
    assert out.splitlines()[0] == (
        "trial 1: its process ended while it ran; failed, and queued again as trial 2"
    )
    study = load(study_dir)
    assert states(study) == ["COMPLETE", "FAIL", "COMPLETE"]
    assert study.trials[2].params == study.trials[1].params
    assert study.trials[1].user_attrs["note"].endswith("ended while it ran")

    best = study.best_trial
    train = ["train", "--config", str(study_dir / "best.yaml"), "--logdir", str(tmp_path / "log")]
    code, out, err = run_cli(capsys, *train, "--progress", "none")
    assert code == 0, err
    (run,) = (tmp_path / "log").iterdir()
    seed_0 = sorted((study_dir / "trials" / str(best.number)).iterdir())[0]
    assert configs.load_config(run / "config.yaml") == configs.load_config(seed_0 / "config.yaml")
    assert final_scores([run]) == final_scores([seed_0])  # host envs: bit for bit


@pytest.mark.extended  # CI covers Ctrl-C with fake trials, and no orphans with train
def test_ctrl_c_stops_a_host_study_that_trains_and_leaves_no_worker_behind(tmp_path):
    study_dir = tmp_path / "cp"
    argv = ["--config", "cartpole", "--space", space_file(tmp_path, ONE_RATE), "--trials", "2",
            "--seeds", "1", *PROCESS, "--set", "steps=100000"]  # fmt: skip
    process = subprocess.Popen(
        tune_command(study_dir, *argv), env=subprocess_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for(study_dir, "trials/0/*-s0/metrics.jsonl", process)
    # The env workers, and multiprocessing's forkserver and resource tracker, which end
    # when the process that started them does.
    children = psutil.Process(process.pid).children(recursive=True)
    assert any("batchppo.envs.workers.worker" in " ".join(c.cmdline()) for c in children)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, err
    assert "stopped the study by SIGINT" in err
    _, alive = psutil.wait_procs(children, timeout=60)
    assert alive == []
    study = load(study_dir)
    assert states(study) == ["FAIL", "WAITING"]
    assert study.trials[0].user_attrs["note"].startswith("stopped by SIGINT at step ")


@pytest.mark.extended  # CI covers a shared storage with fake trials (the journal test)
def test_two_processes_share_one_study_that_trains(tmp_path):
    study_dir = tmp_path / "cp"  # both start at once: the default SQLite file, created once
    argv = ["--config", "cartpole", "--space", space_file(tmp_path, ONE_RATE), "--trials", "2",
            "--seeds", "1", *SYNC]  # fmt: skip
    processes = [
        subprocess.Popen(tune_command(study_dir, *argv), env=subprocess_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    study = load(study_dir)
    # Each process stops once 2 trials are complete; one running then finishes too.
    assert states(study) in (["COMPLETE"] * 2, ["COMPLETE"] * 3)
    ran = [
        {int(line.split()[1]) for line in out.splitlines() if line.startswith("trial ")}
        for out, _ in outputs
    ]
    assert ran[0] | ran[1] == {t.number for t in study.trials} and not ran[0] & ran[1]
    owners = {t.user_attrs["process"]["pid"] for t in study.trials}
    assert owners == {p.pid for p, r in zip(processes, ran, strict=True) if r}

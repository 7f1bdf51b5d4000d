"""``batchppo tune --batch B``: B trials asked at a time and trained as one program of
``B x K`` members (``batchppo.experiment.tune.batch``, ``.members``).

Most tests train fake members (``LrSeedsTrainer``) whose states carry their trial's learning
rate, attached as PPO's per-member values are (``FakeMembers``), and whose evaluations score
``step * learning_rate * 1000``: every value a study records is known exactly, and a member
that got another trial's rate would score another value. The test whose name says it trains
runs a real batch at a tiny budget and compares each member with a run of its own trial's
config.
"""

from __future__ import annotations

import signal
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optuna
import pytest
from experiment_fakes import FakeSeedsTrainer
from tiny_runs import tiny_run

import batchppo.algorithms.ppo.hparams as hparams_module
import batchppo.algorithms.ppo.ppo as ppo_module
from batchppo import cli
from batchppo.experiment import tune as tune_module
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import configs
from batchppo.experiment.run.training import train

FAKE = ["--set", "num_agents=10", "--set", "rollout_length=10", "--set", "steps=1000",
        "--set", "eval_every=200", "--seeds", "2", "--progress", "lines"]  # fmt: skip
"""A fake trial (as tests/experiment/test_tune.py's): 10 iterations of 100 steps, an evaluation
every 200 steps, 2 seeds."""
RATES = "learning_rate: {choice: [0.001, 0.01]}\n"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def space_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return str(path)


def load(study_dir: Path) -> optuna.Study:
    return optuna.load_study(study_name=study_dir.name, storage=f"sqlite:///{study_dir}/study.db")


def states(study: optuna.Study) -> list[str]:
    return [t.state.name for t in study.get_trials()]


def scaled(config) -> float:
    """The final score of every member of a fake trial of ``config``."""
    return float(config.steps) * config.learning_rate * 1000


class FakeMembers:
    """PPO's ``Members`` for fake states: a fresh state's params carry each member's rate
    (float32, as PPO's values)."""

    def __init__(self, member_configs):
        self.rates = np.float32([c.learning_rate for c in member_configs])

    def attach(self, state, fresh=False):
        return (
            state.replace(params={**state.params, "lr": jnp.asarray(self.rates)})
            if fresh
            else state
        )

    @staticmethod
    def detach(state):
        return state


class LrSeedsTrainer(FakeSeedsTrainer):
    """Fake members that keep their rate and score ``step * rate * 1000``; ``built`` records
    the members of each program."""

    built: list[int] = []  # noqa: RUF012  (test bookkeeping)

    def __init__(self, config, num_members, signal_at=None):
        super().__init__(config, num_members, signal_at, signal.SIGINT)
        LrSeedsTrainer.built.append(num_members)

    def iteration(self, ts, ss):
        new, ss, metrics = super().iteration(ts, ss)
        return new.replace(params={**new.params, "lr": ts.params["lr"]}), ss, metrics

    def evaluate(self, ts, num_episodes, key, sample=False):
        result = self.one.evaluate(ts, num_episodes, key, sample)
        score = float(ts.step) * float(ts.params["lr"]) * 1000
        return {**result, "score": score, "returns": np.full((num_episodes,), score)}


@pytest.fixture
def fakes(monkeypatch):
    """The programs train ``LrSeedsTrainer``s; ``fakes(signal_at=N)`` sends SIGINT at update N."""

    def use(signal_at=None):
        LrSeedsTrainer.built = []
        monkeypatch.setattr(
            ppo_module, "SeedsTrainer", lambda c, n: LrSeedsTrainer(c, n, signal_at)
        )
        monkeypatch.setattr(hparams_module, "Members", FakeMembers)

    use()
    return use


def base_config(*sets: str):
    return configs.apply_overrides(configs.get_preset("cartpole_jax"), [*FAKE[1:8:2], *sets])


def enqueue(study_dir: Path, *params: dict, direction: str = "maximize") -> None:
    study_dir.mkdir()
    storage = f"sqlite:///{study_dir / 'study.db'}"
    study = optuna.create_study(study_name=study_dir.name, storage=storage, direction=direction)
    for p in params:
        study.enqueue_trial(p)


def test_a_batch_trains_its_trials_in_one_program_and_scores_each(capsys, tmp_path, fakes):
    study_dir = tmp_path / "cp"
    argv = ["tune", "--config", "cartpole_jax", "--space", space_file(tmp_path, RATES),
            "--trials", "5", "--study", str(study_dir), "--batch", "3", *FAKE,
            "--pruner", "none"]  # fmt: skip
    # No pruner: the sampler is unseeded, and a median pruner would prune a sixth trial that
    # drew the lower rate (the rerun below counts completed trials).
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert LrSeedsTrainer.built == [6, 4]  # 3 trials x 2 seeds, then the 2 trials left
    study = load(study_dir)
    assert states(study) == ["COMPLETE"] * 5
    base = base_config()
    for trial in study.trials:
        config = configs.replace_config(base, trial.params)
        assert trial.value == pytest.approx(scaled(config), rel=1e-6)  # its own rate (float32)
        runs = sorted((study_dir / "trials" / str(trial.number)).iterdir())
        assert [configs.load_config(r / "config.yaml") for r in runs] == [
            config, configs.replace_config(config, {"seed": 1})
        ]  # fmt: skip
        assert trial.user_attrs["run_dirs"] == [str(r) for r in runs]
        assert f"trial {trial.number} COMPLETE: value {trial.value:.6g}" in out
    assert "5 trials run now; 5 trials (5 complete)" in out
    assert configs.config_from_file(study_dir / "best.yaml") == configs.replace_config(
        base, study.best_params
    )
    # A rerun asks for the trials still missing only.
    code, out, _ = run_cli(capsys, *argv[:6], "6", *argv[7:])
    assert code == 0 and "1 trials run now; 6 trials (6 complete)" in out
    assert LrSeedsTrainer.built == [6, 4, 2]  # one program of the one trial missing


def test_a_pruned_trial_computes_on_in_its_program_and_a_program_all_pruned_stops(
    capsys, tmp_path, fakes, monkeypatch
):
    monkeypatch.setattr(tune_module, "MEDIAN_STARTUP_TRIALS", 1)
    study_dir = tmp_path / "cp"
    rates = [0.01, 0.01, 0.01, 0.001, 0.001, 0.001]  # three rounds of two
    enqueue(study_dir, *({"learning_rate": r} for r in rates))
    code, out, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space_file(tmp_path, RATES),
        "--trials", "6", "--study", str(study_dir), "--batch", "2", *FAKE,
    )  # fmt: skip
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["COMPLETE", "COMPLETE", "COMPLETE", "PRUNED", "PRUNED", "PRUNED"]
    # Past the first third of 1,000 steps, the evaluation at step 400 of a 0.001 trial (400)
    # is below the median of the complete trials' there (4000): pruned, its value that 400.
    note = "pruned at step 400 (value 400)"
    for trial in study.trials[3:]:
        assert trial.user_attrs["note"] == note and trial.value == pytest.approx(400.0)
        assert list(trial.intermediate_values) == [200, 400]  # none after pruning
    assert f"trial 3 PRUNED: {note}; learning_rate=0.001" in out

    def eval_steps(number):
        runs = sorted((study_dir / "trials" / str(number)).iterdir())
        return [[r["step"] for r in read_metrics(run) if r["phase"] == "eval"] for run in runs]

    # Trial 3 shared its program with trial 2, which went on: its members computed on.
    assert eval_steps(3) == [[200, 400, 600, 800, 1000]] * 2
    # Trials 4 and 5 were both pruned at step 400: their program stopped there.
    assert eval_steps(4) == eval_steps(5) == [[200, 400]] * 2


def test_ctrl_c_fails_every_trial_of_the_batch_and_a_rerun_retries_them(capsys, tmp_path, fakes):
    fakes(signal_at=3)
    study_dir = tmp_path / "cp"
    argv = ["tune", "--config", "cartpole_jax", "--space", space_file(tmp_path, RATES),
            "--trials", "2", "--study", str(study_dir), "--batch", "2", *FAKE]  # fmt: skip
    code, out, err = run_cli(capsys, *argv)
    assert code == 128 + signal.SIGINT
    assert "stopped the study by SIGINT" in err
    study = load(study_dir)
    assert states(study) == ["FAIL", "FAIL", "WAITING", "WAITING"]
    for stopped, retry in zip(study.trials[:2], study.trials[2:], strict=True):
        assert stopped.user_attrs["note"] == "stopped by SIGINT at step 300"
        assert retry.params == stopped.params
        assert retry.system_attrs["failed_trial"] == stopped.number
    assert "trial 1 FAIL: stopped by SIGINT at step 300; retried as trial 3" in out

    fakes(signal_at=None)
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["FAIL", "FAIL", "COMPLETE", "COMPLETE"]
    assert [t.user_attrs["note"] for t in study.trials[2:]] == [
        "retry of trial 0",
        "retry of trial 1",
    ]
    assert [t.params for t in study.trials[2:]] == [t.params for t in study.trials[:2]]


def test_trials_that_differ_in_a_shape_train_as_one_program_per_shape(capsys, tmp_path, fakes):
    study_dir = tmp_path / "cp"
    asked = [(1, 0.01), (2, 0.001), (1, 0.001)]
    enqueue(study_dir, *({"update_epochs": e, "learning_rate": r} for e, r in asked))
    space = space_file(tmp_path, RATES + "update_epochs: {choice: [1, 2]}\n")
    code, out, err = run_cli(
        capsys, "tune", "--config", "cartpole_jax", "--space", space, "--trials", "3",
        "--study", str(study_dir), "--batch", "3", *FAKE,
    )  # fmt: skip
    assert code == 0, err
    assert LrSeedsTrainer.built == [4, 2]  # trials 0 and 2 in one program, then trial 1
    assert (
        "trials 0, 1, 2: 2 programs, one after another (they differ in update_epochs, which "
        "changes shapes or code paths)"
    ) in out
    study = load(study_dir)
    base = base_config()
    assert [t.value for t in study.trials] == pytest.approx(
        [scaled(configs.replace_config(base, t.params)) for t in study.trials], rel=1e-6
    )
    assert out.index("trial 2 COMPLETE") < out.index("trial 1 COMPLETE")


@pytest.mark.parametrize(
    "config, sets, space, message",
    [
        ("cartpole_jax", ["--batch", "0"], RATES, "--batch 0: must be >= 1"),
        ("cartpole_jax", ["--set", "backend=sync"], RATES,
         "--batch 2: a batch of trials trains as one compiled program on a fused backend"),
        ("cartpole_a2c", [], RATES,
         "--batch 2: A2C carries no per-trial values in one program; drop --batch (or --batch 1)"),
        ("cartpole_jax", [], "backend: {choice: [gymnax, sync]}\n",
         "--batch 2: the space tunes backend, which picks how envs run; fix it with --set"),
    ],
    ids=["zero", "host-backend", "a2c", "tuned-backend"],
)  # fmt: skip
def test_a_batch_that_cannot_train_as_one_program_is_refused_in_one_line(
    capsys, tmp_path, config, sets, space, message
):
    code, _, err = run_cli(
        capsys, "tune", "--config", config, "--space", space_file(tmp_path, space), "--trials",
        "2", "--study", str(tmp_path / "st"), "--batch", "2", *sets,
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1
    assert message in err
    assert not (tmp_path / "st").exists()


# --- A real batch ---------------------------------------------------------------------------

TINY = [word for o in tiny_run(steps=512, eval_episodes=2, max_length=30, eval_every=256)
        for word in ("--set", o)]  # fmt: skip
"""2 iterations of 8 envs x 32 steps, evaluations of 2 episodes of at most 30 steps after each."""

RTOL, ATOL = 1e-4, 1e-5
"""How close a member comes to a run of its trial's config: float rounding (its values are
traced float32 arrays where the run's are constants, and the programs are compiled apart)."""
SPACE = """\
learning_rate: {log_uniform: [1.0e-4, 3.0e-2]}
clip_epsilon: {uniform: [0.1, 0.3]}
discount: {uniform: [0.8, 0.999]}
gae_lambda: {uniform: [0.5, 1.0]}
entropy_coef: {uniform: [0.0, 0.1]}
"""
TRIALS = [
    {"learning_rate": 0.02, "clip_epsilon": 0.1, "discount": 0.8, "gae_lambda": 0.5,
     "entropy_coef": 0.1},
    {"learning_rate": 0.001, "clip_epsilon": 0.3, "discount": 0.99, "gae_lambda": 0.95,
     "entropy_coef": 0.0},
]  # fmt: skip
"""Values far apart: swapped or ignored, a member would match the other trial's runs."""
NOT_COMPARED = ("sps", "wall_time")


# Its runs are two iterations each; the batch and the runs it is compared with compile in this
# process with the same options.
@pytest.mark.extended  # CI covers a batch training and scoring each trial (above)
@pytest.mark.usefixtures("cold_training_programs")
def test_each_member_of_a_batch_that_trains_matches_a_run_of_its_trials_config(capsys, tmp_path):
    study_dir = tmp_path / "pd"
    enqueue(study_dir, *TRIALS)
    argv = ["tune", "--config", "pendulum_jax", "--space", space_file(tmp_path, SPACE),
            "--trials", "2", "--seeds", "2", "--batch", "2", "--study", str(study_dir), *TINY,
            "--progress", "lines"]  # fmt: skip
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    study = load(study_dir)
    assert states(study) == ["COMPLETE", "COMPLETE"]
    finals = []
    for trial, values in zip(study.trials, TRIALS, strict=True):
        members = sorted((study_dir / "trials" / str(trial.number)).iterdir())
        config = configs.load_config(members[0] / "config.yaml")
        assert {key: getattr(config, key) for key in values} == values
        alone = train(config, tmp_path / "alone", name=f"t{trial.number}", seeds=2, progress="none")
        for member, run in zip(members, alone, strict=True):
            got, want = read_metrics(member), read_metrics(run.run_dir)
            assert [r["step"] for r in got] == [r["step"] for r in want]
            for g, w in zip(got, want, strict=True):
                assert g.keys() == w.keys()
                for key in g.keys() - set(NOT_COMPARED):
                    if isinstance(w[key], float):
                        np.testing.assert_allclose(g[key], w[key], RTOL, ATOL, err_msg=key)
                    else:  # the phase, counts, the eval protocol
                        assert g[key] == w[key], key
            found = ckpt.latest_checkpoint(member / "checkpoints")
            assert found[0] == run.step == 512
            state, _ = ckpt.restore_checkpoint(found[1], run.train_state)
            assert state.hparams is None  # a run's checkpoint
            close = lambda a, b: np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)  # noqa: E731
            jax.tree.map(close, ckpt.to_host(state), ckpt.to_host(run.train_state))
        assert trial.user_attrs["scores"] == pytest.approx([r.score for r in alone], rel=RTOL)
        finals.append(np.concatenate([np.ravel(x) for x in jax.tree.leaves(state.params)]))
    assert np.max(np.abs(finals[0] - finals[1])) > 1e-2  # the trials' values set them apart

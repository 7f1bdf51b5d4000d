"""A run's phases, cadence, checkpoints and resume (``train``, its driver and ledgers), with a
deterministic fake trainer."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import signal

import numpy as np
import pytest
from experiment_fakes import FakeTrainer, fake_config

from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.eval_protocol import EvalProtocol
from batchppo.experiment.artifacts.logging import RunLogger, read_metrics, read_scalars, read_texts
from batchppo.experiment.config import configs
from batchppo.experiment.errors import (
    ConfigError,
    CorruptCheckpointError,
    RunDirError,
    StorageError,
)
from batchppo.experiment.run import stopping, training
from batchppo.experiment.run.callbacks import Callback
from batchppo.experiment.run.driver import Driver
from batchppo.experiment.run.ledger import RunLedger
from batchppo.experiment.run.run_set import SingleRun
from batchppo.experiment.run.window import MetricWindow, crossed

# 100 steps per iteration, steps=1000, log_every=250, eval_every=400, checkpoint_every=300.
TRAIN_STEPS = [300, 500, 800, 1000]
EVAL_STEPS = [400, 800, 1000]


def run(tmp_path, config=None, timestamp="T", **kwargs):
    return training.train(
        config or fake_config(),
        tmp_path,
        name="fake",
        timestamp=timestamp,
        progress=kwargs.pop("progress", "none"),
        trainer_factory=kwargs.pop("factory", FakeTrainer),
        **kwargs,
    )


def steps_of(records, phase):
    return [r["step"] for r in records if r["phase"] == phase]


def test_cadence_of_reports_evals_and_checkpoints(tmp_path):
    result = run(tmp_path)
    run_dir = tmp_path / "T-fake"
    assert result.run_dir == run_dir and result.step == 1000 and not result.interrupted
    assert [p.name for p in tmp_path.iterdir()] == ["T-fake"]  # no staging dir left
    assert result.score == 1000.0
    records = read_metrics(run_dir)
    assert records == result.records
    assert steps_of(records, "train") == TRAIN_STEPS
    assert steps_of(records, "eval") == EVAL_STEPS
    # Train reports aggregate the iterations since the last report.
    train = [r for r in records if r["phase"] == "train"]
    assert [r["score"] for r in train] == [200.0, 450.0, 700.0, 950.0]
    assert [r["episodes"] for r in train] == [6, 4, 6, 4]
    assert [r["policy_loss"] for r in train] == [2.0, 4.5, 7.0, 9.5]
    assert train[0]["kl"] == 0.5  # NaN of the first iteration ignored
    for r in records:
        assert {"step", "phase", "score", "length", "sps", "wall_time"} <= set(r)
        assert r["sps"] > 0 and r["wall_time"] >= 0
    evals = [r for r in records if r["phase"] == "eval"]
    assert [(r["score"], r["length"], r["episodes"]) for r in evals] == [
        (400.0, 7.0, 3),
        (800.0, 7.0, 3),
        (1000.0, 7.0, 3),
    ]
    # Checkpoints at 300, 600, 900 and the end; keep_checkpoints=2.
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [900, 1000]
    expected = [(s, r["score"]) for s, r in zip(TRAIN_STEPS, train, strict=True)]
    assert read_scalars(run_dir / "train")["score"] == expected
    assert [s for s, _ in read_scalars(run_dir / "eval")["score"]] == EVAL_STEPS
    assert configs.load_config(run_dir / "config.yaml") == fake_config()
    assert FakeTrainer.instances[-1].closed


def test_no_logdir_means_no_disk_io(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = training.train(fake_config(), progress="none", trainer_factory=FakeTrainer)
    assert result.run_dir is None and result.score == 1000.0
    assert str(result.protocol) == "3 episodes, mean action"
    assert steps_of(result.records, "train") == TRAIN_STEPS
    assert list(tmp_path.iterdir()) == []


def test_a_run_without_evaluations_has_neither_score_nor_protocol():
    config = fake_config(eval_episodes=0)
    result = training.train(config, progress="none", trainer_factory=FakeTrainer)
    assert (result.score, result.protocol) == (None, None)
    assert steps_of(result.records, "eval") == []


def test_sigterm_finishes_the_iteration_saves_and_resumes_the_same_curves(tmp_path):
    def stopping(config):
        return FakeTrainer(config, signal_at=5, signal_num=signal.SIGTERM)

    handler = signal.getsignal(signal.SIGTERM)
    first = run(tmp_path, factory=stopping)
    assert signal.getsignal(signal.SIGTERM) is handler  # restored
    assert first.interrupted and first.stop_signal == signal.SIGTERM and first.step == 500
    run_dir = tmp_path / "T-fake"
    assert ckpt.latest_checkpoint(run_dir / "checkpoints")[0] == 500
    second = run(tmp_path)
    assert second.step == 1000 and not second.interrupted
    assert float(second.train_state.params["w"][0]) == 10.0  # 10 iterations in all
    records = read_metrics(run_dir)
    assert steps_of(records, "train") == TRAIN_STEPS
    assert steps_of(records, "eval") == EVAL_STEPS
    assert [s for s, _ in read_scalars(run_dir / "train")["score"]] == TRAIN_STEPS
    assert [s for s, _ in read_scalars(run_dir / "eval")["score"]] == EVAL_STEPS


def test_ctrl_c_during_start_up_stops_before_the_first_iteration(tmp_path):
    # Before, start-up ran under Python's default handler: a KeyboardInterrupt raised while
    # a garbage-collection callback ran (JAX has one) was printed and dropped, and the run
    # went on to the end.
    def interrupted_at_start(config):
        return FakeTrainer(config, signal_at=0, signal_num=signal.SIGINT)

    handler = signal.getsignal(signal.SIGINT)
    result = run(tmp_path, factory=interrupted_at_start)
    assert signal.getsignal(signal.SIGINT) is handler  # restored
    assert result.interrupted and result.stop_signal == signal.SIGINT and result.step == 0
    assert ckpt.latest_checkpoint(tmp_path / "T-fake" / "checkpoints")[0] == 0
    assert FakeTrainer.instances[-1].closed
    resumed = run(tmp_path)
    assert resumed.step == 1000 and not resumed.interrupted


def test_a_second_ctrl_c_aborts_even_if_its_exception_was_swallowed():
    with stopping.graceful_stop(lambda text: None) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signum == signal.SIGINT and not stop.abort
        stop.check_abort()  # the first Ctrl-C only asks to stop
        with contextlib.suppress(KeyboardInterrupt):  # as a gc callback would drop it
            os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            stop.check_abort()


def test_resume_after_a_crash_drops_reports_after_the_last_checkpoint(tmp_path):
    run(tmp_path)
    run_dir = tmp_path / "T-fake"
    # As if killed after the reports of step 1000 but before its checkpoint was renamed.
    ckpt.checkpoint_path(run_dir / "checkpoints", 1000).unlink()
    resumed = run(tmp_path)
    trainer = FakeTrainer.instances[-1]
    assert trainer.evaluated_at == [1000]  # only the step after the checkpoint re-ran
    assert resumed.step == 1000
    assert float(resumed.train_state.params["w"][0]) == 10.0
    records = read_metrics(run_dir)
    assert steps_of(records, "train") == TRAIN_STEPS
    assert steps_of(records, "eval") == EVAL_STEPS
    assert [s for s, _ in read_scalars(run_dir / "train")["score"]] == TRAIN_STEPS
    assert [s for s, _ in read_scalars(run_dir / "eval")["score"]] == EVAL_STEPS
    # Wall time continues from the checkpoint instead of restarting at zero.
    times = [r["wall_time"] for r in records]
    assert times == sorted(times)


class Hooks(Callback):
    def __init__(self):
        self.calls = []

    def on_train_start(self, run, step):
        self.calls.append(("start", run.index, step))

    def on_train_end(self, run, result):
        self.calls.append(("end", run.index, result.step))


def test_resume_of_a_complete_run_builds_nothing_and_raising_steps_continues(tmp_path, capsys):
    run(tmp_path)
    built, hooks = len(FakeTrainer.instances), Hooks()
    again = run(tmp_path, progress="lines", callbacks=hooks)
    # Decided before a trainer is built: no program traced or compiled, no env started.
    assert len(FakeTrainer.instances) == built
    final = tmp_path / "T-fake" / "checkpoints" / "ckpt-000000001000.msgpack"
    assert capsys.readouterr().out == (
        f"run already complete at step 1,000 (steps=1,000), nothing to train; final checkpoint "
        f"{final}; to train on, raise steps (--set steps=N)\n"
    )
    assert again.step == 1000 and again.records == [] and again.score == 1000.0
    assert not again.interrupted and hooks.calls == [("start", 0, 1000), ("end", 0, 1000)]
    # The final state loads when read, with a trainer of its own (closed after).
    assert float(again.train_state.params["w"][0]) == 10.0
    assert len(FakeTrainer.instances) == built + 1 and FakeTrainer.instances[-1].closed
    more = run(tmp_path, overrides=["steps=1200"], config="cartpole_jax")
    assert more.step == 1200 and more.config.steps == 1200
    run_dir = tmp_path / "T-fake"
    assert steps_of(read_metrics(run_dir), "train") == [*TRAIN_STEPS, 1200]
    assert steps_of(read_metrics(run_dir), "eval") == [*EVAL_STEPS, 1200]
    assert configs.load_config(run_dir / "config.yaml").steps == 1200


def test_a_complete_run_annealed_to_0_says_to_start_a_new_run(tmp_path, capsys):
    config = fake_config(anneal_lr=True)
    run(tmp_path, config)
    capsys.readouterr()
    run(tmp_path, config, progress="lines")
    assert capsys.readouterr().out.endswith(
        "; anneal_lr anneals the learning rate to 0 over steps=1000 (anneal_lr_end=0), so past "
        "them it would train at a rate of 0: to train longer, start a new run (another "
        "--timestamp)\n"
    )
    ending = fake_config(anneal_lr=True, anneal_lr_end=0.5)  # its anneal may be extended
    run(tmp_path, ending, timestamp="U")
    capsys.readouterr()
    run(tmp_path, ending, timestamp="U", progress="lines")
    assert capsys.readouterr().out.endswith("; to train on, raise steps (--set steps=N)\n")


def test_a_damaged_final_checkpoint_is_no_complete_run(tmp_path):
    run(tmp_path)
    final = ckpt.checkpoint_path(tmp_path / "T-fake" / "checkpoints", 1000)
    final.write_bytes(final.read_bytes()[:-10])
    built = len(FakeTrainer.instances)
    resumed = run(tmp_path)  # from step 900, the damaged one moved aside
    assert len(FakeTrainer.instances) == built + 1
    assert FakeTrainer.instances[-1].evaluated_at == [1000]
    assert resumed.step == 1000 and float(resumed.train_state.params["w"][0]) == 10.0
    assert steps_of(resumed.records, "train") == [1000]


def test_resume_refuses_changes_of_meaning(tmp_path):
    run(tmp_path)
    with pytest.raises(ConfigError, match="learning_rate"):
        run(tmp_path, config=dataclasses.replace(fake_config(), learning_rate=0.5))
    with pytest.raises(ConfigError, match=r"^cannot change a resumed run's meaning: seed=3 "):
        run(tmp_path, overrides=["seed=3"])
    with pytest.raises(ConfigError, match="discount"):
        run(tmp_path, config="cartpole_jax", overrides=["discount=0.5"])


def test_run_dir_without_config_is_refused(tmp_path):
    (tmp_path / "T-fake").mkdir()
    with pytest.raises(RunDirError, match=r"holds no config\.yaml"):
        run(tmp_path)


def test_load_policy_uses_the_checkpoint(tmp_path):
    run(tmp_path)
    run_dir = tmp_path / "T-fake"
    policy = training.load_policy(run_dir, trainer_factory=FakeTrainer)
    np.testing.assert_array_equal(policy(np.zeros((2, 4))), [[10.0], [10.0]])
    policy = training.load_policy(run_dir, checkpoint=900, trainer_factory=FakeTrainer)
    np.testing.assert_array_equal(policy(np.zeros((1, 4))), [[9.0]])
    assert FakeTrainer.instances[-1].closed


def test_progress_lines_when_not_a_terminal(tmp_path, capsys):
    training.train(fake_config(), progress="lines", trainer_factory=FakeTrainer)
    start_up, *lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"start-up: set-up \d+\.\d s \(import of batchppo to the first iteration\), first "
        r"iteration \d+\.\d s \(compilation and one iteration\); steps/s exclude both",
        start_up,
    )
    assert len(lines) == len(TRAIN_STEPS) + len(EVAL_STEPS)
    assert lines[0].startswith("train step         300/1,000 ( 30%) | score     200.0 |")
    assert "steps/s | ETA " in lines[0]
    assert lines[1] == (
        "eval  step         400 | score     400.0 | length 7 | 3 episodes, mean action"
    )


def test_progress_bar_on_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    training.train(fake_config(), progress="auto", trainer_factory=FakeTrainer)
    out = capsys.readouterr().out
    assert "1.00k/1.00k" in out and "score 950.0" in out and "step/s" in out
    # The evals in the bar, not a line each; the score names its protocol.
    assert out.endswith(", eval 1000.0 (3 episodes, mean action)]\n")
    assert "eval at step" not in out


def test_crossed():
    assert crossed(0, 100, 100)
    assert not crossed(100, 199, 100)
    assert crossed(199, 200, 100)
    assert crossed(150, 450, 100)
    assert not crossed(0, 100, 0)


def test_window_leaves_the_compiling_iteration_out_of_the_speed():
    metrics = {"env_steps": 100, "episodes": 0, "score": float("nan"), "length": float("nan")}
    window = MetricWindow()
    window.add(metrics, 10.0, compiling=True)
    assert window.summary()["sps"] == 10.0  # alone, it is all there is
    window.add(metrics, 1.0)
    window.add(metrics, 3.0)
    summary = window.summary()
    assert summary["sps"] == 50.0
    assert np.isnan(summary["score"]) and summary["episodes"] == 0


def test_a_run_sets_every_attribute_in_its_constructor(tmp_path):
    # Its methods never probe for attributes that a later phase may or may not have set.
    trainer, stop = FakeTrainer(fake_config()), stopping.StopFlag()
    run_ = RunLedger(trainer, fake_config(), None, "none", stop)
    driver = Driver(SingleRun(), trainer, [run_], stop)
    before, driver_before = set(vars(run_)), set(vars(driver))
    assert run_.progress is None and run_.logger is None and driver.completed is None
    run_.message("before start")  # no progress output yet: stderr
    (result,) = driver.run()
    assert result.step == 1000 and set(vars(run_)) == before
    assert set(vars(driver)) == driver_before


def test_a_run_stops_on_the_flag_its_driver_gives_it():
    # A driver of several runs (--seeds) installs the signal handlers once and hands each
    # run the flag; a raised flag stops the run before its first iteration.
    flag = stopping.StopFlag()
    flag.signum = signal.SIGTERM
    trainer = FakeTrainer(fake_config())
    run_ = RunLedger(trainer, fake_config(), None, "none", stop=flag)
    assert run_.stop is flag
    (result,) = Driver(SingleRun(), trainer, [run_], flag).run()
    assert result.interrupted and result.stop_signal == signal.SIGTERM and result.step == 0


def test_window_refuses_missing_or_changing_metrics():
    metrics = {"env_steps": 100, "episodes": 1, "score": 5.0, "length": 10, "kl": 0.5}
    window = MetricWindow()
    with pytest.raises(ValueError, match="lack 'episodes'"):
        window.add({k: v for k, v in metrics.items() if k != "episodes"}, 1.0)
    window.add(metrics, 1.0)
    # A metric missing from one iteration is not averaged over fewer iterations (or as 0).
    with pytest.raises(ValueError, match="missing: kl; new: none"):
        window.add({k: v for k, v in metrics.items() if k != "kl"}, 1.0)
    with pytest.raises(ValueError, match="missing: none; new: grad_norm"):
        window.add({**metrics, "grad_norm": 1.0}, 1.0)
    window.add({**metrics, "kl": 1.5}, 1.0)
    summary = window.summary()
    assert window.iterations == 2 and summary["kl"] == 1.0 and summary["episodes"] == 2


def test_eval_reports_count_the_episodes_that_eval_max_steps_cut(tmp_path):
    class CuttingTrainer(FakeTrainer):
        def evaluate(self, ts, num_episodes, key, sample=False):
            return {**super().evaluate(ts, num_episodes, key, sample), "cut": 1}

    run(tmp_path, factory=CuttingTrainer)
    evals = [r for r in read_metrics(tmp_path / "T-fake") if r["phase"] == "eval"]
    assert [r["cut"] for r in evals] == [1, 1, 1]
    assert read_scalars(tmp_path / "T-fake" / "eval")["cut"] == [
        (400, 1.0),
        (800, 1.0),
        (1000, 1.0),
    ]


@pytest.mark.parametrize("actions", ["mean", "sampled"])
def test_eval_phases_act_as_eval_actions_says_and_their_reports_record_it(tmp_path, actions):
    FakeTrainer.instances.clear()
    result = run(tmp_path, dataclasses.replace(fake_config(), eval_actions=actions))
    (trainer,) = FakeTrainer.instances
    assert trainer.sampled == [actions == "sampled"] * len(EVAL_STEPS)
    evals = [r for r in read_metrics(tmp_path / "T-fake") if r["phase"] == "eval"]
    assert [r["actions"] for r in evals] == [actions] * len(EVAL_STEPS)
    assert "actions" not in read_scalars(tmp_path / "T-fake" / "eval")  # not a scalar
    # TensorBoard names the protocol once, as text beside the eval scalars.
    words = {"mean": "3 episodes, mean action", "sampled": "3 episodes, sampled actions"}
    assert read_texts(tmp_path / "T-fake" / "eval") == {"protocol": [(400, words[actions])]}
    assert read_texts(tmp_path / "T-fake" / "train") == {}
    # The result names how its score was measured.
    assert result.protocol == EvalProtocol(actions, 3) and str(result.protocol) == words[actions]


def test_eval_actions_takes_mean_or_sampled_only():
    with pytest.raises(
        ValueError, match=r"^eval_actions='greedy': choose one of \('mean', 'sampled'\)$"
    ):
        dataclasses.replace(fake_config(), eval_actions="greedy")


# --- Your env: a factory from Python, start-up failures ---------------------------------------


def test_train_takes_an_env_factory_and_records_it_by_name(tmp_path, user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    import myenvs

    config = fake_config(backend="process", backend_options={"num_workers": 1})
    result = run(tmp_path, config, env=myenvs.make_reach)
    assert result.config.env == "myenvs:make_reach"
    assert configs.load_config(tmp_path / "T-fake" / "config.yaml").env == "myenvs:make_reach"
    with pytest.raises(ConfigError, match=r"^env factory .*<lambda>: cannot be recorded"):
        run(tmp_path, config, timestamp="U", env=lambda: myenvs.make_reach())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["T-fake"]


def test_train_with_only_an_env_starts_from_a_recipe(tmp_path, user_envs, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(user_envs))
    result = training.train(
        env="myenvs:make_choose", logdir=tmp_path, timestamp="T", progress="none",
        overrides=["steps=200"], trainer_factory=FakeTrainer,
    )  # fmt: skip
    assert result.run_dir == tmp_path / "T-make_choose"
    assert result.config.network == "feed_forward_categorical"
    assert "starts from the cartpole_jax recipe" in capsys.readouterr().err


def test_a_start_that_fails_after_the_run_dir_was_made_removes_it(tmp_path):
    def failing_factory(config):
        raise ConfigError("no trainer today")

    with pytest.raises(ConfigError, match="no trainer today"):
        run(tmp_path, factory=failing_factory)
    assert list(tmp_path.iterdir()) == []
    run(tmp_path)  # a run that exists is resumed (with steps left): a failed resume keeps it
    with pytest.raises(ConfigError, match="no trainer today"):
        run(tmp_path, factory=failing_factory, config="cartpole_jax", overrides=["steps=1200"])
    assert [p.name for p in tmp_path.iterdir()] == ["T-fake"]


# --- Faults of the disk (issue 24): a damaged newest checkpoint, a full disk -----------------


def test_resume_skips_a_torn_newest_checkpoint_and_says_so(tmp_path, capsys):
    config = fake_config(keep_checkpoints=3)
    run(tmp_path, config)
    ckpt_dir = tmp_path / "T-fake" / training.CHECKPOINT_DIR
    assert [s for s, _ in ckpt.list_checkpoints(ckpt_dir)] == [600, 900, 1000]
    newest = ckpt.checkpoint_path(ckpt_dir, 1000)
    newest.write_bytes(newest.read_bytes()[:-50])  # torn
    capsys.readouterr()
    result = run(tmp_path, config)
    err = capsys.readouterr().err
    assert err.startswith(
        f"batchppo: skipped the checkpoint at step 1,000: corrupt or incompatible checkpoint "
        f"{newest}: "
    )
    assert err.splitlines()[0].endswith(f"; moved it to {ckpt_dir / 'corrupt'}")
    assert result.step == 1000 and int(result.train_state.updates) == 10  # 900 -> 1000 again
    assert steps_of(read_metrics(tmp_path / "T-fake"), "train") == TRAIN_STEPS
    assert [s for s, _ in ckpt.list_checkpoints(ckpt_dir / "corrupt")] == [1000]


def _full_disk_at(monkeypatch, step):
    real = ckpt.atomic_write_bytes

    def write(path, data):
        if path.name == ckpt.checkpoint_path(".", step).name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, data)

    monkeypatch.setattr(ckpt, "atomic_write_bytes", write)


FULL_DISK = (
    "writing {what} into {run_dir} failed ([Errno 28] No space left on device); the run "
    "stopped and its checkpoint at step 300 is intact: free some space, then resume it (the "
    "same train command with --resume)"
)


def test_a_full_disk_during_a_checkpoint_stops_the_run_and_keeps_the_previous_one(
    tmp_path, monkeypatch
):
    _full_disk_at(monkeypatch, 600)
    with pytest.raises(StorageError) as info:
        run(tmp_path)
    run_dir = tmp_path / "T-fake"
    assert str(info.value) == FULL_DISK.format(what="the checkpoint at step 600", run_dir=run_dir)
    ckpt_dir = run_dir / training.CHECKPOINT_DIR
    assert sorted(p.name for p in ckpt_dir.iterdir()) == [ckpt.checkpoint_path(".", 300).name]
    monkeypatch.undo()
    result = run(tmp_path)  # once there is space again, the run resumes from 300
    assert result.step == 1000 and steps_of(result.records, "train") == [500, 800, 1000]


def test_a_full_disk_during_a_report_stops_the_run(tmp_path, monkeypatch):
    real = RunLogger.log

    def log(self, phase, step, values):
        if step == 500:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, phase, step, values)

    monkeypatch.setattr(RunLogger, "log", log)
    with pytest.raises(StorageError) as info:
        run(tmp_path)
    run_dir = tmp_path / "T-fake"
    assert str(info.value) == FULL_DISK.format(what="the train report at step 500", run_dir=run_dir)
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / training.CHECKPOINT_DIR)] == [300]


def test_loading_a_damaged_newest_checkpoint_names_an_older_one(tmp_path):
    run(tmp_path, fake_config(keep_checkpoints=3))
    run_dir = tmp_path / "T-fake"
    newest = ckpt.checkpoint_path(run_dir / training.CHECKPOINT_DIR, 1000)
    newest.write_bytes(b"")
    with pytest.raises(CorruptCheckpointError) as info:
        training.load_run(run_dir, trainer_factory=FakeTrainer)
    assert str(info.value).endswith("; an older one may be intact: --checkpoint 900")
    assert str(info.value).startswith(f"corrupt or incompatible checkpoint {newest}: ")
    _, _, _, step = training.load_run(run_dir, checkpoint=900, trainer_factory=FakeTrainer)
    assert step == 900


def test_a_report_counts_the_games_and_averages_their_scores_over_games():
    base = {"env_steps": 100, "episodes": 0, "score": float("nan"), "length": float("nan")}
    window = MetricWindow()
    window.add({**base, "games": 0.0, "game_score": float("nan")}, 1.0)
    window.add({**base, "games": 3.0, "game_score": 2.0}, 1.0)
    window.add({**base, "games": 1.0, "game_score": 10.0}, 1.0)
    summary = window.summary()
    assert (summary["games"], summary["game_score"]) == (4, 4.0)  # (3 * 2 + 10) / 4
    assert "games" not in MetricWindow().summary()
    empty = MetricWindow()
    empty.add({**base, "games": 0.0, "game_score": float("nan")}, 1.0)
    assert empty.summary()["games"] == 0 and np.isnan(empty.summary()["game_score"])

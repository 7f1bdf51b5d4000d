"""A user's callbacks on a run (``train(..., callbacks=[...])``): the hooks in order, a stop asked
for by a callback, Brax's ``progress_fn(step, metrics)``, an exception in a callback."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from experiment_fakes import FakeSeedsTrainer, FakeTrainer, fake_config
from tiny_runs import tiny_run

import batchppo.algorithms.ppo.ppo  # noqa: F401  (the trainer the loop imports late)
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR, ENV_ERROR_FILE
from batchppo.experiment.run import seed_runs, training
from batchppo.experiment.run.callbacks import Callback, RunInfo, as_callbacks
from batchppo.experiment.run.driver import drive
from batchppo.experiment.run.run_set import StackedSeeds

pytestmark = pytest.mark.usefixtures("cold_training_programs")  # its runs are a few iterations

# No periodic checkpoint, so a checkpoint before the end is the stop's.
TINY = tiny_run(eval_episodes=2, eval_every=512, checkpoint_every=0, steps=1024)


class Recorder(Callback):
    """Records each hook's call: ``(hook, run index, step)``, and the reports it got.

    Args:
        stop_at: ``on_report`` returns False at this step.
        raise_in: Raises ``ValueError`` in this hook (at ``step``, for a report's hook).
        step: See ``raise_in``.
    """

    def __init__(
        self, stop_at: int | None = None, raise_in: str | None = None, step: int | None = None
    ) -> None:
        self.stop_at, self.raise_in, self.step = stop_at, raise_in, step
        self.calls: list[tuple[str, int, int]] = []
        self.runs: list[RunInfo] = []
        self.reports: list[dict[str, Any]] = []
        self.results: list[training.TrainResult] = []

    def _record(self, hook: str, run: RunInfo, step: int) -> None:
        self.calls.append((hook, run.index, step))
        if run not in self.runs:
            self.runs.append(run)
        if hook == self.raise_in and (self.step is None or step == self.step):
            raise ValueError(f"{hook} failed")

    def on_train_start(self, run: RunInfo, step: int) -> None:
        self._record("start", run, step)

    def on_report(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool:
        self.reports.append(metrics)
        self._record("report", run, step)
        return step != self.stop_at

    def on_eval(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> None:
        self.reports.append(metrics)
        self._record("eval", run, step)

    def on_train_end(self, run: RunInfo, result: training.TrainResult) -> None:
        self.results.append(result)
        self._record("end", run, result.step)


def train_tiny(logdir: Path, *callbacks: Any) -> training.TrainResult:
    result = training.train(
        "cartpole_jax", logdir, timestamp="T", overrides=TINY, progress="none",
        callbacks=list(callbacks),
    )  # fmt: skip
    assert isinstance(result, training.TrainResult)
    return result


def checkpoint_steps(run_dir: Path) -> list[int]:
    return [step for step, _ in ckpt.list_checkpoints(run_dir / CHECKPOINT_DIR)]


@pytest.mark.timeout(180)
def test_hooks_and_progress_fn_see_every_report_of_a_fused_run(tmp_path: Path) -> None:
    recorder, seen = Recorder(), []
    result = train_tiny(tmp_path, recorder, lambda step, metrics: seen.append((step, metrics)))
    run_dir = tmp_path / "T-cartpole_jax"
    assert recorder.calls == [
        ("start", 0, 0),
        ("report", 0, 256), ("report", 0, 512), ("eval", 0, 512),
        ("report", 0, 768), ("report", 0, 1024), ("eval", 0, 1024),
        ("end", 0, 1024),
    ]  # fmt: skip
    assert recorder.runs == [RunInfo(0, run_dir, result.config)]
    assert recorder.runs[0].seed == result.config.seed
    records = read_metrics(run_dir)
    assert recorder.reports == records == result.records
    assert seen == [(record["step"], record) for record in records]
    assert recorder.results == [result]
    assert not result.interrupted and result.stopped_by is None
    assert checkpoint_steps(run_dir) == [1024]


@pytest.mark.timeout(180)
def test_a_callback_stops_a_run_as_ctrl_c_does(tmp_path: Path) -> None:
    recorder = Recorder(stop_at=512)
    result = train_tiny(tmp_path, recorder)
    run_dir = tmp_path / "T-cartpole_jax"
    # The iteration's bookkeeping ends (its evaluation), then the run saves and stops.
    assert recorder.calls == [
        ("start", 0, 0), ("report", 0, 256), ("report", 0, 512), ("eval", 0, 512), ("end", 0, 512),
    ]  # fmt: skip
    assert result.step == 512 and result.interrupted and result.stop_signal is None
    assert result.stopped_by == "Recorder" and recorder.results == [result]
    assert checkpoint_steps(run_dir) == [512]
    assert [(r["phase"], r["step"]) for r in read_metrics(run_dir)][-1] == ("eval", 512)


@pytest.mark.timeout(180)
def test_an_exception_in_a_callback_leaves_the_checkpoint(tmp_path: Path) -> None:
    recorder = Recorder(raise_in="report", step=768)
    with pytest.raises(ValueError, match="report failed") as raised:
        train_tiny(tmp_path, recorder)
    run_dir = tmp_path / "T-cartpole_jax"
    notes = raised.value.__notes__
    assert f"callback Recorder raised this in on_report at step 768 of run {run_dir}" in notes[0]
    assert notes[1] == (
        "batchppo: training stopped at step 768 by this error; "
        f"checkpoint at step 768 in {run_dir / CHECKPOINT_DIR}"
    )
    assert checkpoint_steps(run_dir) == [768]
    assert [r["step"] for r in read_metrics(run_dir)][-1] == 768
    assert not (run_dir / ENV_ERROR_FILE).exists() and recorder.results == []


# --- The fake trainer: seeds, the hooks outside the iterations, a run without callbacks ---------


def fake_seeds_run(tmp_path: Path, *callbacks: Any) -> list[training.TrainResult]:
    run_configs, run_dirs = seed_runs.prepare_seed_dirs(
        tmp_path, "fake", fake_config(), 2, "T", None
    )
    trainer = FakeSeedsTrainer(run_configs[0], 2)
    return drive(
        StackedSeeds(2), trainer, run_configs, run_dirs, "none", callbacks=as_callbacks(callbacks)
    )


def test_with_seeds_a_callback_sees_every_seed_and_a_function_seed_0(tmp_path: Path) -> None:
    recorder, seen = Recorder(stop_at=500), []
    results = fake_seeds_run(tmp_path, recorder, lambda step, metrics: seen.append(step))
    assert recorder.calls == [
        ("start", 0, 0), ("start", 1, 0),
        ("report", 0, 300), ("report", 1, 300),
        ("eval", 0, 400), ("eval", 1, 400),
        ("report", 0, 500), ("report", 1, 500),
        ("end", 0, 500), ("end", 1, 500),
    ]  # fmt: skip
    assert [run.seed for run in recorder.runs] == [results[0].config.seed, results[1].config.seed]
    assert seen == [300, 400, 500]
    for i, result in enumerate(results):
        assert result.interrupted and result.stopped_by == "Recorder" and result.step == 500
        assert checkpoint_steps(tmp_path / f"T-fake-s{i}") == [300, 500]


@pytest.mark.parametrize("hook, step, saved", [("start", 0, [0]), ("end", 1000, [900, 1000])])
def test_an_exception_at_the_start_or_the_end_names_the_callback(
    tmp_path: Path, hook: str, step: int, saved: list[int]
) -> None:
    with pytest.raises(ValueError, match=f"{hook} failed") as raised:
        training.train(
            fake_config(), tmp_path, timestamp="T", trainer_factory=FakeTrainer, progress="none",
            callbacks=Recorder(raise_in=hook),
        )  # fmt: skip
    name = {"start": "on_train_start", "end": "on_train_end"}[hook]
    assert f"callback Recorder raised this in {name} at step {step:,}" in raised.value.__notes__[0]
    assert checkpoint_steps(tmp_path / "T-custom") == saved


def test_callbacks_leave_the_reports_unchanged(tmp_path: Path) -> None:
    def plain(result: training.TrainResult) -> list[dict[str, Any]]:
        drop = ("wall_time", "sps")  # the clock's
        return [{k: v for k, v in r.items() if k not in drop} for r in result.records]

    alone = training.train(fake_config(), trainer_factory=FakeTrainer, progress="none")
    watched = training.train(
        fake_config(), trainer_factory=FakeTrainer, progress="none",
        callbacks=[Recorder(), lambda step, metrics: metrics.clear()],
    )  # fmt: skip
    assert plain(watched) == plain(alone)
    assert dataclasses.replace(watched, records=[], train_state=None) == dataclasses.replace(
        alone, records=[], train_state=None
    )


def test_callbacks_must_be_callbacks_or_functions() -> None:
    with pytest.raises(TypeError, match="callbacks= takes Callback instances or functions"):
        training.train(fake_config(), trainer_factory=FakeTrainer, callbacks=[3])

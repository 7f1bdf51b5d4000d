"""A run's progress output: the ETA from the steady rate (the compiling first iteration left
out), the one bar, and the start-up line counted from batchppo's import."""

from __future__ import annotations

import subprocess
import sys

import pytest
from experiment_fakes import FakeTrainer, fake_config

from batchppo._clock import IMPORTED_AT
from batchppo.experiment.run import progress as progress_module
from batchppo.experiment.run import training
from batchppo.experiment.run.driver import start_up_line
from batchppo.experiment.run.progress import Progress, steady_eta


class Clock:
    """A fake ``time.monotonic`` / ``time.time``: the seconds set by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    monkeypatch.setattr("tqdm.std.time", clock)
    return clock


def test_steady_eta_leaves_the_first_iteration_out():
    assert steady_eta(None, 30.0, 100, 1000) is None  # the first iteration has not ended
    assert steady_eta((30.0, 100), 30.0, 100, 1000) is None  # no iteration since
    # 30 s of compilation for the first 100 steps, then 100 steps/s: 700 steps left.
    assert steady_eta((30.0, 100), 32.0, 300, 1000) == 7.0
    assert steady_eta((30.0, 100), 32.0, 1200, 1000) == 0.0  # overshot the budget


def test_lines_show_no_eta_until_the_rate_is_steady(clock, capsys):
    progress = Progress("lines", 1000, 0)
    clock.now += 30.0  # the first iteration: compilation
    progress.advance(100)
    progress.report({"phase": "train", "step": 100, "score": 1.0, "sps": 50.0})
    clock.now += 1.0
    progress.advance(200)
    clock.now += 1.0
    progress.advance(300)
    progress.report({"phase": "train", "step": 300, "score": 2.0, "sps": 100.0})
    progress.close()
    assert capsys.readouterr().out.splitlines() == [
        "train step         100/1,000 ( 10%) | score       1.0 | 50 steps/s | ETA n/a",
        "train step         300/1,000 ( 30%) | score       2.0 | 100 steps/s | ETA 0:00:07",
    ]


def visible_lines(out: str) -> list[str]:
    """What a terminal shows of tqdm's output: each line's text after its last carriage return."""
    return [line.rsplit("\r", 1)[-1].rstrip() for line in out.split("\n")]


def test_the_bar_counts_its_rate_from_the_end_of_the_first_iteration(clock, capsys):
    progress = Progress("bar", 1000, 0)
    clock.now += 30.0
    progress.advance(100)
    progress.message("start-up: a line above the bar")
    for step in range(200, 1100, 100):
        clock.now += 1.0
        progress.advance(step)
        if step == 400:
            progress.report({"phase": "eval", "step": 400, "score": 7.0})
    progress.report({"phase": "train", "step": 1000, "score": 9.0})
    progress.close()
    start_up, bar, end = visible_lines(capsys.readouterr().out)
    assert start_up == "start-up: a line above the bar" and end == ""
    # 900 steps in 9 s after the compiling iteration; the eval in the bar, not a line.
    assert bar.startswith("100%|") and bar.endswith(
        "| 1.00k/1.00k [00:09<00:00, 100step/s, score 9.0, eval 7.0 (mean action)]"
    )


def test_a_library_call_shows_one_bar(tmp_path, capsys):
    training.train(fake_config(), trainer_factory=FakeTrainer)
    start_up, bar, end = visible_lines(capsys.readouterr().out)
    assert start_up.startswith("start-up: set-up ") and end == ""
    assert "1.00k/1.00k" in bar
    assert bar.endswith(", score 950.0, eval 1000.0 (3 episodes, mean action)]")


def test_set_up_counts_from_the_import_of_batchppo():
    assert start_up_line(IMPORTED_AT + 12.34, 5.0) == (
        "start-up: set-up 12.3 s (import of batchppo to the first iteration), first "
        "iteration 5.0 s (compilation and one iteration); steps/s exclude both"
    )
    # The clock starts when batchppo is first imported, not when the process started.
    code = (
        "import time; before = time.monotonic(); import batchppo; after = time.monotonic(); "
        "from batchppo._clock import IMPORTED_AT; print(before <= IMPORTED_AT <= after)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "True\n"

"""bench/failure_modes.py reads the committed run logs as they are."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "runs"


@pytest.fixture(scope="module")
def failure_modes():
    return load_bench("failure_modes")


def test_signal_table_reads_the_rows_of_metrics_jsonl(failure_modes):
    dirs = [RUNS / "s0-hopper_fast-recompute", RUNS / "s2-hopper_fast-recompute"]
    table = failure_modes.signal_table(
        dirs, signals=("entropy", "value_loss", "score", "std"), steps=(10_000, 500_000)
    )
    # The train rows at steps 10240 and 501760 of the two runs' metrics.jsonl.
    assert table["entropy"][0, 0] == 2.6591795921325683
    assert table["entropy"][1, 1] == -0.9270528554916382
    assert table["value_loss"][1, 1] == 0.0007102105300873518
    assert table["score"][1, 1] == 1183.315384476273
    # Hopper's 3 action dims: H = 3 (log std + log(2 pi e) / 2).
    expected = math.exp(-0.9270528554916382 / 3 - 0.5 * math.log(2 * math.pi * math.e))
    assert table["std"][1, 1] == pytest.approx(expected, rel=1e-12)


def test_kl_cap_cuts_seen_in_the_logged_learning_rate(failure_modes):
    # HalfCheetah seed 1 is the one run of the two groups whose KL passed the cap: its row
    # at step 581632 (iterations 279-283 of 489) trains at the schedule's rate / 1.5.
    run = failure_modes.load_run(RUNS / "s1-cheetah_fast-recompute")
    rows, low, first, max_kl = failure_modes.kl_cap_cuts(run)
    assert first == 581632
    i = int(np.flatnonzero(run["train"]["step"] == 581632)[0])
    assert run["train"]["learning_rate"][i] == pytest.approx(3e-4 * (1 - 281 / 489) / 1.5, 1e-6)
    assert low == pytest.approx(1 / 1.5, abs=1e-3)
    assert rows == 19 and max_kl > 0.03
    # Hopper seed 2 never passed it: every row at the schedule's rate.
    assert (
        failure_modes.kl_cap_cuts(failure_modes.load_run(RUNS / "s2-hopper_fast-recompute"))[0] == 0
    )


def test_spearman_and_stable_step(failure_modes):
    assert failure_modes.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert failure_modes.spearman([1, 2, float("nan"), 4], [4, 3, 0, 1]) == pytest.approx(-1.0)
    # Hopper seed 7 first hopped whole episodes in its eval at step 200704; seed 2 never did.
    assert (
        failure_modes.stable_step(failure_modes.load_run(RUNS / "s7-hopper_fast-recompute"))
        == 200704
    )
    assert (
        failure_modes.stable_step(failure_modes.load_run(RUNS / "s2-hopper_fast-recompute")) is None
    )

"""bench/sb3_vec.py runs with a tiny budget and prints its table (no timing is asserted)."""

from __future__ import annotations

import pytest
from benchlib import load_bench

pytestmark = pytest.mark.timeout(120)


def test_prints_both_rates_of_every_peer_and_the_ratios(capsys):
    module = load_bench("sb3_vec")
    tiny = ["--envs", "Pendulum-v1", "--sizes", "2", "--seconds", "0.02", "--rounds", "1"]
    module.main([*tiny, "--peers", "dummy,batch", "--ppo-steps", "64", "--n-steps", "32"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cores=") and "ppo_steps=64 n_steps=32" in lines[0]
    assert lines[1].split() == ["env", "N", "rate", "dummy", "batch", "batch/dummy"]
    for line, kind in zip(lines[2:5], ("env", "cpu", "ppo"), strict=True):
        row = line.split()
        assert row[:3] == ["Pendulum-v1", "2", kind]
        unit = "us" if kind == "cpu" else "k"
        assert row[3].endswith(unit) and row[4].endswith(unit) and row[5].endswith("x")
        dummy, batch = float(row[3][: -len(unit)]), float(row[4][: -len(unit)])
        assert dummy > 0 and batch > 0
        num, den = (dummy, batch) if kind == "cpu" else (batch, dummy)
        # Every cell is printed to two decimals: the ratio of the figures behind them lies
        # within what those roundings allow, and is itself rounded to two decimals.
        low, high = (num - 0.005) / (den + 0.005), (num + 0.005) / max(den - 0.005, 1e-9)
        assert low - 0.005 <= float(row[5][:-1]) <= high + 0.005, row

"""bench/lockstep.py: one env's step times and what a batch waiting for its slowest env keeps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchlib import load_bench


def test_the_summary_of_known_step_times():
    lockstep = load_bench("lockstep")
    # Three plain steps of 1 ms, one restart of 3 ms: one env averages 1.5 ms.
    times = np.array([1e-3, 1e-3, 1e-3, 3e-3] * 50)
    measured = {"times": times, "restarted": times > 2e-3}
    out = lockstep.summary(measured, [1, 4], draws=200_000)
    assert (out["steps"], out["restarts"]) == (200, 50)
    assert out["one_ms"] == pytest.approx(1.5)
    assert (out["restart_ms"], out["plain_ms"]) == (pytest.approx(3.0), pytest.approx(1.0))
    four = out["sizes"]["4"]
    # The slowest of 4 is 3 ms unless all four draws are plain: 3 - 2 * (3/4)^4.
    assert four["lockstep_ms"] == pytest.approx(3 - 2 * 0.75**4, rel=0.01)
    assert four["efficiency"] == pytest.approx(1.5 / (3 - 2 * 0.75**4), rel=0.01)
    assert four["lockstep_sps"] == pytest.approx(4e3 / four["lockstep_ms"])
    assert four["no_restarts_ms"] == pytest.approx(1.0)  # plain steps only: all 1 ms
    assert out["sizes"]["1"]["lockstep_ms"] == pytest.approx(1.5, rel=0.01)


def test_a_real_env_counts_its_restarts(tmp_path, capsys):
    lockstep = load_bench("lockstep")
    out_file = tmp_path / "lockstep.json"
    argv = ["--env", "CartPole-v1", "--preprocess", "none", "--steps", "300", "--sizes", "1,4"]
    out = lockstep.main([*argv, "--json", str(out_file)])
    assert json.loads(out_file.read_text()) == out
    # Random actions end CartPole's episodes within a few dozen steps (never at 300).
    assert out["steps"] == 300 and 300 // 60 < out["restarts"] < 300 // 5
    assert out["sizes"]["4"]["lockstep_ms"] >= out["sizes"]["1"]["lockstep_ms"]
    assert 0 < out["sizes"]["4"]["efficiency"] <= 1
    assert "4 envs in lockstep" in capsys.readouterr().out

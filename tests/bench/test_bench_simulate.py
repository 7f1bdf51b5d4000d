"""bench/simulate.py at a tiny size: every host path of a backend is timed and written (no
timing is asserted)."""

from __future__ import annotations

import json

import pytest
from benchlib import load_bench

pytestmark = pytest.mark.timeout(300)


def test_every_host_path_is_timed_and_written(tmp_path, capsys):
    out = tmp_path / "simulate.json"
    argv = ["--skip-gymnax", "--backends", "sync", "--host-envs", "2", "--host-steps", "4"]
    load_bench("simulate").main([*argv, "--seconds", "0.02", "--rounds", "1", "--json", str(out)])
    figures = json.loads(out.read_text())
    paths = ["in-graph HostEnv", "HostLoop (trainer's host_loop)", "plain loop", "envs alone"]
    rows = [f"(b) sync BatchEnv, 2 envs: {path}" for path in paths]
    assert set(figures) == {*rows, "date", "command", "commit", "machine"}
    assert all(figures[key] > 0 for key in rows)
    text = capsys.readouterr().out
    assert "sync: in-graph / plain loop = " in text and "in-graph / HostLoop = " in text

"""bench/envs.py runs in each of its modes with a tiny step count (no timing is asserted)."""

from __future__ import annotations

import json

import pytest
from benchlib import load_bench

pytestmark = pytest.mark.timeout(120)


def _bench_envs():
    return load_bench("envs")


PEERS = ["parallel", "sync", "batch", "batch_arr", "make", "make_arr"]
TINY = ["--seconds", "0.02", "--rounds", "1", "--sizes", "2", "--envs", "Pendulum-v1"]


@pytest.mark.parametrize("cpu", [False, True])
def test_cpu_mode_prints_the_table_the_default_mode_prints(capsys, tmp_path, cpu):
    """--cpu reports every peer (BatchEnv, make(), ...) in the default mode's columns, and
    --json writes the same figures, times named by their unit."""
    out = tmp_path / "envs.json"
    _bench_envs().main(
        [*TINY, "--peers", ",".join(PEERS), *(["--cpu"] if cpu else []), "--json", str(out)]
    )
    lines = capsys.readouterr().out.splitlines()
    figures = json.loads(out.read_text())["Pendulum-v1"]["2"]
    assert sorted(figures) == sorted(f"{p}{'_us' if cpu else ''}" for p in ["single", *PEERS])
    unit = "CPU us per env step" if cpu else "steps/s"
    assert unit in lines[0]
    header = lines[1].split()
    assert header[:4] == ["env", "N", "single", "limit"]
    assert header[4 : 4 + len(PEERS)] == PEERS
    assert "make/batch" in header and "batch/limit" in header
    row = lines[2].split()
    assert row[:2] == ["Pendulum-v1", "2"]
    suffix = "us" if cpu else "k"
    cells = row[2 : 4 + len(PEERS)]  # single, limit and every peer: each measured
    assert all(cell.endswith(suffix) and float(cell[: -len(suffix)]) >= 0 for cell in cells), row


def test_atari_peers_step_the_same_preprocessing(capsys):
    """For an ALE id every peer steps the preprocessed env: BatchEnv, make(preprocess=...)
    and ale-py's own vector env are measured (EnvPool too when the bench extra is in)."""
    peers = ["batch_arr", "ale_vector", "make_arr"]
    _bench_envs().main(
        [
            "--seconds",
            "0.02",
            "--rounds",
            "1",
            "--sizes",
            "2",
            "--envs",
            "ALE/Breakout-v5",
            "--peers",
            ",".join(peers),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert "make/alevec" in lines[1].split()
    row = lines[2].split()
    assert row[:2] == ["ALE/Breakout-v5", "2"]
    cells = row[2 : 4 + len(peers)]
    assert all(cell.endswith("k") and float(cell[:-1]) > 0 for cell in cells), row


def test_stack_cpu_prints_what_the_wrapper_stack_costs(capsys):
    """--stack-cpu times raw envs, the per-env stack and make()'s, all in this process."""
    _bench_envs().main(["--stack-cpu", "--seconds", "0.01", *TINY[2:]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["env", "N", "raw", "per_env", "make", "per_env/raw", "make/raw"]
    row = lines[1].split()
    assert row[:2] == ["Pendulum-v1", "2"]
    raw, per_env, make = (float(cell.removesuffix("us")) for cell in row[2:5])
    assert raw > 0 and per_env > 0 and make > 0
    assert float(row[5][:-1]) == pytest.approx(per_env / raw, rel=0.02, abs=0.011)

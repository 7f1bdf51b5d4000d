"""bench/cpu_ab.py: its summary of the rounds, its command line, and one host run measured in a
child process on this checkout."""

from __future__ import annotations

import pytest
from benchlib import ROOT, load_bench


def bench_cpu_ab():
    return load_bench("cpu_ab")


def test_summary_gives_round_by_round_ratios_their_median_and_range():
    cpu_ab = bench_cpu_ab()
    rows = [
        {"cpu_per_1k": 2.0, "side": "before", "round": 0},
        {"cpu_per_1k": 3.0, "side": "after", "round": 0},
        {"cpu_per_1k": 4.0, "side": "after", "round": 1},
        {"cpu_per_1k": 5.0, "side": "before", "round": 1},
        {"cpu_per_1k": 4.0, "side": "before", "round": 2},
        {"cpu_per_1k": 4.0, "side": "after", "round": 2},
    ]
    found = cpu_ab.summary(cpu_ab.Result(["before", "after"], rows))
    assert found == {
        "before": [2.0, 5.0, 4.0],
        "after": [3.0, 4.0, 4.0],
        "ratios": [1.5, 0.8, 1.0],
        "median_ratio": 1.0,
        "spread": [0.8, 1.5],
    }


def test_command_line_needs_both_checkouts_and_known_workloads(capsys):
    cpu_ab = bench_cpu_ab()
    with pytest.raises(SystemExit):
        cpu_ab.parse(["/tmp/before"])
    assert "give the two checkouts: BEFORE AFTER" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cpu_ab.parse(["a", "b", "--workloads", "host,gpu"])
    assert "--workloads: unknown ['gpu']; use host, fused, train" in capsys.readouterr().err


def test_host_run_steps_this_checkouts_batch_env_and_counts_env_steps():
    cpu_ab = bench_cpu_ab()
    args = cpu_ab.parse(["a", "b", "--host-envs", "4", "--host-steps", "300"])
    figures = cpu_ab.measure("host", ROOT, args)
    assert figures["file"] == str(ROOT / "batchppo" / "__init__.py")
    assert figures["env_steps"] == 1200
    assert figures["cpu_s"] > 0
    assert figures["cpu_per_1k"] == figures["cpu_s"] / 1200 * 1000

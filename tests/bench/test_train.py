"""bench/train.py's driver: which workers run in which order, and what it keeps of their
figures (workers whose results are given: no training, no timed assertion)."""

from __future__ import annotations

import json
import math
import sys

from benchlib import load_bench

SB3_SECONDS = {0: 40.0, 1: 60.0, 2: 50.0}
"""SB3's seconds to the threshold by seed; batchppo's gymnax side misses it on seed 1."""
THROUGHPUT = {("purejaxrl", 0): 100.0, ("batchppo", 0): 180.0,
              ("purejaxrl", 1): 120.0, ("batchppo", 1): 150.0}  # fmt: skip


def test_pendulum_seeds_interleave_and_throughput_keeps_each_sides_best_round(
    tmp_path, monkeypatch, capsys
):
    train = load_bench("train")
    calls, throughput_rounds = [], {"purejaxrl": 0, "batchppo": 0}

    def spawn(spec, timeout):
        calls.append(tuple(spec[:2]))
        if spec[0] == "sb3":
            seed = int(spec[1])
            return {"hit": True, "seconds": SB3_SECONDS[seed], "steps": 4096}
        if spec[0] == "batchppo":
            seed = int(spec[2])
            return {"hit": seed != 1, "seconds": 10.0 + seed, "steps": 8192}
        kind = spec[1]
        row = {"sps": THROUGHPUT[kind, throughput_rounds[kind]], "compile_s": 3.0}
        throughput_rounds[kind] += 1
        return row

    monkeypatch.setattr(train, "_spawn", spawn)
    out = tmp_path / "train.json"
    argv = ["train.py", "--only", "pendulum,throughput", "--seeds", "3", "--rounds", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--pendulum-runs", "sb3,batchppo_gymnax",
                                      "--json", str(out)])  # fmt: skip
    train.main()
    pendulum = [("sb3", "0"), ("batchppo", "pendulum_jax"), ("batchppo", "pendulum_jax"),
                ("sb3", "1"), ("sb3", "2"), ("batchppo", "pendulum_jax")]  # fmt: skip
    throughput = [("throughput", "purejaxrl"), ("throughput", "batchppo"),
                  ("throughput", "batchppo"), ("throughput", "purejaxrl")]  # fmt: skip
    assert calls == pendulum + throughput
    result = json.loads(out.read_text())
    assert result["pendulum"]["sb3"]["median_s"] == 50.0
    # Seeds 0 and 2 in 10 and 12 s, seed 1 never: the median of (10, inf, 12).
    assert result["pendulum"]["batchppo_gymnax"]["median_s"] == 12.0
    assert [r["round"] for r in result["pendulum"]["sb3"]["runs"]] == [0, 1, 2]
    assert {k: r["sps"] for k, r in result["throughput"].items()} == {
        "purejaxrl": 120.0,
        "batchppo": 180.0,
    }
    assert set(result) == {"pendulum", "throughput", "date", "command", "commit", "machine"}
    text = capsys.readouterr().out
    assert "ratio batchppo_gymnax / sb3 = 0.24" in text
    assert "ratio batchppo / purejaxrl steps/s = 1.500" in text


def test_a_seed_that_never_reaches_the_threshold_counts_as_infinitely_slow():
    train = load_bench("train")
    runs = [{"hit": True, "seconds": 5.0}, {"hit": False}, {"error": "exit 1"}]
    assert math.isinf(train._median_seconds(runs))
    assert train._median_seconds([*runs[:2], {"hit": True, "seconds": 7.0}]) == 7.0

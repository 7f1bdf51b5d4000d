"""bench/shuffle.py: both methods timed at a size and on a preset, ratios reported."""

from __future__ import annotations

import json

from benchlib import load_bench


def test_sizes_and_a_preset_are_timed_with_both_methods(tmp_path, capsys):
    bench = load_bench("shuffle")
    out = tmp_path / "out.json"
    results = bench.main(
        ["--sizes", "100", "--reps", "2", "--presets", "cartpole_jax", "--iterations", "1",
         "--rounds", "1", "--json", str(out)]
    )  # fmt: skip
    size = results["sizes"][100]
    assert size["sort"] > 0 and size["index"] > 0
    assert size["ratio"] == size["sort"] / size["index"]
    preset = results["presets"]["cartpole_jax"]
    assert preset["batch"] == 1024 and preset["steps"] == 1024
    assert preset["ratio"] == preset["index"]["sps"] / preset["sort"]["sps"]
    assert json.loads(out.read_text())["presets"]["cartpole_jax"]["steps"] == 1024
    shown = capsys.readouterr().out
    assert "n=100: sort" in shown and "cartpole_jax (batch 1024): index" in shown

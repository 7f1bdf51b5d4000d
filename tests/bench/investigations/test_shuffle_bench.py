"""bench/investigations/shuffle.py: both methods timed at a size and on a preset, with ratios."""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchlib import load_bench

# The preset's runs at their smallest programs to compile (one gradient step an iteration, no
# diagnostics, 8-unit networks): the tests check what is run, timed and written.
SMALL = [
    "--set", "update_epochs=1", "--set", "num_minibatches=1",
    "--set", "minibatch_diagnostics=false", "--set", "policy_layers=[8]",
    "--set", "value_layers=[8]",
]  # fmt: skip


def test_sizes_and_a_preset_are_timed_with_both_methods(tmp_path, capsys):
    bench = load_bench("investigations/shuffle")
    out = tmp_path / "out.json"
    results = bench.main(
        ["--sizes", "100", "--reps", "2", "--presets", "cartpole_jax", "--iterations", "1",
         "--rounds", "1", *SMALL, "--set", "num_agents=8", "--json", str(out)]
    )  # fmt: skip
    size = results["sizes"][100]
    assert size["sort"] > 0 and size["index"] > 0
    assert size["ratio"] == size["sort"] / size["index"]
    preset = results["presets"]["cartpole_jax"]
    assert preset["batch"] == 8 * 64 and preset["steps"] == 8 * 64  # --set num_agents=8
    assert preset["ratio"] == preset["index"]["sps"] / preset["sort"]["sps"]
    written = json.loads(out.read_text())
    assert written["presets"]["cartpole_jax"]["steps"] == 512
    assert written["sets"] == [*SMALL[1::2], "num_agents=8"]
    # harness.write_json: the results beside where and when they were measured.
    assert {"date", "command", "commit", "machine", "backend", "jax"} <= set(written)
    shown = capsys.readouterr().out
    assert "n=100: sort" in shown and "cartpole_jax (batch 512): index" in shown


def test_learning_trains_every_seed_with_both_methods(capsys):
    bench = load_bench("investigations/shuffle")
    results = bench.main(
        ["--sizes", "none", "--learning", "cartpole_jax", "--seeds", "3-5",
         "--learning-steps", "4096", *SMALL]
    )  # fmt: skip
    row = results["learning"]["cartpole_jax"]
    assert row["seeds"] == [3, 4, 5] and row["steps"] == 4096
    for method in ("index", "sort"):
        finals = row[method]["final"]
        assert len(finals) == 3 and all(f > 0 for f in finals)  # CartPole pays 1 a step
        iqm, low, high = row[method]["iqm"]
        assert low <= iqm <= high and row[method]["mean"][0] == pytest.approx(sum(finals) / 3)
    assert "cartpole_jax sort: IQM" in capsys.readouterr().out


def test_final_returns_weigh_episodes_and_widen_the_tail_until_every_seed_has_one():
    bench = load_bench("investigations/shuffle")
    nan = float("nan")
    score = np.array([[1.0, 2.0, nan, 4.0, 6.0], [1.0, nan, 3.0, nan, nan]])
    episodes = np.array([[1, 1, 0, 1, 3], [1, 0, 2, 0, 0]])
    # The last fifth (one iteration) has no episode of seed 1, nor do the last two (a half
    # of 5 iterations rounds to 2): the whole run counts, weighted by episodes.
    np.testing.assert_allclose(
        bench.final_returns(score, episodes), [(1 + 2 + 4 + 18) / 6, (1 + 6) / 3]
    )
    np.testing.assert_allclose(bench.final_returns(score[:1], episodes[:1]), [6.0])
    with pytest.raises(ValueError, match="no episode"):
        bench.final_returns(score[:, :2] * nan, episodes[:, :2] * 0)

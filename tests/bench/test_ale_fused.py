"""bench/ale_fused.py: the ale backend's fused mode timed part by part (no timed assertions)."""

from __future__ import annotations

import json
import math

import pytest
from benchlib import load_bench


@pytest.mark.extended  # it compiles every variant's programs with the ALE in them
def test_every_part_of_every_variant_is_timed_and_a_trace_is_written(tmp_path):
    bench = load_bench("ale_fused")
    out, trace = tmp_path / "ale_fused.json", tmp_path / "trace"
    # The smallest programs to compile: a one-conv network, one gradient step an update.
    sets = ["cnn=minatar", "cnn_dense=8", "update_epochs=1", "num_minibatches=1"]
    argv = ["--envs", "2", "--steps", "4", "--repeats", "1", "--json", str(out)]
    argv += ["--profile", str(trace), *(arg for kv in sets for arg in ("--set", kv))]
    result = bench.main(argv)
    assert json.loads(out.read_text()) == result
    assert (result["env"], result["envs"], result["steps"]) == ("ALE/Breakout-v5", 2, 4)
    assert result["sets"] == sets
    assert set(result["variants"]) == set(bench.VARIANTS)
    # One ALE step call in each compiled program on the CPU.
    programs = {"env": 1, "rollout": 1, "iteration": 1}
    assert result["step_calls"] == {name: programs for name in bench.VARIANTS}
    rows = [result["raw_step"]]
    for parts in result["variants"].values():
        assert set(parts) == set(bench.PARTS)
        rows += parts.values()
    for row in rows:
        assert set(row) == {"ms", "agent_steps_per_s"}
        assert all(math.isfinite(v) and v > 0 for v in row.values())
        assert row["agent_steps_per_s"] == pytest.approx(2 * 4 * 1e3 / row["ms"])
    assert list(trace.rglob("perfetto_trace.json.gz"))


def test_unknown_variants_are_refused(capsys):
    bench = load_bench("ale_fused")
    with pytest.raises(SystemExit):
        bench.main(["--variants", "nope"])
    assert "--variants 'nope': pick from" in capsys.readouterr().err

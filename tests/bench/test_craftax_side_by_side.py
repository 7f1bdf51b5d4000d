"""bench/craftax_side_by_side.py's driver: the sides alternate over rounds, each row gets its
training return, and the speed ratios are the best rounds' (workers whose results are given:
no Craftax, no timed assertion)."""

from __future__ import annotations

import json

import pytest
from benchlib import load_bench

SPS = {("baseline", 0): 100.0, ("batchppo", 0): 90.0, ("baseline", 1): 80.0,
       ("batchppo", 1): 130.0}  # fmt: skip


def test_rounds_alternate_and_the_best_rounds_are_compared(tmp_path, monkeypatch, capsys):
    bench = load_bench("craftax_side_by_side")
    calls = []

    def spawn(script, args, timeout):
        spec = json.loads(args[1])
        round_ = sum(1 for side, _ in calls if side == spec["side"])
        calls.append((spec["side"], spec["steps"]))
        returns = [None, 1.0, 3.0, None, 5.0 + round_]
        return {"side": spec["side"], "sps": SPS[spec["side"], round_], "returns": returns}

    monkeypatch.setattr(bench, "spawn", spawn)
    out = tmp_path / "craftax.json"
    argv = ["--baselines-dir", str(tmp_path), "--sides", "baseline,batchppo", "--steps", "64"]
    assert bench.main([*argv, "--rounds", "2", "--window", "3", "--json", str(out)]) == 0
    assert calls == [("baseline", 64), ("batchppo", 64), ("batchppo", 64), ("baseline", 64)]
    written = json.loads(out.read_text())
    rows = written["rows"]
    # The batchppo side's config, which bench/results.py's guard holds the preset to, and the
    # code and machine it ran on.
    config = written["config"]
    assert (config["num_agents"], config["steps"], config["minibatch_diagnostics"]) == (
        1024, 64, True)  # fmt: skip
    assert config["env_kwargs"]["name"] == "Craftax-Classic-Symbolic-v1" and "seed" not in config
    assert {"commit", "machine", "date", "command"} <= set(written)
    # The last 3 updates' returns, those with none skipped: (3, 5) then (3, 6).
    assert [(r["side"], r["round"], r["final_return"]) for r in rows] == [
        ("baseline", 0, 4.0), ("batchppo", 0, 4.0), ("batchppo", 1, 4.5), ("baseline", 1, 4.5),
    ]  # fmt: skip
    assert "speed batchppo / baseline: 1.30x" in capsys.readouterr().out


def test_the_baseline_side_needs_its_checkout(capsys):
    with pytest.raises(SystemExit):
        load_bench("craftax_side_by_side").main(["--sides", "baseline,batchppo"])
    assert "--baselines-dir is needed for the baseline side" in capsys.readouterr().err

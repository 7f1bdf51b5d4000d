"""bench/investigations/callback_repro.py: each form of a host step in a compiled loop, alone."""

from __future__ import annotations

import json

from benchlib import load_bench


def test_each_form_compiles_and_runs_on_the_cpu(tmp_path, capsys):
    repro = load_bench("investigations/callback_repro")
    out = tmp_path / "out.json"
    forms = ["ordered", "single", "while", "preset"]  # preset: every bisecting feature at once
    results = repro.main(["--variants", ",".join(forms), "--steps", "3", "--json", str(out)])
    assert [r["variant"] for r in results] == forms
    assert all(r["ok"] and r["compile_s"] > 0 and r["step_ms"] > 0 for r in results), results
    record = json.loads(out.read_text())
    assert (record["steps"], record["results"]) == (3, results)
    assert record["command"].endswith("--steps 3 --json " + str(out))  # with its provenance
    assert "ordered: compiles" in capsys.readouterr().out


def test_a_form_that_fails_reports_its_exit_and_stderr():
    repro = load_bench("investigations/callback_repro")
    result = repro.run_variant("no-such-form", 2, timeout=120)
    assert not result["ok"] and result["exit"] == 1
    assert result["error"].startswith("exit 1: Traceback") and result["error"].endswith(
        "ValueError: unknown variant 'no-such-form'; choose from "
        "ordered, unordered, single, float, while, pure, frames, cond, cnn, update, preset, "
        "preset_unordered"
    ), result


def test_the_bisecting_forms_add_their_features_to_the_ordered_form():
    repro = load_bench("investigations/callback_repro")
    bisecting = {v: f for v, f in repro.FEATURES.items() if v != "preset_unordered"}
    assert all(features <= repro.FEATURES["preset"] for features in bisecting.values())
    assert set().union(*bisecting.values()) == {"frames", "cond", "cnn", "update"}
    assert repro.FEATURES["preset_unordered"] == repro.FEATURES["preset"] | {"unordered"}
    # The preset form returns the rollout's stacked frames, the bootstrap and the updated weights.
    fn, w = repro.program("preset", 3)
    total, outs, new_w = fn(w)
    reward, done, trunc, obs, final, boot = outs
    assert not done.any()  # the fake env ends an episode at its 7th step, not before
    assert obs.shape == final.shape == (3, repro.NUM_ENVS, *repro.FRAME) and obs.dtype == "uint8"
    assert boot.shape == (3, repro.NUM_ENVS) and not trunc.any() and (boot == 0).all()
    assert set(new_w) == {"head", "conv"} and (new_w["conv"] != w["conv"]).any()
    assert float(total) == float(reward.sum())

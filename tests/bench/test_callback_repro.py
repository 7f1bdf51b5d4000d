"""bench/callback_repro.py: the host step inside a compiled loop, each form in its own process."""

from __future__ import annotations

import json

from benchlib import load_bench


def test_each_form_compiles_and_runs_on_the_cpu(tmp_path, capsys):
    repro = load_bench("callback_repro")
    out = tmp_path / "out.json"
    results = repro.main(["--variants", "ordered,single,while", "--steps", "3", "--json", str(out)])
    assert [r["variant"] for r in results] == ["ordered", "single", "while"]
    assert all(r["ok"] and r["compile_s"] > 0 and r["step_ms"] > 0 for r in results), results
    assert json.loads(out.read_text()) == results
    assert "ordered: compiles" in capsys.readouterr().out


def test_a_form_that_fails_reports_its_exit_and_stderr():
    repro = load_bench("callback_repro")
    result = repro.run_variant("no-such-form", 2, timeout=120)
    assert not result["ok"] and result["exit"] == 1
    assert result["error"].startswith("exit 1: Traceback") and result["error"].endswith(
        "ValueError: unknown variant 'no-such-form'; choose from "
        "ordered, unordered, single, float, while, pure"
    ), result

"""bench/tune_demo.py without training: the tuned objective on fresh seeds' curves, and the
page's section rendered from the published files, replaced in place and checked."""

from __future__ import annotations

import json

from benchlib import load_bench

demo = load_bench("tune_demo")


def test_steps_to_reads_the_mean_curve_and_each_seed():
    curves = [{5000: -900.0, 10000: -250.0, 15000: -150.0},
              {5000: -400.0, 10000: -180.0, 15000: -170.0}]  # fmt: skip
    found = demo.steps_to(curves, 15000)
    # Means: -650, -215, -160: the target -200 is first reached at 15000; seed 1 alone at 10000.
    assert found == {"target": -200.0, "budget": 15000, "mean_curve": 15000.0,
                     "seeds": [15000.0, 10000.0]}  # fmt: skip
    assert demo.steps_to([{5000: -900.0}], 5000)["mean_curve"] == 5001.0  # never: budget + 1


def _files(out):
    out.mkdir()
    (out / "study.json").write_text(json.dumps({
        "name": "pendulum_jax", "seeds": 10, "objective": "steps-to:-200", "steps": 100000,
        "space": {}, "made": {"date": "2026-01-02 03:04:05 UTC", "commit": "abc1234",
                              "machine": {"cpus": 2, "cpu": "AMD EPYC"}},
        "trials": [
            {"number": 0, "state": "COMPLETE", "value": 60000.0,
             "params": {"learning_rate": 0.00123456, "clip_epsilon": 0.2}, "note": ""},
            {"number": 1, "state": "COMPLETE", "value": 45000.0,
             "params": {"learning_rate": 0.003, "clip_epsilon": 0.3}, "note": ""},
            {"number": 2, "state": "PRUNED", "value": None, "params": {}, "note": "pruned"},
        ]}))  # fmt: skip
    (out / "study.txt").write_text("trial  state     value\n0      COMPLETE  6e+04\n")
    (out / "history.png").write_bytes(b"png")
    group = {"mean": {"value": -170.0, "low": -180.0, "high": -160.0},
             "iqm": {"value": -165.25, "low": -175.5, "high": -155.0}}  # fmt: skip
    (out / "fresh-seeds-stats.json").write_text(json.dumps({
        "groups": {name: {"runs": 2, "envs": {"Pendulum-v1": group}} for name in demo.GROUPS},
        "improvement": {"x": "best", "y": "shipped", "value": 0.75, "low": 0.5, "high": 1.0},
    }))  # fmt: skip
    runs = [{"group": g, "seed": s, "mean_return": -150.0 - s, "episodes": 100}
            for g in demo.GROUPS for s in (31, 30)]  # fmt: skip
    (out / "fresh-seeds.json").write_text(json.dumps({"runs": runs}))
    (out / "fresh-steps-to.json").write_text(json.dumps({
        "best": {"target": -200.0, "budget": 100000, "mean_curve": 40000.0,
                 "seeds": [35000.0, 100001.0]},
        "shipped": {"target": -200.0, "budget": 100000, "mean_curve": 100001.0,
                    "seeds": [100001.0, 100001.0]},
    }))  # fmt: skip


def test_the_section_is_rendered_from_the_files_appended_once_then_replaced(tmp_path):
    out = tmp_path / "docs" / "tune-demo"
    out.parent.mkdir()
    _files(out)
    page = tmp_path / "docs" / "tune.md"
    page.write_text("# Tune\n\nText.\n")
    block = demo.render(out, page)
    lines = block.splitlines()
    assert lines[0] == demo.BEGIN and lines[-1] == demo.END
    assert "3 trials (2 complete, 1 pruned)" in block
    assert "The best, trial 1, reached the target at step 45,000: `learning_rate=0.003`, " \
        "`clip_epsilon=0.3`. Its config" in block  # fmt: skip
    assert "(below). Published 2026-01-02 from commit `abc1234` on 2 CPU cores (AMD EPYC)." \
        in block  # fmt: skip
    assert "```text\ntrial  state     value\n0      COMPLETE  6e+04\n```" in block
    assert "![Optimization history](tune-demo/history.png)" in block
    assert "importances" not in block  # no importances.png among the files
    assert "Fresh seeds 30-31" in block and "100 mean-action episodes a run" in block
    assert ("| best | -165.2 [-175.5, -155.0] | -170.0 [-180.0, -160.0] | 40,000 | 1 of 2 | "
            "-180, -181 |") in lines  # fmt: skip
    assert ("| shipped | -165.2 [-175.5, -155.0] | -170.0 [-180.0, -160.0] | not reached in "
            "100,000 | 0 of 2 | -180, -181 |") in lines  # fmt: skip
    assert "P(best > shipped) = 0.750 [0.500, 1.000] (probability of improvement)." in lines
    demo.write_page(page, block)
    assert page.read_text() == f"# Tune\n\nText.\n\n{demo.SECTION}\n\n{block}"
    assert demo.check(out, page) == []
    demo.write_page(page, block)  # replaced, not appended again
    assert page.read_text().count(demo.BEGIN) == 1
    (out / "fresh-seeds.json").write_text(json.dumps({"runs": [
        {"group": g, "seed": 30, "mean_return": -140.0, "episodes": 100} for g in demo.GROUPS
    ]}))  # fmt: skip
    (problem,) = demo.check(out, page)
    assert problem.startswith(f"{page}: its {demo.BEGIN} section differs from {out}")


def test_check_names_a_page_without_the_section(tmp_path):
    page = tmp_path / "tune.md"
    page.write_text("# Tune\n")
    assert demo.check(tmp_path, page) == [
        f"{page}: no {demo.BEGIN} section: run `python bench/tune_demo.py`"
    ]

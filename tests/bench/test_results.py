"""bench/results.py: the README's MuJoCo tables are what docs/results gives, figure for figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results():
    return load_bench("results")


def test_readme_tables_match_docs_results(results, capsys):
    assert results.main(["--check", str(ROOT / "README.md")]) == 0, capsys.readouterr().err


def test_a_changed_figure_fails_the_check(results, tmp_path, capsys):
    readme = (ROOT / "README.md").read_text()
    # The tuning seeds' HalfCheetah IQM, as the fresh-seed table prints it, one unit off.
    line = next(line for line in readme.splitlines() if line.startswith("| HalfCheetah | "))
    last = line.rsplit("|", 2)[-2].strip()  # "5043 [4333, 6222]"
    value = int(last.split()[0])
    changed = tmp_path / "README.md"
    changed.write_text(readme.replace(line, line.replace(last, last.replace(
        str(value), str(value + 1), 1))))  # fmt: skip
    assert results.main(["--check", str(changed)]) == 1
    assert "differ from docs/results" in capsys.readouterr().err


def test_the_tables_recompute_the_iqm_of_the_runs(results):
    # The tuning seeds' IQM from the runs' own entries: the mean of seeds 2-7 of 10 by score.
    entries = json.loads((ROOT / "docs/results/hopper_fast-recompute-1M-10seeds.json").read_text())
    scores = np.sort([e["mean_return"] for e in entries])
    assert results.iqm(results.scores(entries)) == pytest.approx(scores[2:8].mean(), rel=1e-12)


def test_seeds_csv_has_a_row_per_seed_in_seed_order(results, tmp_path):
    src = tmp_path / "r.json"
    src.write_text(json.dumps([{"seed": 11, "mean_return": 2.5}, {"seed": 10, "mean_return": 1.0}]))
    out = tmp_path / "r.csv"
    results.seeds_csv(src, out)
    assert out.read_text().splitlines() == ["seed,score", "10,1.0", "11,2.5"]

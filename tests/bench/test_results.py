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


def _write_entries(folder: Path, stem: str, entries: list[dict]) -> None:
    (folder / f"{stem}.json").write_text(json.dumps(entries))


def test_a_file_scored_by_another_protocol_is_refused(results, tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    run = {"seed": 0, "mean_return": 3.0, "episodes": 30, "protocol": "final-mean"}
    _write_entries(tmp_path, "mean", [run])
    with pytest.raises(SystemExit, match="seed 0 was scored final-mean over 30 episodes, "
                       "the table needs final-sampled over 30"):  # fmt: skip
        results._scored("mean", "final-sampled", 30)
    with pytest.raises(SystemExit, match="final-mean over 30 episodes, the table needs "
                       "final-mean over 164"):  # fmt: skip
        results._scored("mean", "final-mean", 164)
    assert results._scored("missing", "final-mean", 30) is None


def test_entries_older_than_the_protocol_field_are_the_mean_action(results, tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    runs = [{"seed": s, "mean_return": r, "episodes": 100} for s, r in ((1, 4.5), (0, 1.0))]
    _write_entries(tmp_path, "old", runs)
    assert results._scored("old", "final-mean", 100) == {0: 1.0, 1: 4.5}
    with pytest.raises(SystemExit, match="scored final-mean"):
        results._scored("old", "final-sampled", 100)


def test_a_cell_of_seeds_lists_each_seed_and_their_mean(results):
    seeds = (0, 1, 2)
    assert results._seeds({2: 4.5, 0: 1.0, 1: 2.0}, seeds) == (2.5, "1.0 / 2.0 / 4.5 (mean 2.5)")
    # A seed without a run shows as such, and the mean is over the seeds named.
    assert results._seeds({0: 1.0, 1: 9.0, 2: 4.0}, seeds, over=(0, 2)) == (
        2.5, "1.0 / 9.0 / 4.0 (mean of seeds 0, 2: 2.5)")  # fmt: skip
    assert results._seeds({0: 1.0, 2: 4.0}, seeds, over=(0, 2)) == (
        2.5, "1.0 / — / 4.0 (mean of seeds 0, 2: 2.5)")  # fmt: skip
    assert results._seeds(None, seeds) == (None, "pending")

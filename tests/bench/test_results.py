"""bench/results.py: the results of the README and of docs/benchmarks.md are what docs/results
gives, figure for figure, and worded by what the data supports."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil
import statistics
import subprocess
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


@pytest.fixture(scope="module")
def results():
    return load_bench("results")


def note_paragraphs(notes: list[str]) -> list[str]:
    """The notes under a generated table (its lines after the rows), one string a paragraph,
    its lines joined by spaces."""
    paragraphs = "\n".join(notes).strip().split("\n\n")
    return [" ".join(p.splitlines()) for p in paragraphs]


def test_the_pages_match_docs_results(results, capsys):
    assert results.main(["--check", str(README), str(BENCHMARKS)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("page", [README, BENCHMARKS])
def test_a_changed_figure_fails_the_check(results, tmp_path, capsys, page):
    text = page.read_text()
    # One unit off: in the README the headline's HalfCheetah IQM on the fresh seeds (its second
    # cell, "5608 [5110, 5966]"); in docs/benchmarks.md the fresh-seed table's tuning IQM (its
    # last cell, "5417 [4938, 6017]").
    line = next(line for line in text.splitlines() if line.startswith("| HalfCheetah | "))
    cell = line.split("|")[2 if page == README else -2].strip()
    value = int(cell.split()[0])
    changed = tmp_path / page.name
    changed.write_text(text.replace(line, line.replace(cell, cell.replace(
        str(value), str(value + 1), 1))))  # fmt: skip
    assert results.main(["--check", str(changed)]) == 1
    assert f"{changed}: its generated results differ from docs/results" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("figure", "changed"),
    [
        ("1.02x (one round) at 4 envs", "1.12x (one round) at 4 envs"),  # GPU, PureJaxRL
        ("1,685, 1,918 and 2,052 agent", "1,685, 1,918 and 2,152 agent"),  # GPU, Atari
        ("at most 6,967 agent", "at most 7,967 agent"),  # the lockstep model
        ("1,879 and 1,974 (0.54x)", "1,879 and 1,974 (0.55x)"),  # GPU, ale beside CleanRL
        ("made 5,146 agent steps/s", "made 5,246 agent steps/s"),  # ALE's raw step
        ("8,036 at 64", "8,136 at 64"),  # the fused iteration by env count
        ("1.09x, 1.26x, 1.27x and 1.33x", "1.19x, 1.26x, 1.27x and 1.33x"),  # CPU
        ("4.09 against 3.97", "4.19 against 3.97"),  # Craftax
        ("wall-clock 0.98x and 0.99x", "wall-clock 0.98x and 0.89x"),  # Atari's time
        ("batch8 38.40x;", "batch8 38.50x;"),  # hyperparameter search, against rl-zoo
    ],
)
def test_a_changed_figure_in_a_paragraph_fails_the_check(
    results, tmp_path, capsys, figure, changed
):
    # The paragraphs are wrapped: a figure's words may stand on two lines.
    text = BENCHMARKS.read_text()
    pattern = r"\s+".join(map(re.escape, figure.split()))
    assert len(re.findall(pattern, text)) == 1
    copy = tmp_path / "benchmarks.md"
    copy.write_text(re.sub(pattern, changed, text))
    assert results.main(["--check", str(copy)]) == 1
    assert "differ from docs/results" in capsys.readouterr().err


def _outside_blocks(section: str) -> str:
    """A section without its generated blocks."""
    return re.sub(r"<!-- table:(\S+) -->\n.*?<!-- /table:\1 -->", "", section, flags=re.S)


def _results_sections() -> list[str]:
    """The README's results snippet with what follows it up to the next heading, and the
    section of docs/benchmarks.md that holds the other blocks."""
    readme = re.search(r"\[start:results\] -->\n(.*?)\n## ", README.read_text(), re.S).group(1)
    page = re.search(r"^## Results by protocol\n(.*?)^## ", BENCHMARKS.read_text(), re.S | re.M)
    return [readme, page.group(1)]


def test_the_results_prose_types_no_figure_by_hand():
    # Outside the generated blocks the results sections name settings and protocols only
    # (seeds 0-9, 10-19, 20-29 and 30-39, an initial std of 0.3, Adam decays of 0.99, issues 40,
    # 56 and 70, 95 % intervals, 100 episodes, 70 % of a target, 1M and 10M steps, v3/v4/v5
    # tasks, Walker2d, uint8, 8 envs, 2 cores, benchmarks journal 6b/6c/10h, a 2021 paper); a
    # measured figure typed there would escape the check.
    for section in _results_sections():
        numbers = set(re.findall(r"\d+(?:[.,]\d+)*", _outside_blocks(section)))
        settings = {"0", "0.3", "0.99", "1", "2", "3", "4", "5", "6", "8", "9", "10", "19", "20",
                    "29", "30", "39", "40", "56", "70", "95", "100", "2021"}  # fmt: skip
        assert numbers <= settings, sorted(numbers - settings)


def test_the_results_blocks_are_all_generated_each_on_one_page(results):
    pages = {page: results.blocks((ROOT / page).read_text()) for page in results.PAGES}
    assert pages == {
        "README.md": ["headline"],
        "docs/benchmarks.md": ["mujoco-fresh", "mujoco-protocols", "minatar", "atari",
                               "craftax", "speed-gpu", "speed-cpu", "ale-bound",
                               "tune-rlzoo"],
    }  # fmt: skip
    assert pages == {page: list(names) for page, names in results.PAGES.items()}
    assert sorted(n for names in pages.values() for n in names) == sorted(results.TABLES)


def test_a_page_without_a_block_or_with_an_unknown_one_is_refused(results):
    with pytest.raises(SystemExit, match="no <!-- table:NAME --> block to fill"):
        results.render("# a page\n")
    with pytest.raises(SystemExit, match="<!-- table:speed-tpu -->: no such block; the blocks: "
                       "headline, mujoco-fresh,"):  # fmt: skip
        results.render("<!-- table:speed-tpu -->\n<!-- /table:speed-tpu -->\n")


def test_the_tables_recompute_the_iqm_of_the_runs(results):
    # The tuning seeds' IQM from the runs' own entries: the mean of seeds 2-7 of 10 by score.
    entries = results.load_entries(ROOT / "docs/results/hopper_fast-recompute-1M-10seeds.json")
    scores = np.sort([e["mean_return"] for e in entries])
    assert results.iqm(results.scores(entries)) == pytest.approx(scores[2:8].mean(), rel=1e-12)


def test_the_presets_as_shipped_are_the_recipes_of_the_readme_figures(results):
    differences = results.shipped_differences()
    assert not differences, "\n".join(differences)


def test_a_preset_changed_since_its_figures_fails_by_name_with_both_values_and_the_fix(
    results, monkeypatch
):
    from batchppo.algorithms.registry import get_algorithm
    from batchppo.experiment.config import configs

    shipped = configs.PRESETS["pong_atari"]
    changed = dataclasses.replace(shipped, minibatch_shuffle="index", value_coef=0.25)
    ppo_presets = get_algorithm("ppo").presets  # PRESETS reads the algorithms' own tables
    monkeypatch.setitem(ppo_presets, "pong_atari", changed)
    assert results.shipped_differences() == [
        "pong_atari: docs/results/pong_atari-2M-3seeds.json: minibatch_shuffle: shipped "
        "'index', its runs 'sort'; value_coef: shipped 0.25, its runs 0.5. Rerun, or pin "
        "minibatch_shuffle='sort', value_coef=0.5 in the preset"
    ]
    # A field that changes neither learning nor measurement is not a difference.
    monkeypatch.setitem(ppo_presets, "pong_atari", dataclasses.replace(shipped, host_loop=True))
    assert results.shipped_differences() == []


def test_every_results_file_the_readme_reads_is_a_checked_source(results, monkeypatch):
    read = []
    load = results.load_entries
    monkeypatch.setattr(results, "load_entries", lambda path: read.append(path.stem) or load(path))
    for page in (README, BENCHMARKS):
        results.render(page.read_text())
    assert read and set(read) <= {source.stem for source in results.sources()}


def test_seeds_csv_has_a_row_per_seed_in_seed_order(results, tmp_path):
    src = tmp_path / "r.json"
    runs = [{"seed": 11, "mean_return": 2.5}, {"seed": 10, "mean_return": 1.0}]
    _write_entries(tmp_path, "r", [{**run, "episodes": 1} for run in runs])
    out = tmp_path / "r.csv"
    results.seeds_csv(src, out)
    assert out.read_text().splitlines() == ["seed,score", "10,1.0", "11,2.5"]


def _write_entries(folder: Path, stem: str, entries: list[dict]) -> None:
    """An `evaluate --json` file of an earlier version (a bare list) holding ``entries``."""
    run = {"run_dir": "r", "env": "Breakout-MinAtar", "checkpoint": 1, "std_return": 0.0}
    (folder / f"{stem}.json").write_text(json.dumps([{**run, **e} for e in entries]))


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


def test_higher_needs_intervals_that_do_not_overlap(results):
    assert results.higher([(1.0, 2.0), (2.5, 3.0)]) == 1
    assert results.higher([(2.5, 3.0), (1.0, 2.0)]) == 0
    assert results.higher([(1.0, 2.6), (2.5, 3.0)]) is None  # overlapping: a tie
    assert results.higher([(1.0, 2.5), (2.5, 3.0)]) is None  # touching: a tie
    assert results.higher([(5.0, 5.0), (1.0, 4.0)]) == 0  # a point above an interval
    assert results.higher([None, (1.0, 2.0)]) is None  # one side: nothing to compare


def test_a_verdict_says_tie_and_bolds_nothing_where_intervals_overlap(results):
    assert results._verdict(["CleanRL", "batchppo"], [(12.1, 15.6), (11.1, 19.9)], 1) == (
        None, "[12.1, 15.6] / [11.1, 19.9]: tie")  # fmt: skip
    assert results._verdict(["rl-zoo", "batchppo"], [(3479, 3479), (3549.2, 4434.0)], 0) == (
        1, "3479 / [3549, 4434]: batchppo higher")  # fmt: skip
    assert results._verdict(["CleanRL", "batchppo"], [None, (1.0, 2.0)], 0) == (None, "—")
    assert results._bold_at(["a", "b", "c"], 1) == ["a", "**b**", "c"]
    assert results._bold_at(["a", "b"], None) == ["a", "b"]


def test_t_interval_of_a_published_mean(results):
    # 3 runs: mean ± t(0.975, 2) s / sqrt(3), t(0.975, 2) = 4.302653.
    low, high = results.t_interval(2383, 272, 3)
    assert (low, high) == pytest.approx((2383 - 675.6847, 2383 + 675.6847), abs=1e-3)
    assert results.t_interval(5819, 664, 1) == (5819, 5819)  # one run: a point


@pytest.mark.parametrize("page", [README, BENCHMARKS])
def test_no_bold_in_a_tied_row_nor_in_the_tuning_column(page):
    text = page.read_text()
    for line in text.splitlines():
        if line.startswith("| ") and (": tie" in line or line.endswith("| tie |")):
            assert "**" not in line, line
    tables = re.findall(r"((?:^\|.*\n)+)", text, re.M)
    for table in tables:
        head, _, *rows = table.splitlines()
        columns = [c.strip() for c in head.strip("|").split("|")]
        for i, name in enumerate(columns):
            if "tuning" in name:
                assert all("**" not in row.strip("|").split("|")[i] for row in rows), name


def test_readings_list_every_run_and_their_rounds(results):
    assert results._ratios([1.0223]) == "1.02x (one round)"
    assert results._readings([(1.04, 1), (1.0394, 1)]) == "1.04x and 1.04x (2 rounds)"
    assert results._readings([(1.09, 2), (1.26, 2), (1.27, 2)]) == (
        "1.09x, 1.26x and 1.27x (3 runs, each of 2 rounds)")  # fmt: skip
    assert results._readings([(0.92, 2)]) == "0.92x (one run, of 2 rounds)"


def test_bench_rows_come_from_json_and_from_the_log_of_a_run_cut_short(
    results, tmp_path, monkeypatch
):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    row = {"side": "batchppo", "round": 0, "sps": 110.0, "setup_s": 2.0}
    peer = {"side": "purejaxrl", "round": 0, "sps": 100.0, "setup_s": 0.1}
    (tmp_path / "a.json").write_text(json.dumps({"workloads": {"cartpole-4": {"rows": [row]}}}))
    log = [f"cartpole-4 {r['side']} round 0: {r!r}" for r in ({**row, "sps": 1.0}, peer)]
    log.append("cartpole-4: batchppo / purejaxrl steps/s = 1.10 (rounds 1.10)")
    (tmp_path / "a.log").write_text("\n".join(log) + "\n")
    rows = results.bench_rows("a.json", "a.log")
    # The JSON's row wins over the log's for the same side and round; the log adds the peer.
    assert rows == {"cartpole-4": [row, peer]}
    assert results.side_ratio(rows["cartpole-4"], "batchppo", "purejaxrl") == (1.1, 1)
    assert results.side_ratio(rows["cartpole-4"], "batchppo-lean", "purejaxrl") is None


def test_the_atari_gpu_readings_are_those_of_their_source_files():
    results_dir = ROOT / "docs" / "results"
    readings = json.loads((results_dir / "gpu-h200-atari-train-2026-11-27.json").read_text())
    for r in readings["readings"]:
        text = (results_dir / r["source"]).read_text()
        if r["source"].endswith(".log"):
            # The progress lines' rates; the first iteration compiles and is left out.
            rates = [int(m) for m in re.findall(r"\| (\d+) steps/s", text)]
            assert len(rates) == 30
            assert statistics.median(rates[1:]) == r["agent_steps_per_s"]
        else:
            mode = "true" if r["host_loop"] else "false"
            line = f"call {r['call']} host_loop={mode}: "
            assert re.search(rf"^{line} *{r['agent_steps_per_s']:,} agent steps/s", text, re.M), (
                line
            )


def test_the_ale_gpu_paragraph_holds_every_reading_of_each_call(results):
    paragraph = results._atari_ale_gpu()
    for name, _ in results.ALE_GPU_CALLS:
        data = json.loads((ROOT / "docs" / "results" / name).read_text())
        rows = data["rows"]
        theirs = [r["agent_steps_per_s"] for r in rows if r["side"] == "cleanrl"]
        for side, ratio in data["ratios_over_cleanrl"].items():
            # Each side's rounds in round order, then its median over CleanRL's in that call.
            rates = [r["agent_steps_per_s"] for r in sorted(rows, key=lambda r: r["round"])
                     if r["side"] == side]  # fmt: skip
            reading = " and ".join(f"{v:,.0f}" for v in rates)
            assert f"{results.ALE_SIDES[side]} {reading} ({ratio:.2f}x)" in paragraph
            assert statistics.median(rates) / statistics.median(theirs) == pytest.approx(ratio)
        assert f"(median {statistics.median(theirs):,.0f})" in paragraph


def test_each_fresh_target_has_its_own_verdict(results):
    # Hopper's bar 1960: one seed below meets the failure target, two miss it.
    assert results.below_cell([(10, 3504.0), (12, 1814.4)], 1960.0) == "12 (1814): met"
    assert (
        results.below_cell([(10, 3504.0), (12, 1814.4), (18, 537.0)], 1960.0)
        == "12 (1814), 18 (537): missed"
    )
    assert results.below_cell([(20, 4660.2), (21, 5400.0)], 4200.0) == (
        "none (weakest: 20, 4660): met"
    )
    page = BENCHMARKS.read_text()
    hopper = next(line for line in page.splitlines() if line.startswith("| Hopper | "))
    assert "3358 [2548, 3481]: met" in hopper  # seeds 10-19: the IQM reaches 2800
    assert "12 (1814), 18 (537): missed" in hopper  # but two seeds fall below 1960


def _headline_rows() -> dict[str, list[str]]:
    """The README's headline table: its rows' cells by their first cell."""
    block = re.search(r"<!-- table:headline -->\n(.*?)<!-- /table", README.read_text(), re.S)
    rows = [line.strip("|").split("|") for line in block.group(1).splitlines()
            if line.startswith("| ")][1:]  # fmt: skip
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


def test_the_headline_compares_each_task_with_its_highest_published_peer(results):
    peers = {task.name: results.strongest_peer(task).name for task in results.TASKS}
    # HalfCheetah: rl-zoo's 5819 over Tianshou's 5783.9 and CleanRL's 1443; the others:
    # Tianshou's 2609.3, 3588.5, 3258.4 and 787.1 (Ant: CleanRL publishes none; Humanoid:
    # rl-zoo none).
    assert peers == {"HalfCheetah": "rl-zoo", "Hopper": "Tianshou", "Walker2d": "Tianshou",
                     "Ant": "Tianshou", "Humanoid": "Tianshou"}  # fmt: skip
    rows = _headline_rows()
    for task in results.TASKS:
        assert rows[task.name][1].startswith(peers[task.name] + " "), rows[task.name]


def test_the_headline_verdicts_are_those_of_the_protocol_tables(results):
    # Each MuJoCo row's verdict is the verdict of that task's row in its peer's table, and its
    # figures are that row's intervals.
    page = BENCHMARKS.read_text()
    rows = _headline_rows()
    for task in results.TASKS:
        peer = results.strongest_peer(task)
        table = page[page.index(f"| task | {peer.peer} |") :]
        name = results._marked_name(task)  # marked where a seed resumed mid-run
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} | "))
        intervals = row.split("|")[4].strip()  # "[649, 926] / [953, 2429]: batchppo higher"
        theirs, ours = intervals.split(": ")[0].split(" / ")
        verdict = intervals.split(": ")[1]
        _, peer_cell, ours_cell, headline_verdict = rows[task.name]
        assert headline_verdict == verdict, task.name
        assert peer_cell.replace("**", "").endswith(
            "(1 run)" if theirs[0] != "[" else theirs), task.name  # fmt: skip
        assert ours_cell.replace("**", "").endswith(ours), task.name
        assert ("**" in ours_cell) == (verdict == "batchppo higher"), task.name


def test_the_headline_minatar_and_atari_rows_follow_their_tables():
    rows = _headline_rows()
    minatar = rows["MinAtar: Breakout / Asterix / Freeway / SpaceInvaders"]
    # Ours by gymnax's protocol is the 164-episode mean of each game's row, bold where the
    # game's row says batchppo higher; the mean action's means beside it. Breakout's seeds
    # (90.5, 85.2, 53.3) give the t-interval [26.3, 126.3], which holds gymnax's 28: a tie.
    assert minatar == [
        "76.6 / 60.5 / 67.1 / 180.7",
        "gymnax 28 / 15 / 58 / 131 (1 run each)",
        "76.3 / **60.6** / **67.2** / **176.8**",
        "tie on 1 of 4, batchppo higher on 3 of 4",
    ]
    # Atari: the process backend's mean action with its t-interval; beside CleanRL's by the
    # sampled row of the Atari table, a tie.
    assert rows["Atari: Breakout"] == ["15.1 [4.1, 26.2]", "CleanRL 14.6 [7.6, 21.5]",
                                       "13.4 [7.7, 19.1]", "tie"]  # fmt: skip


def test_a_mean_over_seeds_gets_the_t_interval_a_peer_s_mean_gets(results):
    # Breakout MinAtar's seeds by gymnax's protocol: mean 76.33, sample std 20.03, and
    # t(0.975, 2) = 4.302653; a percentile bootstrap of 3 values would give [53.3, 90.5].
    values = [90.5, 85.2, 53.3]
    low, high = results.mean_interval(values)
    half = 4.302653 * statistics.stdev(values) / 3**0.5
    assert (low, high) == pytest.approx((statistics.mean(values) - half,
                                         statistics.mean(values) + half), abs=1e-4)  # fmt: skip
    assert results.mean_interval(values) == pytest.approx(results.t_interval(
        statistics.mean(values), statistics.stdev(values), 3), rel=1e-12)  # fmt: skip
    assert results.mean_interval([5.0]) == (5.0, 5.0)


def test_the_headline_speed_rows_count_the_runs_ours_was_faster_in(results, tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)

    def run(name: str, ours: list[float], theirs: list[float]) -> None:
        rows = [{"side": side, "round": r, "sps": v, "setup_s": 1.0}
                for side, values in (("batchppo", ours), ("purejaxrl", theirs))
                for r, v in enumerate(values)]  # fmt: skip
        (tmp_path / name).write_text(json.dumps({"workloads": {"cartpole-4": {"rows": rows}}}))

    run("a.json", [120e3, 100e3], [100e3, 100e3])  # median 110k over 100k: 1.10x
    run("b.json", [90e3, 90e3], [100e3, 100e3])  # 0.90x
    row = results._headline_speed("Speed, CPU", [(("a.json",), ""), (("b.json",), "")], (4,))
    # Ours: the median of our 4 rounds (95k), the peer's (100k); a ratio a run.
    assert row == ["Speed, CPU: CartPole, 4 envs", "95k", "PureJaxRL `ppo.py` 100k",
                   "1.10x, 0.90x", "faster in 1 of 2 runs"]  # fmt: skip


def test_a_tally_counts_each_verdict():
    results = load_bench("results")
    assert results._tally(["batchppo higher"] * 4) == "batchppo higher on 4 of 4"
    assert results._tally(["tie", "batchppo higher", "tie"]) == (
        "tie on 2 of 3, batchppo higher on 1 of 3")  # fmt: skip


def test_an_estimate_shows_its_interval_or_that_it_is_one_run(results):
    assert results._estimate(5607.6, (5110.2, 5966.4), 0) == "5608 [5110, 5966]"
    assert results._estimate(5819, (5819, 5819), 0) == "5819 (1 run)"
    assert results._estimate(76.55, None, 1) == "76.5"
    assert results._estimate(None, None, 0) == "pending"


def test_the_about_claim_holds_on_the_headline():
    # The README's opening says batchppo is tied with or ahead of the strongest peer on most
    # rows: a row is behind where a peer is higher or ours is not faster in every run.
    verdicts = [cells[-1] for cells in _headline_rows().values()]

    def is_behind(verdict: str) -> bool:
        if re.search(r"(CleanRL|rl-zoo|Tianshou|gymnax) higher", verdict):
            return True
        counts = re.findall(r"(\d+) of (\d+)", verdict)
        return verdict.startswith("faster") and any(k != n for k, n in counts)

    behind = [v for v in verdicts if is_behind(v)]
    assert len(verdicts) == 9 and len(behind) < len(verdicts) / 2, behind
    assert re.search(r"tied with\s+or ahead of the strongest peer on most rows", README.read_text())


def test_a_paragraph_is_wrapped_between_words_never_inside_code_bold_or_links(results):
    # 20 words of 4 letters fill 99 characters: a plain wrap would start the next line with
    # "- x", a list item, and break the link between its words.
    text = ("word " * 20 + "- x " + "**bold words** " + "more " * 10 + "`a code span with spaces` "
            + "[a link](https://example.org/a) " + "tail " * 8 + "1. end")  # fmt: skip
    plain = textwrap.wrap(text, results.WIDTH)
    assert plain[1].startswith("- x") and plain[1].endswith(" [a")
    lines = results._paragraph(text)
    assert lines[0] == "word " * 20 + "-"
    assert " ".join(lines) == " ".join(text.split())
    assert all(len(line) <= results.WIDTH for line in lines[1:]), lines
    joined = "\n".join(lines)
    for span in ("**bold words**", "`a code span with spaces`", "[a link](https://example.org/a)"):
        assert span in joined, lines
    # No line starts what Markdown would read as a list item.
    assert not any(re.match(r"([-+*]|\d+[.)]) ", line) for line in lines), lines


def test_the_figure_data_are_the_fresh_seeds_final_scores(results):
    data = results.figure_data()
    assert data["seeds"] is None  # Humanoid's newest set is 30-39, the others' 20-29
    for task, shown in zip(results.TASKS, data["tasks"], strict=True):
        entries = results.load_entries(ROOT / "docs/results" / f"{results.fresh_stem(task)}.json")
        assert shown["task"] == task.name and shown["target"] == task.target
        newest = range(30, 40) if task.name == "Humanoid" else range(20, 30)
        assert shown["seeds"] == results.seeds_label(newest)
        assert shown["scores"] == {str(e["seed"]): e["mean_return"]
                                   for e in sorted(entries, key=lambda e: e["seed"])}  # fmt: skip
        assert list(shown["scores"]) == [str(s) for s in newest]
        peers = {"CleanRL": task.cleanrl, "rl-zoo": task.rlzoo, "Tianshou": task.tianshou}
        assert shown["peers"] == {k: v[0] for k, v in peers.items() if v is not None}
    assert not results.figure_differs()


def test_changed_figure_data_fail_the_check_of_a_page_that_shows_the_figure(
    results, tmp_path, monkeypatch, capsys
):
    data = json.loads(results.FIGURE_DATA.read_text())
    data["tasks"][0]["scores"]["20"] += 1
    changed = tmp_path / "mujoco-fresh-seeds.json"
    changed.write_text(json.dumps(data))
    monkeypatch.setattr(results, "FIGURE_DATA", changed)
    assert results.main(["--check", str(BENCHMARKS)]) == 1
    assert f"{changed}: the figure's data differ from docs/results; rerun " in (
        capsys.readouterr().err)  # fmt: skip
    monkeypatch.setattr(results, "FIGURE_DATA", tmp_path / "missing.json")
    assert results.main(["--check", str(README)]) == 1


def test_the_figure_is_drawn_from_its_data(results, tmp_path):
    out = tmp_path / "figure.png"
    results.draw_figure(json.loads(results.FIGURE_DATA.read_text()), out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_figure_s_results_file_exists_and_names_its_commit_and_command(results):
    # What the pages' blocks read, as they are generated: each file is in docs/results, and
    # the manifest names the commit of the code that made it and the command that remakes it.
    for page in (README, BENCHMARKS):
        for name in results.blocks(page.read_text()):
            with results.reading() as read:
                results.TABLES[name]()
            assert read, name
            for file in sorted(read):
                assert (ROOT / "docs" / "results" / file).is_file(), (name, file)
                entry = results.manifest_entry(f"docs/results/{file}")
                assert re.fullmatch(r"[0-9a-f]{7,40}", entry["commit"]), (name, file)
                assert entry["command"], (name, file)


def test_each_block_says_where_its_figures_come_from_and_whether_the_code_changed(results):
    page = BENCHMARKS.read_text()
    craftax = re.search(r"<!-- table:craftax -->\n(.*?)<!-- /table", page, re.S).group(1)
    # The Craftax files record no commit: the commits that added them, marked as inferred.
    assert "Code: made at 0f1aa8d* and 0fd4c8e* (*: inferred, the commit that added the file)" in (
        " ".join(craftax.split()))  # fmt: skip
    assert "`batchppo/` has changed since each of these commits" in " ".join(craftax.split())
    # The CPU speed files record their machine (but not its CPU model) and their date.
    speed = re.search(r"<!-- table:speed-cpu -->\n(.*?)<!-- /table", page, re.S).group(1)
    assert "2026-11-27 to 2026-11-28, on 2 CPU cores (CPU model not recorded), JAX 0.10.2;" in (
        " ".join(speed.split()))  # fmt: skip


def test_code_changed_since_a_commit_is_what_git_log_says(results, monkeypatch):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert results.changed_since(head) is False
    # The fresh seeds' code: batchppo/ changed after it (the networks' split, ab3be24).
    assert results.changed_since("51905e10707d2739fe4675d540c9a2dac6e3faa2") is True
    code = {results.Code("a" * 40, False), results.Code("b" * 40, True)}
    monkeypatch.setattr(results, "changed_since", lambda commit: commit.startswith("a"))
    assert results._changed_text(code) == (
        "`batchppo/` has changed since aaaaaaa, not since bbbbbbb*")  # fmt: skip


def test_resumed_runs_are_marked_where_a_table_names_them_with_a_footnote(results):
    fresh = results.FreshSet
    assert results.resumed(results.TASKS[4], fresh(range(20, 30))) == {23: 901120}
    assert results.resumed(results.TASKS[3], fresh(range(10, 20))) == {11: 301056}
    assert results.resumed(results.TASKS[3], fresh(range(20, 30))) == {22: 600064}
    assert results.below_cell([(22, 900.0), (23, 1089.2)], 3850.0, {23: 901120}) == (
        "22 (900), 23† (1089): missed")  # fmt: skip
    assert results.resumed_note(results.TASKS) == (
        "† Resumed mid-run from its own checkpoint, on the same code: Hopper seed 23 at 401k "
        "steps, Walker2d seed 22 at 547k steps, Ant seed 22 at 600k steps, Ant seed 11 at 301k "
        "steps and Humanoid seed 23 at 901k steps."
    )
    page = BENCHMARKS.read_text()
    # Humanoid's newest set (30-39) has no resumed run; Hopper's (20-29) has one.
    assert "| Humanoid (seeds 30-39) | 787.1 ± 193.5 |" in page
    assert "| Hopper (seeds 20-29)† | 2609.3 ± 700.8 |" in page
    assert "| HalfCheetah (seeds 20-29) | 5783.9 ± 1244 |" in page


def _fake_set(
    folder: Path, stem: str, seeds: range, base: float, run: Callable[[int], str]
) -> None:
    """`<stem>.json`, a run a seed (named ``run(seed)``) scoring ``base + 20 i`` in seed order
    (their IQM ``base + 90``), and its `-stats.json`: the IQM's interval ``[base + 40, base +
    140]`` and a max-eval-mean of ``base + 50`` ± 30 by Tianshou's protocol."""
    runs = [{"seed": s, "mean_return": base + 20 * i, "episodes": 100, "env": "Humanoid-v5",
             "run_dir": f"/elsewhere/{run(s)}"} for i, s in enumerate(seeds)]  # fmt: skip
    _write_entries(folder, stem, runs)
    iqm = {"value": base + 90, "low": base + 40, "high": base + 140}
    peak = {"value": base + 50, "std": 30.0, "runs": 10, "episodes": [10], "actions": "sampled"}
    stats = {"groups": {"g": {"envs": {"Humanoid-v5": {"iqm": iqm}}}},
             "max_eval_mean": {"g": {"Humanoid-v5": peak}}}  # fmt: skip
    (folder / f"{stem}-stats.json").write_text(json.dumps(stats))


def _last_paragraph(lines: list[str]) -> str:
    """The paragraph after the last blank line of a block, its lines joined."""
    return " ".join(lines[len(lines) - lines[::-1].index("") :])


def _publish(
    results: Any,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    tasks: Sequence[Any],
    bases: Mapping[str, float],
    resumed: Mapping[str, list[int]],
) -> None:
    """Makes ``tasks`` the tasks, their fresh sets published in a docs/results and docs/runs of
    their own (under ``folder``): each set's results scoring from ``bases[its stem]``
    (`_fake_set`), each of its runs finished (the runs of ``resumed``, by name, resumed
    mid-run); the newest set's training window from its base + 100, the tuning seeds' from
    base + 300 and base + 200. The global sets are made seeds 90-99, which no file holds: a
    reader still on them finds nothing."""
    runs = folder / "runs"
    for task in tasks:
        for fresh in task.fresh:
            stem = results.fresh_stem(task, fresh)
            name = functools.partial(fresh.run, task.preset)
            _fake_set(folder, stem, fresh.seeds, bases[stem], name)
            for seed in fresh.seeds:
                (runs / name(seed)).mkdir(parents=True)
                summary = {"wall_time": 60.0 * seed, "finished": True,
                           "resumed_at": resumed.get(name(seed), [])}  # fmt: skip
                (runs / name(seed) / "summary.json").write_text(json.dumps(summary))
        newest = bases[results.fresh_stem(task)]
        name = functools.partial(task.fresh[0].run, task.preset)
        _fake_set(folder, results.window_stem(task), task.fresh[0].seeds, newest + 100, name)
        tuning = functools.partial(results.FreshSet(range(10)).run, task.preset)
        _fake_set(folder, task.tuning, range(10), newest + 300, tuning)
        _fake_set(folder, task.tuning_window, range(10), newest + 200, tuning)
    monkeypatch.setattr(results, "RESULTS", folder)
    monkeypatch.setattr(results, "RUNS", runs)
    monkeypatch.setattr(results, "FRESH_SEEDS", (results.FreshSet(range(90, 100)),))
    monkeypatch.setattr(results, "TASKS", tuple(tasks))


def _hopper(results: Any) -> Any:
    """Hopper on its own fresh sets, 20-29 and 10-19."""
    fresh = results.FreshSet
    return results.Task("Hopper", "hop", "hop-tune", "hop-tune-window", 2800, (2383, 272),
                        (2410, 10), (2609.3, 700.8),
                        fresh=(fresh(range(20, 30)), fresh(range(10, 20))))  # fmt: skip


HOPPER_BASES = {"hop-1M-seeds20-29": 3000, "hop-1M-seeds10-19": 1900}
"""Where `_hopper`'s sets score from (`_publish`)."""


@pytest.fixture
def per_task_sets(results, tmp_path, monkeypatch):
    """Two tasks on their own fresh sets (`_publish`): Hopper on 20-29 and 10-19, Humanoid
    changed and run on 30-39, its 20-29 and 10-19 of an earlier recipe; Humanoid's seed 30 and
    Hopper's 12 resumed mid-run."""
    fresh = results.FreshSet
    humanoid = results.Task("Humanoid", "hum", "hum-tune", "hum-tune-window", 5500, (716, 49),
                            None, (787.1, 193.5), earlier_recipe=2,
                            fresh=(fresh(range(30, 40)), fresh(range(20, 30)),
                                   fresh(range(10, 20))))  # fmt: skip
    hopper = _hopper(results)
    bases = {**HOPPER_BASES, "hum-1M-seeds30-39": 4000, "hum-1M-seeds20-29": 3800,
             "hum-1M-seeds10-19": 5000}  # fmt: skip
    _publish(results, tmp_path, monkeypatch, (hopper, humanoid), bases,
             {"s30-hum": [500_000], "s12-hop": [300_000]})  # fmt: skip
    return hopper, humanoid


@pytest.fixture
def rerun_sets(results, tmp_path, monkeypatch):
    """Hopper as in `per_task_sets`; Humanoid changed again and rerun on the seeds of its
    newest set, 30-39: the new runs `s3?-hum-v256` under the preset's own stem, the former
    set's results moved to `hum-adam99-1M-seeds30-39` (its runs `s3?-hum`), then 20-29 and
    10-19 of a recipe before that. Resumed mid-run: the new set's seed 31, the former's 30."""
    fresh = results.FreshSet
    humanoid = results.Task("Humanoid", "hum", "hum-tune", "hum-tune-window", 5500, (716, 49),
                            None, (787.1, 193.5), earlier_recipe=3,
                            fresh=(fresh(range(30, 40), runs="v256"),
                                   fresh(range(30, 40), results="adam99"),
                                   fresh(range(20, 30)), fresh(range(10, 20))))  # fmt: skip
    hopper = _hopper(results)
    bases = {**HOPPER_BASES, "hum-1M-seeds30-39": 4400, "hum-adam99-1M-seeds30-39": 4000,
             "hum-1M-seeds20-29": 3800, "hum-1M-seeds10-19": 5000}  # fmt: skip
    _publish(results, tmp_path, monkeypatch, (hopper, humanoid), bases,
             {"s31-hum-v256": [500_000], "s30-hum": [400_000], "s12-hop": [300_000]})  # fmt: skip
    return hopper, humanoid


def test_the_fresh_table_shows_each_task_s_own_sets_led_by_their_seeds(results, per_task_sets):
    head, rule, hopper, humanoid, *notes = results.fresh_table()
    sets = ["newest fresh set", "earlier set 1", "earlier set 2"]
    columns = [f"{name}: {what}" for name in sets
               for what in ("seeds", "IQM [95 % CI]", "below 70 %")]  # fmt: skip
    assert head == ("| task (v5) | target (IQM); 70 % of it | " + " | ".join(columns)
                    + " | seeds 0-9 (tuning): IQM [95 % CI] |")  # fmt: skip
    assert rule == "|---|---:|" + "---|---:|---|" * 3 + "---:|"
    # Each set's IQM is base + 90 of its scores (base, base + 20, ...), in its own columns.
    assert hopper == (
        "| Hopper | 2800; 1960 | 20-29 | 3090 [3040, 3140]: met | none (weakest: 20, 3000): met "
        "| 10-19 | 1990 [1940, 2040]: missed | 10 (1900), 11 (1920), 12† (1940): missed "
        "| — | — | — | 3390 [3340, 3440] |"
    )
    assert humanoid == (
        "| Humanoid | 5500; 3850 | 30-39 | 4090 [4040, 4140]: missed "
        "| none (weakest: 30†, 4000): met | 20-29 | 3890 [3840, 3940]: missed "
        "| 20 (3800), 21 (3820), 22 (3840): missed | 10-19 | 5090 [5040, 5140]: missed "
        "| none (weakest: 10, 5000): met | 4390 [4340, 4440] |"
    )
    assert note_paragraphs(notes) == [
        "† Resumed mid-run from its own checkpoint, on the same code: Humanoid seed 30 at 500k "
        "steps and Hopper seed 12 at 300k steps.",
        "Run by an earlier recipe of the preset, kept as history: Humanoid's seeds 20-29 and "
        "10-19. Each task's newest set is its preset as shipped.",
    ]
    # The timing reads every set of each task: Hopper's 20 runs and Humanoid's 30.
    assert results.fresh_block()[0].startswith("Each of the 50 runs published so far took "
                                               "10.0-39.0 minutes")  # fmt: skip


def test_the_protocol_tables_name_each_row_s_newest_seeds(results, per_task_sets, monkeypatch):
    _, humanoid = per_task_sets
    lines = results.protocol_tables()
    heads = [line for line in lines if line.startswith("| task |")]
    assert [head.split(" | ")[2] for head in heads] == ["batchppo, the row's seeds"] * 3
    rows = [line.split(" | ")[:3] for line in lines if line.startswith(("| Hopper", "| Human"))]
    # Ours: CleanRL's table the training window's mean (base + 90) ± its population std (57),
    # rl-zoo's the final policies', Tianshou's the max-eval-mean (base + 50 ± 30).
    assert rows == [
        ["| Hopper (seeds 20-29)", "2383 ± 272", "**3190 ± 57**"],
        ["| Humanoid (seeds 30-39)†", "716 ± 49", "**4190 ± 57**"],
        ["| Hopper (seeds 20-29)", "2410 ± 10", "**3090 ± 57**"],
        ["| Humanoid (seeds 30-39)†", "—", "4090 ± 57"],
        ["| Hopper (seeds 20-29)", "2609.3 ± 700.8", "**3150 ± 30**"],
        ["| Humanoid (seeds 30-39)†", "787.1 ± 193.5", "**4150 ± 30**"],
    ]
    assert _last_paragraph(lines) == (
        "† One of the seeds its row names was resumed mid-run "
        "from its own checkpoint (the fresh-seed table names it)."
    )
    assert results._headline_mujoco(humanoid)[:2] == ["Humanoid", "4090 [4040, 4140]"]
    assert results.newest_seeds_text() == "seeds 20-29 (Hopper) and 30-39 (Humanoid)"
    # Of the newest sets only Humanoid's seed 30 was resumed (Hopper's 12 is of its 10-19).
    # The sentence names the set of the resumed run alone.
    assert results.resumed_newest() == (
        "One fresh run of seeds 30-39 was resumed mid-run from its own checkpoint "
        "(docs/benchmarks.md marks it)."
    )
    # Resumed runs in both newest sets: each set named with its count.
    monkeypatch.setattr(results, "resumed", lambda task, fresh: {fresh.seeds[0]: 1000})
    assert results.resumed_newest() == (
        "2 fresh runs (1 of seeds 20-29 and 1 of seeds 30-39) were resumed mid-run from their "
        "own checkpoints (docs/benchmarks.md marks them)."
    )


def test_the_figure_and_the_guard_read_each_task_s_own_sets(
    results, per_task_sets, tmp_path, monkeypatch
):
    data = results.figure_data()
    assert data["seeds"] is None
    assert [(t["task"], t["seeds"], min(t["scores"]), t["iqm"]) for t in data["tasks"]] == [
        ("Hopper", "20-29", "20", 3090.0), ("Humanoid", "30-39", "30", 4090.0)]  # fmt: skip
    results.draw_figure(json.loads(json.dumps(data)), tmp_path / "figure.png")
    assert results._figure_tick(data["tasks"][1], True) == "Humanoid\n(target 5500)\nseeds 30-39"
    # The guard holds the newest sets to the preset as shipped, not the earlier recipe's (the
    # other blocks' sources read docs/results).
    monkeypatch.setattr(results, "RESULTS", ROOT / "docs" / "results")
    found = [(s.stem, s.preset) for s in results.sources() if s.stem.startswith(("hop", "hum"))]
    assert found == [
        ("hop-tune", "hop"), ("hop-tune-window", "hop"),
        ("hop-1M-seeds20-29-training-window", "hop"), ("hop-1M-seeds20-29", "hop"),
        ("hop-1M-seeds10-19", "hop"),
        ("hum-tune", "hum"), ("hum-tune-window", "hum"),
        ("hum-1M-seeds30-39-training-window", "hum"), ("hum-1M-seeds30-39", "hum"),
        ("hum-1M-seeds20-29", None), ("hum-1M-seeds10-19", None),
    ]  # fmt: skip


def test_tasks_sharing_their_sets_are_named_in_the_headers(results, per_task_sets, monkeypatch):
    _, humanoid = per_task_sets
    monkeypatch.setattr(results, "TASKS", (humanoid,))
    head, _, row, *_ = results.fresh_table()
    assert head.startswith("| task (v5) | target (IQM); 70 % of it | seeds 30-39: IQM [95 % CI] "
                           "| seeds 30-39 below 70 % | seeds 20-29: IQM [95 % CI] |")  # fmt: skip
    assert row.startswith("| Humanoid | 5500; 3850 | 4090 [4040, 4140]: missed | ")
    lines = results.protocol_tables()
    assert "| task | CleanRL PPO (v4, 3 seeds) | batchppo seeds 30-39 |" in " ".join(lines)
    assert _last_paragraph(lines) == (
        "† One of its seeds 30-39 was resumed mid-run from its own "
        "checkpoint (the fresh-seed table names it)."
    )
    assert results.newest_seeds_text() == "seeds 30-39"
    assert results.figure_data()["seeds"] == "30-39"


def test_a_preset_rerun_on_its_newest_seeds_reads_each_set_s_own_runs_and_results(
    results, rerun_sets, tmp_path, monkeypatch
):
    _, humanoid = rerun_sets
    new, former = humanoid.fresh[:2]
    assert [results.fresh_stem(humanoid, s) for s in (new, former)] == [
        "hum-1M-seeds30-39", "hum-adam99-1M-seeds30-39"]  # fmt: skip
    assert results.fresh_stem(humanoid) == "hum-1M-seeds30-39"
    assert results.window_stem(humanoid) == "hum-1M-seeds30-39-training-window"
    assert [new.run("hum", 31), former.run("hum", 31)] == ["s31-hum-v256", "s31-hum"]
    assert results.resumed(humanoid, new) == {31: 500_000}
    assert results.resumed(humanoid, former) == {30: 400_000}
    assert [new.label, former.label] == ["30-39", "30-39 (adam99)"]
    _, _, _, row, *notes = results.fresh_table()
    # The new set scores from 4400, the former from 4000: each in its own columns, the
    # former's named with its variant and its resumed seed 30 marked there alone.
    assert row == (
        "| Humanoid | 5500; 3850 | 30-39 | 4490 [4440, 4540]: missed "
        "| none (weakest: 30, 4400): met | 30-39 (adam99) | 4090 [4040, 4140]: missed "
        "| none (weakest: 30†, 4000): met | 20-29 | 3890 [3840, 3940]: missed "
        "| 20 (3800), 21 (3820), 22 (3840): missed | 10-19 | 5090 [5040, 5140]: missed "
        "| none (weakest: 10, 5000): met | 4790 [4740, 4840] |"
    )
    assert note_paragraphs(notes) == [
        "† Resumed mid-run from its own checkpoint, on the same code: Humanoid seed 31 at 500k "
        "steps, Hopper seed 12 at 300k steps and Humanoid seed 30 (adam99) at 400k steps.",
        "Run by an earlier recipe of the preset, kept as history: Humanoid's seeds 30-39 "
        "(adam99), 20-29 and 10-19. Each task's newest set is its preset as shipped.",
    ]
    # Hopper's 20 runs and Humanoid's 40, the two sets on 30-39 each counted.
    assert results.fresh_block()[0].startswith("Each of the 60 runs published so far took ")
    assert results._headline_mujoco(humanoid)[:2] == ["Humanoid", "4490 [4440, 4540]"]
    assert results.figure_data()["tasks"][1]["iqm"] == 4490.0
    assert results.resumed_newest() == (
        "One fresh run of seeds 30-39 was resumed mid-run from its own checkpoint "
        "(docs/benchmarks.md marks it)."
    )
    # Before the new set's results: pending, counting the new runs staged, not the former's.
    (tmp_path / "hum-1M-seeds30-39.json").unlink()
    for seed in range(33, 40):
        shutil.rmtree(tmp_path / "runs" / f"s{seed}-hum-v256")
    assert results.fresh_table()[3].startswith(
        "| Humanoid | 5500; 3850 | 30-39 | pending (3 of 10 run) | pending | 30-39 (adam99) | "
    )
    # The guard holds the new set to the preset as shipped, the former with the older sets
    # to none (the other blocks' sources read docs/results).
    monkeypatch.setattr(results, "RESULTS", ROOT / "docs" / "results")
    found = [(s.stem, s.preset) for s in results.sources() if s.stem.startswith("hum")]
    assert found == [
        ("hum-tune", "hum"), ("hum-tune-window", "hum"),
        ("hum-1M-seeds30-39-training-window", "hum"), ("hum-1M-seeds30-39", "hum"),
        ("hum-adam99-1M-seeds30-39", None), ("hum-1M-seeds20-29", None),
        ("hum-1M-seeds10-19", None),
    ]  # fmt: skip


def test_sets_on_the_same_seeds_are_told_apart_in_the_headers(results, rerun_sets, monkeypatch):
    _, humanoid = rerun_sets
    monkeypatch.setattr(results, "TASKS", (humanoid,))
    head, _, row, *_ = results.fresh_table()
    assert head.startswith(
        "| task (v5) | target (IQM); 70 % of it | seeds 30-39: IQM [95 % CI] "
        "| seeds 30-39 below 70 % | seeds 30-39 (adam99): IQM [95 % CI] "
        "| seeds 30-39 (adam99) below 70 % | seeds 20-29: IQM [95 % CI] |"
    )
    assert row.startswith("| Humanoid | 5500; 3850 | 4490 [4440, 4540]: missed | ")
    assert results.newest_seeds_text() == "seeds 30-39"
    # A newest set of its own variant is named with it wherever a set is named.
    renamed = dataclasses.replace(
        humanoid,
        fresh=(results.FreshSet(range(30, 40), runs="v256", results="v256"), *humanoid.fresh[1:]),
    )
    monkeypatch.setattr(results, "TASKS", (renamed,))
    assert results.newest_seeds_text() == "seeds 30-39 (v256)"
    assert results.fresh_stem(renamed) == "hum-v256-1M-seeds30-39"


def test_two_sets_on_the_same_seeds_with_the_same_runs_or_results_are_refused(results):
    figures = ("Humanoid", "humanoid_fast", "t", "w", 5500, None, None, (787.1, 193.5))
    fresh = results.FreshSet
    with pytest.raises(ValueError, match=r"Humanoid: fresh sets 30-39 and 30-39 share seeds "
                       r"and their runs and results variant; give each its own"):  # fmt: skip
        results.Task(*figures, fresh=(fresh(range(30, 40)), fresh(range(30, 40))))
    with pytest.raises(ValueError, match=r"fresh sets 30-39 and 30-39 \(adam99\) share seeds "
                       r"and their runs variant"):  # fmt: skip
        results.Task(*figures, fresh=(fresh(range(30, 40)), fresh(range(30, 40), results="adam99")))
    with pytest.raises(ValueError, match=r"fresh sets 30-39 and 35-44 share seeds and their "
                       r"results variant"):  # fmt: skip
        results.Task(*figures, fresh=(fresh(range(30, 40), runs="v256"), fresh(range(35, 45))))


def test_a_task_without_a_fresh_set_or_with_its_newest_of_an_earlier_recipe_is_refused(results):
    figures = ("Ant", "ant_fast", "t", "w", 4500, None, None, (3258.4, 1079.3))
    with pytest.raises(ValueError, match="Ant: no fresh seed set; give `fresh` one, newest first"):
        results.Task(*figures, fresh=())
    with pytest.raises(ValueError, match="Ant: earlier_recipe=2 of 2 fresh sets; give a count "
                       "from 0 up to all but the newest set"):  # fmt: skip
        results.Task(*figures, earlier_recipe=2)
    with pytest.raises(ValueError, match="earlier_recipe=-1"):
        results.Task(*figures, earlier_recipe=-1)
    assert results.Task(*figures).fresh == (
        results.FreshSet(range(20, 30)), results.FreshSet(range(10, 20)))  # fmt: skip


def test_one_run_a_side_is_not_compared(results):
    assert results._verdict(["baseline", "batchppo"], [(3.97, 3.97), (4.09, 4.09)], 2) == (
        None, "3.97 / 4.09: not compared (one run a side, so no interval)")  # fmt: skip
    assert "seed 0: not compared (one run a side, so no interval)" in " ".join(
        results.craftax_block())  # fmt: skip


def test_the_guard_holds_the_craftax_preset_to_its_figures(results, monkeypatch):
    from batchppo.algorithms.registry import get_algorithm
    from batchppo.experiment.config import configs

    assert {"craftax_symbolic", "breakout_atari", "pong_atari"} <= {
        s.preset for s in results.sources()}  # fmt: skip
    shipped = configs.PRESETS["craftax_symbolic"]
    ppo_presets = get_algorithm("ppo").presets
    monkeypatch.setitem(ppo_presets, "craftax_symbolic",
                        dataclasses.replace(shipped, update_epochs=8))  # fmt: skip
    assert results.shipped_differences() == [
        f"craftax_symbolic: docs/results/{name}: update_epochs: shipped 8, its runs 4. Rerun, or "
        "pin update_epochs=4 in the preset"
        for name in ("craftax-cpu-2026-11-26.json", "craftax-speed-cpu-2026-11-27.json")
    ]


def _block_lines(name: str) -> list[str]:
    """A generated block of docs/benchmarks.md as it stands, line by line."""
    page = BENCHMARKS.read_text()
    return re.search(rf"<!-- table:{name} -->\n(.*?)<!-- /table:{name} -->", page, re.S).group(
        1).splitlines()  # fmt: skip


def test_the_tune_block_gives_the_ratios_of_its_results_file(results):
    data = json.loads((ROOT / "docs" / "results" / results.TUNE_RLZOO).read_text())
    lines = _block_lines("tune-rlzoo")
    text = " ".join(" ".join(lines).split())
    figures = data["figures"]
    for key, what in (("trials_per_hour", "trials/h"), ("trials_per_cpu_hour", "trials/CPU-h")):
        ratios = {side: figures[side][key] / figures["rlzoo"][key] for side in figures
                  if side != "rlzoo"}  # fmt: skip
        assert ratios == pytest.approx(
            {k.removesuffix("/rlzoo"): v for k, v in data["ratios"][key].items()
             if k.endswith("/rlzoo")}, rel=1e-12)  # fmt: skip
        listed = ", ".join(f"{side} {ratio:.2f}x" for side, ratio in ratios.items())
        assert f"{what}: {listed}" in text
    batch = figures["batch8"]["trials_per_hour"] / figures["batch1"]["trials_per_hour"]
    row = next(line for line in lines if line.startswith("| `--batch 8` >= 4x `--batch 1`'s |"))
    assert row.startswith(f"| `--batch 8` >= 4x `--batch 1`'s | batch8 | {batch:.2f}x | ")
    assert row.endswith(" | met |" if batch >= 4 else " | not met |")
    assert data["command"].split()[0] == "tune_vs_rlzoo.py"
    assert f"python bench/{data['command']}" in text.replace(" \\ ", " ")


def _tune_run(rates: dict[str, float]) -> dict:
    """A `bench/tune_vs_rlzoo.py` record of 2 rounds of 5 minutes whose sides end trials at
    ``rates`` an hour (the same in both rounds, twice that per CPU-hour), no trial pruned."""
    configs = {"rlzoo": (None, None), "batch1": ("pendulum_jax", 1),
               "batch8": ("pendulum_jax", 8)}  # fmt: skip
    rows = [
        {"side": side, "round": r, "trials": int(rate / 12), "pruned": 0, "trials_per_hour": rate,
         "trials_per_cpu_hour": 2 * rate, "best": -150.0, "trial_s": 20.0, "first_s": 30.0}
        for r in range(2) for side, rate in rates.items()
    ]  # fmt: skip
    return {
        "date": "2026-12-02 07:50:00 UTC",
        "command": "tune_vs_rlzoo.py --sides rlzoo,batch1,batch8 --minutes 5 --rounds 2",
        "args": {"minutes": 5.0, "rounds": 2, "steps": 100000, "seeds": 1, "evaluations": 10,
                 "eval_episodes": 10, "rlzoo_threads": 1},
        "env": "Pendulum-v1",
        "differences": ["Search space: rl-zoo's own."],
        "versions": {"batchppo": {"jax": "0.10.2"}, "rlzoo": {"rl_zoo3": "2.9.2"}},
        "rlzoo_hyperparams": {"n_envs": 4},
        "rows": rows,
        "figures": {side: {"config": c, "batch": b} for side, (c, b) in configs.items()},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("batch8", "fused", "batch", "verdict"),
    [
        (396.0, "| batch8 | 11.00x | 11.00x, 11.00x (2 of 2) | 11.00x (met) | met |",
         "| batch8 | 2.75x | 2.75x, 2.75x (0 of 2) | 2.75x (not met) | not met |",
         "The fused path's goal: met by batch8."),
        (324.0, "| batch8 | 9.00x | 9.00x, 9.00x (0 of 2) | 9.00x (not met) | not met |",
         "| batch8 | 2.25x | 2.25x, 2.25x (0 of 2) | 2.25x (not met) | not met |",
         "The fused path's goal: not met by any of its sides."),
        (720.0, "| batch8 | 20.00x | 20.00x, 20.00x (2 of 2) | 20.00x (met) | met |",
         "| batch8 | 5.00x | 5.00x, 5.00x (2 of 2) | 5.00x (met) | met |",
         "The fused path's goal: met by batch8."),
    ],
)  # fmt: skip
def test_the_tune_goals_verdicts_follow_the_figures(
    results, tmp_path, monkeypatch, batch8, fused, batch, verdict
):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    run = _tune_run({"rlzoo": 36.0, "batch1": 144.0, "batch8": batch8})
    (tmp_path / results.TUNE_RLZOO).write_text(json.dumps(run))
    lines = results.tune_rlzoo_block()
    goal = "| the fused path (`pendulum_jax`) >= 10x rl-zoo's "
    assert f"{goal}| batch1 | 4.00x | 4.00x, 4.00x (0 of 2) | 4.00x (not met) | not met |" in lines
    assert f"{goal}{fused}" in lines
    assert f"| `--batch 8` >= 4x `--batch 1`'s {batch}" in lines
    assert verdict in lines
    rlzoo = ("| rlzoo: rl-zoo's `train.py -optimize` (SB3's PPO) | 3 (0), 3 (0) | 36.0 (36.0, "
             "36.0) | 72.0 (72.0, 72.0) | -150.0 (-150.0, -150.0) | 20.0 (20.0, 20.0) | 30.0 "
             "(30.0, 30.0) |")  # fmt: skip
    assert rlzoo in lines
    ratio = f"batch1 4.00x, batch8 {batch8 / 36:.2f}x"
    against = f"Against rl-zoo (the medians' ratio): trials/h: {ratio}; trials/CPU-h: {ratio}."
    assert against in " ".join(lines)

"""Learning-curve figures: grouping into panels and series, aggregation, the curves drawn
(their labels, protocols and markers), the PNG, bad input."""

from __future__ import annotations

import dataclasses
import json
import lzma
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from batchppo.experiment.analysis import plot
from batchppo.experiment.config import configs
from batchppo.experiment.errors import RunDirError, UserError


def fake_run(
    logdir: Path, name: str, preset: str, evals: list[tuple[int, float]], **changes
) -> Path:
    """A run dir with the preset's config.yaml (with ``changes``) and eval/train reports at
    the given steps."""
    run_dir = logdir / name
    run_dir.mkdir(parents=True)
    config = dataclasses.replace(configs.get_preset(preset), **changes)
    configs.save_config(config, run_dir / "config.yaml")
    lines = []
    for step, score in evals:
        lines.append({"step": step, "phase": "train", "score": score - 1, "wall_time": step / 10})
        lines.append({"step": step, "phase": "eval", "score": score, "wall_time": step / 10})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run_dir


@pytest.fixture(autouse=True)
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def runs(tmp_path):
    return [
        fake_run(tmp_path, "s0-cheetah_fast", "cheetah_fast", [(10, 1.0), (20, 3.0)]),
        fake_run(tmp_path, "s1-cheetah_fast", "cheetah_fast", [(10, 3.0), (20, 5.0)]),
        fake_run(tmp_path, "s0-cheetah", "cheetah", [(10, 0.0), (20, 2.0)]),
        fake_run(tmp_path, "s0-pendulum_fast", "pendulum_fast", [(5, -900.0), (20, -200.0)]),
    ]


def test_panels_by_env_hold_configs_side_by_side(runs):
    grouped = plot.group_runs(runs)
    assert list(grouped) == ["HalfCheetah-v5", "Pendulum-v1"]
    assert list(grouped["HalfCheetah-v5"]) == ["cheetah_fast", "cheetah"]
    assert len(grouped["HalfCheetah-v5"]["cheetah_fast"]) == 2
    fast = grouped["HalfCheetah-v5"]["cheetah_fast"]
    xs, mean, std = plot.aggregate([run.curves["eval"] for run in fast])
    np.testing.assert_array_equal(xs, [10, 20])
    np.testing.assert_array_equal(mean, [2.0, 4.0])
    np.testing.assert_array_equal(std, [1.0, 1.0])
    by_config = plot.group_runs(runs, panels="config")
    assert list(by_config) == ["cheetah_fast", "cheetah", "pendulum_fast"]


def test_hours_axis_reads_wall_time(runs):
    grouped = plot.group_runs(runs[:1], x="hours")
    run = grouped["HalfCheetah-v5"]["cheetah_fast"][0]
    np.testing.assert_array_equal(run.curves["train"][0], [1, 2])


def test_a_run_whose_log_is_stored_xz_compressed_plots_the_same_curves(runs):
    # The repository keeps its published runs' logs as metrics.jsonl.xz (bench/rundata.py).
    plain = plot.load_curves(runs[0])
    log = runs[0] / "metrics.jsonl"
    (runs[0] / "metrics.jsonl.xz").write_bytes(lzma.compress(log.read_bytes()))
    log.unlink()
    packed = plot.load_curves(runs[0])
    assert list(packed) == list(plain) == ["eval", "train"]
    for phase in plain:
        np.testing.assert_array_equal(packed[phase], plain[phase])


def test_aggregate_interpolates_onto_the_shared_range():
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.0, 10.0, 20.0]))
    b = (np.array([5.0, 15.0]), np.array([0.0, 0.0]))
    xs, mean, _ = plot.aggregate([a, b])
    np.testing.assert_array_equal(xs, [5.0, 10.0, 15.0])
    np.testing.assert_array_equal(mean, [2.5, 5.0, 7.5])


def drawn_lines(fig) -> list[list[tuple[str, str, str, list[float]]]]:
    """Each panel's lines as ``(label, line style, marker, x values)``."""
    return [
        [(line.get_label(), line.get_linestyle(), line.get_marker(), list(line.get_xdata()))
         for line in ax.get_lines()]
        for ax in fig.axes if ax.get_visible()
    ]  # fmt: skip


def legend_entries(fig) -> list[str]:
    """The figure legend's entries, unwrapped."""
    return [t.get_text().replace("\n", " ") for t in fig.legends[0].get_texts()]


def test_each_eval_curve_is_labelled_by_its_runs_protocol(runs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every run is averaged: nothing to warn of
        fig = plot.learning_curves(runs, columns=2)
    assert drawn_lines(fig) == [
        [
            ("cheetah_fast: eval (10 episodes, sampled actions), 2 runs", "-", "None", [10, 20]),
            ("cheetah_fast: train (sampled actions), 2 runs", "--", "None", [10, 20]),
            ("cheetah: eval (30 episodes, mean action), 1 run", "-", "None", [10, 20]),
            ("cheetah: train (sampled actions), 1 run", "--", "None", [10, 20]),
        ],
        [
            ("pendulum_fast: eval (16 episodes, mean action), 1 run", "-", "None", [5, 20]),
            ("pendulum_fast: train (sampled actions), 1 run", "--", "None", [5, 20]),
        ],
    ]
    assert legend_entries(fig) == [line[0] for panel in drawn_lines(fig) for line in panel]


def test_runs_of_one_config_evaluated_differently_are_not_averaged(tmp_path):
    runs = [
        fake_run(tmp_path, "s0-cheetah_fast", "cheetah_fast", [(10, 1.0), (20, 3.0)]),
        fake_run(tmp_path, "s1-cheetah_fast", "cheetah_fast", [(10, 5.0), (20, 7.0)],
                 eval_actions="mean", eval_episodes=100),
        fake_run(tmp_path, "s2-cheetah_fast", "cheetah_fast", [(10, 3.0), (20, 5.0)]),
    ]  # fmt: skip
    grouped = plot.group_runs(runs)
    with pytest.warns(plot.PlotWarning) as caught:
        panels, notes = plot.curve_series(grouped, ("eval",))
        plot.learning_curves(runs, phases=("eval",))
    assert notes == [
        "HalfCheetah-v5: the runs of cheetah_fast were evaluated by 2 protocols (10 episodes, "
        "sampled actions: 2 runs; 100 episodes, mean action: 1 run): their eval curves are drawn "
        "apart, not averaged together"
    ]
    assert [str(w.message) for w in caught] == notes
    (series,) = panels.values()
    assert [(s.label, s.style) for s in series] == [
        ("cheetah_fast: eval (10 episodes, sampled actions), 2 runs", "-"),
        ("cheetah_fast: eval (100 episodes, mean action), 1 run", "-."),
    ]
    np.testing.assert_array_equal(series[0].y, [2.0, 4.0])  # runs 0 and 2 only
    np.testing.assert_array_equal(series[1].y, [5.0, 7.0])


def test_runs_without_common_steps_are_drawn_one_by_one_with_markers(tmp_path):
    # Two runs of 20k and 16k steps, each evaluated once at its end: no step in common.
    runs = [
        fake_run(tmp_path, "s0-cheetah_fast", "cheetah_fast", [(20480, 900.0)]),
        fake_run(tmp_path, "s1-cheetah_fast", "cheetah_fast", [(16384, 700.0)]),
    ]
    with pytest.warns(plot.PlotWarning, match="share no steps for their eval curves") as caught:
        fig = plot.learning_curves(runs, phases=("eval",))
    assert [str(w.message) for w in caught] == [
        "HalfCheetah-v5: the 2 runs of cheetah_fast share no steps for their eval curves, so "
        "there is nothing to average: they are drawn one by one"
    ]
    label = "cheetah_fast: eval (10 episodes, sampled actions), 2 runs drawn one by one (no " \
        "common steps)"  # fmt: skip
    assert drawn_lines(fig) == [[(label, "-", "o", [20480]), (label, "-", "o", [16384])]]
    assert legend_entries(fig) == [label]  # once
    assert fig.legends[0].get_texts()[0].get_text() == (
        "cheetah_fast: eval (10 episodes, sampled actions), 2 runs drawn\none by one (no common "
        "steps)"
    )  # wrapped to fit under the panel
    # The command line says so in one line (outside pytest, which records warnings), and
    # writes the figure.
    out = tmp_path / "a.png"
    argv = ["plot", *map(str, runs), "--out", str(out), "--phase", "eval"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "batchppo", *argv], env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, f"wrote {out}\n")
    assert done.stderr == f"batchppo: warning: {caught[0].message}\n"


def test_a_curve_of_one_point_gets_a_marker_and_its_spread_a_bar(tmp_path):
    runs = [
        fake_run(tmp_path, f"s{i}-cheetah", "cheetah", [(100, score)])
        for i, score in enumerate([1.0, 3.0])
    ]
    panels, notes = plot.curve_series(plot.group_runs(runs), ("eval",))
    (series,) = panels["HalfCheetah-v5"]
    assert notes == [] and series.marker == "o"
    assert (series.x.tolist(), series.y.tolist(), series.std.tolist()) == ([100], [2.0], [1.0])
    fig = plot.learning_curves(runs, phases=("eval",))
    assert drawn_lines(fig) == [
        [("cheetah: eval (30 episodes, mean action), 2 runs", "-", "o", [100])]
    ]
    assert len(fig.axes[0].collections) == 1  # the error bar


def test_a_panel_without_the_scores_asked_for_says_so(tmp_path):
    runs = [
        fake_run(tmp_path, "s0-cheetah", "cheetah", [(10, 1.0), (20, 2.0)]),
        fake_run(tmp_path, "s0-pendulum_fast", "pendulum_fast", [(10, 1.0), (20, 2.0)]),
    ]
    metrics = runs[1] / "metrics.jsonl"  # the pendulum run has no eval report
    lines = metrics.read_text().splitlines()
    metrics.write_text("".join(f"{line}\n" for line in lines if '"eval"' not in line))
    with pytest.warns(plot.PlotWarning) as caught:
        fig = plot.learning_curves(runs, phases=("eval",))
    assert [str(w.message) for w in caught] == [
        "Pendulum-v1: its runs hold no eval scores: the panel is empty"
    ]
    assert [len(panel) for panel in drawn_lines(fig)] == [1, 0]
    assert [t.get_text() for t in fig.axes[1].texts] == ["no scores"]
    with pytest.raises(UserError, match=r"^no eval scores to plot yet"):
        plot.learning_curves(runs[1:], phases=("eval",))


@pytest.mark.parametrize(("x", "phases"), [("steps", plot.PHASES), ("hours", ("eval",))])
def test_writes_a_grid_png(runs, tmp_path, x, phases):
    out = plot.plot_runs(runs, tmp_path / "figs" / "grid.png", x=x, phases=phases, columns=2)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(out).shape
    assert width == round(2 * 4.6 * 110)  # two panels in a row at 110 dpi
    assert height > round(3.4 * 110)  # one row of panels plus the legend below it


def test_the_legend_of_long_config_names_stays_inside_the_image(tmp_path):
    import matplotlib.image

    names = ["space_invaders_minatar-10M", "breakout_minatar-10M", "freeway_minatar-10M"]
    runs = [
        fake_run(tmp_path, f"s0-{name}", name.split("-")[0], [(10, 1.0), (20, 2.0)])
        for name in names
    ]
    out = plot.plot_runs(runs, tmp_path / "legend.png", columns=2)
    pixels = matplotlib.image.imread(out)[..., :3]
    # Six labels in two columns below the panels: the image's outer pixel columns stay blank.
    assert pixels[:, :2].min() == 1.0 and pixels[:, -2:].min() == 1.0


def test_bad_input(runs, tmp_path):
    with pytest.raises(UserError, match="panels='task': use env or config"):
        plot.group_runs(runs, panels="task")
    with pytest.raises(UserError, match=r"phases=\['mean'\]: choose from eval, train"):
        plot.plot_runs(runs, tmp_path / "a.png", phases=["mean"])
    (runs[0] / "config.yaml").unlink()
    with pytest.raises(RunDirError, match=r"holds no config\.yaml.*use --panels config"):
        plot.group_runs(runs)
    assert next(iter(plot.group_runs(runs, panels="config"))) == "cheetah_fast"


def results_file(path: Path, runs: list[tuple[str, str, float]]) -> Path:
    """An ``evaluate --json`` file of runs ``(group, env, mean return)``."""
    entries = [
        {"run_dir": f"l/T-x-s{i}", "env": env, "checkpoint": 1, "episodes": 1,
         "mean_return": score, "std_return": 0.0, "group": group}
        for i, (group, env, score) in enumerate(runs)
    ]  # fmt: skip
    path.write_text(json.dumps(entries))
    return path


def test_profile_groups_and_png(tmp_path):
    new = results_file(tmp_path / "new.json", [("a", "Hopper-v5", s) for s in (1.0, 2.0, 3.0)])
    old = tmp_path / "old.json"
    old.write_text(json.dumps([{k: v for k, v in e.items() if k != "group"}
                               for e in json.loads(new.read_text())]))  # fmt: skip
    groups = plot.profile_groups([new, old])
    assert list(groups) == ["a", "old"] and len(groups["a"]) == len(groups["old"]) == 3
    out = plot.plot_profile([new, old], tmp_path / "fig" / "profile.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_bad_input(tmp_path):
    mixed = results_file(
        tmp_path / "m.json", [("a", "Hopper-v5", 1.0), ("a", "Ant-v5", 2.0), ("a", "Ant-v5", 3.0)]
    )
    with pytest.raises(UserError, match=r"^group a spans 2 envs: .* for Ant-v5, Hopper-v5 "):
        plot.plot_profile([mixed], tmp_path / "p.png")
    refs = {"Hopper-v5": plot.stats.Reference(2.0), "Ant-v5": plot.stats.Reference(4.0)}
    with pytest.raises(UserError, match=r"^a confidence interval needs at least 2 runs"):
        plot.plot_profile([mixed], tmp_path / "p.png", refs)
    with pytest.raises(UserError, match=r"not a readable JSON file"):
        plot.plot_profile([tmp_path], tmp_path / "p.png")


def test_profile_from_the_command_line(tmp_path, capsys):
    from batchppo import cli

    path = results_file(tmp_path / "r.json", [("a", "Hopper-v5", s) for s in (1.0, 2.0)])
    out = tmp_path / "p.png"
    argv = ["plot", "--profile", str(path), "--reference", "Hopper-v5=2", "--out", str(out)]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == f"wrote {out}\n" and out.is_file()
    assert cli.main(["plot", str(path), "--reference", "sac-1m", "--out", str(out)]) == 2
    assert capsys.readouterr().err == "batchppo: error: --reference applies to --profile only\n"

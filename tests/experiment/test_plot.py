"""Learning-curve figures: grouping into panels and series, aggregation, the PNG, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from batchppo.experiment import configs, plot
from batchppo.experiment.errors import RunDirError, UserError


def fake_run(logdir: Path, name: str, preset: str, evals: list[tuple[int, float]]) -> Path:
    """A run dir with the preset's config.yaml and eval/train reports at the given steps."""
    run_dir = logdir / name
    run_dir.mkdir(parents=True)
    configs.save_config(configs.get_preset(preset), run_dir / "config.yaml")
    lines = []
    for step, score in evals:
        lines.append({"step": step, "phase": "train", "score": score - 1, "wall_time": step / 10})
        lines.append({"step": step, "phase": "eval", "score": score, "wall_time": step / 10})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run_dir


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
    xs, mean, std = plot.aggregate([run["eval"] for run in fast])
    np.testing.assert_array_equal(xs, [10, 20])
    np.testing.assert_array_equal(mean, [2.0, 4.0])
    np.testing.assert_array_equal(std, [1.0, 1.0])
    by_config = plot.group_runs(runs, panels="config")
    assert list(by_config) == ["cheetah_fast", "cheetah", "pendulum_fast"]


def test_hours_axis_reads_wall_time(runs):
    grouped = plot.group_runs(runs[:1], x="hours")
    np.testing.assert_array_equal(grouped["HalfCheetah-v5"]["cheetah_fast"][0]["train"][0], [1, 2])


def test_aggregate_interpolates_onto_the_shared_range():
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.0, 10.0, 20.0]))
    b = (np.array([5.0, 15.0]), np.array([0.0, 0.0]))
    xs, mean, _ = plot.aggregate([a, b])
    np.testing.assert_array_equal(xs, [5.0, 10.0, 15.0])
    np.testing.assert_array_equal(mean, [2.5, 5.0, 7.5])


@pytest.mark.parametrize(("x", "phases"), [("steps", plot.PHASES), ("hours", ("eval",))])
def test_writes_a_grid_png(runs, tmp_path, x, phases):
    out = plot.plot_runs(runs, tmp_path / "figs" / "grid.png", x=x, phases=phases, columns=2)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(out).shape
    assert width == round(2 * 4.6 * 110)  # two panels in a row at 110 dpi
    assert height > round(3.4 * 110)  # one row of panels plus the legend below it


def test_bad_input(runs, tmp_path):
    with pytest.raises(UserError, match="panels='task': use env or config"):
        plot.group_runs(runs, panels="task")
    with pytest.raises(UserError, match=r"phases=\['mean'\]: choose from eval, train"):
        plot.plot_runs(runs, tmp_path / "a.png", phases=["mean"])
    (runs[0] / "config.yaml").unlink()
    with pytest.raises(RunDirError, match=r"holds no config\.yaml.*use --panels config"):
        plot.group_runs(runs)
    assert next(iter(plot.group_runs(runs, panels="config"))) == "cheetah_fast"

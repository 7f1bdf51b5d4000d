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

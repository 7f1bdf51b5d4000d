"""Learning curves from run directories (like figures 1 and 2 of the Batch PPO paper).

Runs are grouped by config (the ``<config>`` suffix of ``<timestamp>-<config>``); each group
gets one panel with the eval score (mean action) and the train score (sampled actions) over
env steps or wall-clock hours: the mean over the group's runs as a line and their standard
deviation as a band (a single run is drawn as is).

Example:
    >>> plot_runs(["logdir/20261121T113000-pendulum_jax", "logdir/20261121T120000-pendulum_jax"],
    ...           "curves.png", x="hours")
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from batchppo.experiment.errors import RunDirError, UserError
from batchppo.experiment.logging import METRICS_FILE, read_metrics

PHASE_STYLE = {"eval": ("C0", "eval (mean action)"), "train": ("C1", "train")}


def run_group(run_dir: str | Path) -> str:
    """The config name of a run dir ``<timestamp>-<config>`` (the whole name if no dash)."""
    name = Path(run_dir).resolve().name
    return name.split("-", 1)[1] if "-" in name else name


def load_curves(run_dir: str | Path, x: str = "steps") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Score curves of one run by phase, as ``(x, score)`` sorted by x (NaN scores dropped).

    ``x`` is ``steps`` (training env steps) or ``hours``; the latter gives wall-clock seconds,
    scaled to a readable unit by :func:`plot_runs`.

    Raises:
        RunDirError: Missing directory or no ``metrics.jsonl``.
    """
    run_dir = Path(run_dir)
    if not (run_dir / METRICS_FILE).is_file():
        what = "does not exist" if not run_dir.exists() else f"holds no {METRICS_FILE}"
        raise RunDirError(f"run dir {run_dir} {what}")
    curves = {}
    for phase in PHASE_STYLE:
        points = [
            (r["step"] if x == "steps" else r.get("wall_time", math.nan), r.get("score"))
            for r in read_metrics(run_dir)
            if r.get("phase") == phase
        ]
        points = [(a, b) for a, b in points if b is not None and not math.isnan(a)]
        if points:
            xs, ys = np.array(sorted(points)).T
            curves[phase] = (xs, ys)
    return curves


def aggregate(
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and standard deviation of several curves on the x range they share.

    Each curve is linearly interpolated onto the union of their x values inside the shared
    range, so runs logged at different steps (or hours) still average point by point.

    Returns:
        ``(x, mean, std)``.
    """
    if len(curves) == 1:
        xs, ys = curves[0]
        return xs, ys, np.zeros_like(ys)
    lo = max(c[0][0] for c in curves)
    hi = min(c[0][-1] for c in curves)
    grid = np.unique(np.concatenate([c[0] for c in curves]))
    grid = grid[(grid >= lo) & (grid <= hi)]
    values = np.stack([np.interp(grid, xs, ys) for xs, ys in curves])
    return grid, values.mean(axis=0), values.std(axis=0)


def plot_runs(run_dirs: Sequence[str | Path], out: str | Path, x: str = "steps") -> Path:
    """Draws the learning curves of ``run_dirs`` into the PNG ``out``.

    Args:
        run_dirs: Run directories; runs of the same config are averaged.
        out: Output image path (``.png``).
        x: ``steps`` (training env steps) or ``hours`` (wall-clock time).

    Returns:
        The path written.

    Raises:
        UserError: Bad ``x``, missing run dirs or runs without any score yet.
    """
    if x not in ("steps", "hours"):
        raise UserError(f"x={x!r}: use steps or hours")
    groups: dict[str, list[dict[str, tuple[np.ndarray, np.ndarray]]]] = {}
    for run_dir in run_dirs:
        groups.setdefault(run_group(run_dir), []).append(load_curves(run_dir, x))
    if not any(curves for runs in groups.values() for curves in runs):
        raise UserError("no scores to plot yet: the runs' metrics.jsonl hold no reports")

    xlabel, scale = "env steps", 1.0
    if x == "hours":
        # Short runs read better in minutes or seconds than in thousandths of an hour.
        longest = max(c[0][-1] for runs in groups.values() for run in runs for c in run.values())
        xlabel, scale = next(
            (f"wall-clock {unit}", s)
            for unit, s, limit in (("seconds", 1, 120), ("minutes", 60, 7200), ("hours", 3600, 0))
            if longest < limit or s == 3600
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(groups), 3)
    rows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (name, runs) in zip(axes.flat, groups.items(), strict=False):
        for phase, (color, label) in PHASE_STYLE.items():
            curves = [run[phase] for run in runs if phase in run]
            if not curves:
                continue
            xs, mean, std = aggregate(curves)
            xs = xs / scale
            ax.plot(xs, mean, color=color, label=f"{label}, {len(curves)} run(s)")
            if len(curves) > 1:
                ax.fill_between(xs, mean - std, mean + std, color=color, alpha=0.25, lw=0)
        ax.set_title(name)
        ax.set_xlabel(xlabel)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
        ax.set_ylabel("score (mean episode return)")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

"""Learning curves from run directories, laid out like figures 1 and 2 of the Batch PPO paper.

Runs are grouped twice: into *panels* (by default one per environment, read from each run's
``config.yaml``; or one per config) and, inside a panel, into *series* by config (the
``<config>`` suffix of ``<timestamp>-<config>``). Each series draws the eval score (mean
action, solid) and the train score (sampled actions, dashed) over env steps or wall-clock
time: the mean over its runs as a line and their standard deviation as a band. A config keeps
its colour in every panel, and one legend below the grid names them all.

``plot_profile`` draws the performance profiles of runs evaluated by ``batchppo evaluate --json``
(the fraction of runs above each score, with bootstrap bands).

Examples:
    >>> plot_runs(glob("logdir/*-cheetah_fast") + glob("logdir/*-cheetah"), "curves.png")
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from batchppo.experiment import configs, stats
from batchppo.experiment.errors import RunDirError, UserError
from batchppo.experiment.logging import METRICS_FILE, read_metrics

PHASES = ("eval", "train")
PHASE_STYLE = {"eval": ("-", "eval (mean action)"), "train": ("--", "train (sampled)")}
PANELS = ("env", "config")
Curve = tuple[np.ndarray, np.ndarray]


def run_group(run_dir: str | Path) -> str:
    """The config name of a run dir ``<timestamp>-<config>`` (the whole name if no dash).

    The seed dirs ``<timestamp>-<config>-s<i>`` of a ``--seeds`` run group under ``<config>``.
    """
    name = Path(run_dir).resolve().name
    name = name.split("-", 1)[1] if "-" in name else name
    return re.sub(r"-s\d+$", "", name) or name


def load_curves(run_dir: str | Path, x: str = "steps") -> dict[str, Curve]:
    """Score curves of one run by phase, as ``(x, score)`` sorted by x (NaN scores dropped).

    ``x`` is ``steps`` (training env steps) or ``hours``; the latter gives wall-clock seconds,
    scaled to a readable unit by ``plot_runs``.

    Raises:
        RunDirError: Missing directory or no ``metrics.jsonl``.
    """
    run_dir = Path(run_dir)
    if not (run_dir / METRICS_FILE).is_file():
        what = "does not exist" if not run_dir.exists() else f"holds no {METRICS_FILE}"
        raise RunDirError(f"run dir {run_dir} {what}")
    curves = {}
    records = read_metrics(run_dir)
    for phase in PHASES:
        points = [
            (r["step"] if x == "steps" else r.get("wall_time", math.nan), r.get("score"))
            for r in records
            if r.get("phase") == phase
        ]
        points = [(a, b) for a, b in points if b is not None and not math.isnan(a)]
        points = [(a, b) for a, b in points if not math.isnan(b)]
        if points:
            xs, ys = np.array(sorted(points)).T
            curves[phase] = (xs, ys)
    return curves


def aggregate(curves: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def panel_key(run_dir: str | Path, panels: str) -> str:
    """The panel a run is drawn in: its env id (``panels="env"``) or its config name.

    Raises:
        RunDirError: ``panels="env"`` and the run has no readable ``config.yaml``.
    """
    if panels == "config":
        return run_group(run_dir)
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise RunDirError(
            f"{run_dir} holds no config.yaml, so its env is unknown; use --panels config"
        )
    return configs.load_config(path).env


def group_runs(
    run_dirs: Sequence[str | Path], x: str = "steps", panels: str = "env"
) -> dict[str, dict[str, list[dict[str, Curve]]]]:
    """Loads runs as ``{panel: {config: [curves of each run]}}``, in order of first appearance.

    Raises:
        UserError: Unknown ``panels``.
        RunDirError: A missing run dir or one without metrics (or config, for env panels).
    """
    if panels not in PANELS:
        raise UserError(f"panels={panels!r}: use {' or '.join(PANELS)}")
    grouped: dict[str, dict[str, list[dict[str, Curve]]]] = {}
    for run_dir in run_dirs:
        curves = load_curves(run_dir, x)
        series = grouped.setdefault(panel_key(run_dir, panels), {})
        series.setdefault(run_group(run_dir), []).append(curves)
    return grouped


def _time_unit(grouped: dict[str, dict[str, list[dict[str, Curve]]]]) -> tuple[str, float]:
    # Short runs read better in minutes or seconds than in thousandths of an hour.
    longest = max(
        c[0][-1] for series in grouped.values() for runs in series.values()
        for run in runs for c in run.values()
    )  # fmt: skip
    for unit, seconds, limit in (("seconds", 1, 120), ("minutes", 60, 7200)):
        if longest < limit:
            return f"wall-clock {unit}", seconds
    return "wall-clock hours", 3600


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    x: str = "steps",
    panels: str = "env",
    phases: Sequence[str] = PHASES,
    columns: int = 3,
) -> Path:
    """Draws the learning curves of ``run_dirs`` into the PNG ``out``.

    Args:
        run_dirs: Run directories; runs of the same config are averaged (mean and std).
        out: Output image path (``.png``).
        x: ``steps`` (training env steps) or ``hours`` (wall-clock time).
        panels: ``env`` (one panel per environment, configs side by side in it) or
            ``config`` (one panel per config).
        phases: Which curves to draw: ``eval`` (mean action) and/or ``train`` (sampled).
        columns: Panels per row.

    Returns:
        The path written.

    Raises:
        UserError: Bad ``x``, ``panels`` or ``phases``, or runs without any score yet.
        RunDirError: Missing run dirs.
    """
    if x not in ("steps", "hours"):
        raise UserError(f"x={x!r}: use steps or hours")
    unknown = sorted(set(phases) - set(PHASES))
    if unknown or not phases:
        raise UserError(f"phases={list(phases)!r}: choose from {', '.join(PHASES)}")
    if columns < 1:
        raise UserError(f"columns={columns}: must be >= 1")
    grouped = group_runs(run_dirs, x, panels)
    if not any(run for series in grouped.values() for runs in series.values() for run in runs):
        raise UserError("no scores to plot yet: the runs' metrics.jsonl hold no reports")
    xlabel, scale = ("env steps", 1.0) if x == "steps" else _time_unit(grouped)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(name for series in grouped.values() for name in series))
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}
    cols = min(len(grouped), columns)
    rows = math.ceil(len(grouped) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    legend: dict[str, object] = {}
    for ax, (title, series) in zip(axes.flat, grouped.items(), strict=False):
        for name, runs in series.items():
            for phase in phases:
                curves = [run[phase] for run in runs if phase in run]
                if not curves:
                    continue
                xs, mean, std = aggregate(curves)
                xs = xs / scale
                style, what = PHASE_STYLE[phase]
                label = f"{name}: {what}, {len(curves)} run{'s' * (len(curves) > 1)}"
                (line,) = ax.plot(xs, mean, style, color=colors[name], lw=1.4)
                legend.setdefault(label, line)
                if len(curves) > 1:
                    ax.fill_between(xs, mean - std, mean + std, color=colors[name], alpha=0.2, lw=0)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(grouped) :]:
        ax.set_visible(False)
    # One legend column per column of panels: a label ("config: eval (mean action), 3 runs")
    # takes about a panel's width, so more legend columns than panels run off the image.
    ncol = min(len(legend), cols)
    fig.legend(
        list(legend.values()), list(legend), loc="lower center", ncol=ncol, fontsize="small",
        frameon=False,
    )  # fmt: skip
    # Room below the panels for the legend: about a fifth of an inch per legend row.
    legend_inches = 0.15 + 0.2 * math.ceil(len(legend) / ncol)
    fig.set_figheight(3.4 * rows + legend_inches)
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


PROFILE_RESAMPLES = 2000
"""Bootstrap resamples of a performance profile's bands."""
PROFILE_POINTS = 101
"""Thresholds ``tau`` a profile is drawn at, evenly spaced over the scores' range."""


def profile_groups(result_files: Sequence[str | Path]) -> dict[str, list[dict]]:
    """Runs of ``evaluate --json`` files by curve: each entry's ``group``, else its file's
    name; in order of first appearance."""
    from batchppo.experiment.evaluate import load_results

    groups: dict[str, list[dict]] = {}
    for path in result_files:
        for entry in load_results(path):
            groups.setdefault(entry.get("group") or Path(path).stem, []).append(entry)
    return groups


def plot_profile(
    result_files: Sequence[str | Path],
    out: str | Path,
    references: Mapping[str, stats.Reference] | None = None,
) -> Path:
    """Draws the performance profiles of evaluated runs into the PNG ``out``.

    A profile is the fraction of runs whose score (``mean_return``, normalised by its env's
    reference where references are given) exceeds each threshold, averaged over envs, with a
    95 % stratified-bootstrap band (Agarwal et al. 2021).

    Args:
        result_files: Files written by ``batchppo evaluate --json``.
        out: Output image path (``.png``).
        references: Reference scores by env; needed when the runs span several envs.

    Returns:
        The path written.

    Raises:
        UserError: Files that are not ``evaluate --json`` files, runs of several envs without
            references, or a group with fewer than 2 runs of an env.
    """
    from batchppo.experiment.evaluate import missing_references

    references = dict(references or {})
    groups = profile_groups(result_files)
    envs = sorted({r["env"] for runs in groups.values() for r in runs})
    for name in groups:
        problem = missing_references(name, envs, references)
        if problem is not None:
            raise UserError(problem)
    normalized = all(env in references for env in envs)
    scores = {}
    for name, runs in groups.items():
        by_env: dict[str, list[float]] = {}
        for r in runs:
            by_env.setdefault(r["env"], []).append(float(r["mean_return"]))
        raw = {env: np.asarray(v, np.float64) for env, v in by_env.items()}
        scores[name] = stats.normalize_scores(raw, references) if normalized else raw
    values = np.concatenate([v for s in scores.values() for v in s.values()])
    taus = np.linspace(min(values.min(), 0.0), values.max(), PROFILE_POINTS)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for i, (name, group_scores) in enumerate(scores.items()):
        profile = stats.performance_profile(group_scores, taus, resamples=PROFILE_RESAMPLES)
        runs = len(groups[name])
        ax.plot(taus, profile.value, color=f"C{i % 10}", lw=1.6, label=f"{name} ({runs} runs)")
        ax.fill_between(taus, profile.low, profile.high, color=f"C{i % 10}", alpha=0.2, lw=0)
    what = "normalised score" if normalized else f"{envs[0]} return"
    ax.set_xlabel(f"{what} (τ)")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", frameon=False)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

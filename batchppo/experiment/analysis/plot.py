"""Learning curves from run directories, laid out like figures 1 and 2 of the Batch PPO paper.

Runs are grouped twice: into *panels* (by default one per environment, read from each run's
``config.yaml``; or one per config) and, inside a panel, into *series* by config (the
``<config>`` suffix of ``<timestamp>-<config>``). Each series draws the eval score (solid) and
the train score (sampled actions, dashed) over env steps or wall-clock time: the mean over its
runs as a line and their standard deviation as a band. An eval curve's label names its protocol,
from the run's config (``eval_actions``, ``eval_episodes``: "eval (10 episodes, sampled
actions)"); the runs of a config evaluated by different protocols are not averaged together but
drawn as separate curves (dash-dotted, dotted), with a ``PlotWarning``. Runs that share no stretch
of the x-axis are drawn one by one, with a ``PlotWarning``, rather than averaged into nothing; a
curve of one point is drawn as a marker. A config keeps its colour in every panel, and one legend
below the grid names them all. ``curve_series`` returns what a figure draws.

``plot_profile`` draws the performance profiles of runs evaluated by ``batchppo evaluate --json``
(the fraction of runs above each score, with bootstrap bands).

Examples:
    >>> plot_runs(glob("logdir/*-cheetah_fast") + glob("logdir/*-cheetah"), "curves.png")
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from batchppo.experiment.analysis import stats
from batchppo.experiment.artifacts.eval_protocol import EvalProtocol
from batchppo.experiment.artifacts.logging import METRICS_FILE, read_metrics
from batchppo.experiment.config import configs
from batchppo.experiment.errors import RunDirError, UserError
from batchppo.experiment.fileio import jsonl_exists

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PHASES = ("eval", "train")
TRAIN_LABEL = "train (sampled actions)"
"""What a train curve is, as its legend says (train reports score the training episodes)."""
TRAIN_STYLE = "--"
EVAL_STYLES = ("-", "-.", ":")
"""Line styles of a config's eval curves in a panel: one per protocol its runs were evaluated by."""
PANELS = ("env", "config")
LEGEND_CHARS = 64
"""Characters per line of a legend entry: a line fits in a panel's width."""
Curve = tuple[np.ndarray, np.ndarray]


class PlotWarning(UserWarning):
    """A figure draws runs otherwise than averaged: runs that share no stretch of the x-axis one
    by one, runs evaluated by different protocols as separate curves, or a panel with nothing to
    draw."""


@dataclasses.dataclass(frozen=True)
class RunCurves:
    """One run's score curves and how its eval scores were measured.

    Attributes:
        run_dir: The run directory.
        curves: ``(x, score)`` by phase (``load_curves``).
        protocol: The protocol of its eval scores, from its ``config.yaml`` (else its last eval
            report); None for a run with neither.
    """

    run_dir: Path
    curves: dict[str, Curve]
    protocol: EvalProtocol | None


@dataclasses.dataclass(frozen=True)
class Series:
    """One curve of a panel, as ``plot_runs`` draws it.

    Attributes:
        config: The config it belongs to (its colour).
        phase: ``eval`` or ``train``.
        label: Its legend entry.
        x: Its x values, in the axis' unit.
        y: The mean score over its runs at each x.
        std: Their standard deviation (a band); None for a curve of one run.
        style: Its line style.
        marker: ``"o"`` for a curve of one point, which a line alone would not show; else None.
    """

    config: str
    phase: str
    label: str
    x: np.ndarray
    y: np.ndarray
    std: np.ndarray | None
    style: str
    marker: str | None


def run_group(run_dir: str | Path) -> str:
    """The config name of a run dir ``<timestamp>-<config>`` (the whole name if no dash).

    The seed dirs ``<timestamp>-<config>-s<i>`` of a ``--seeds`` run group under ``<config>``.
    """
    name = Path(run_dir).resolve().name
    name = name.split("-", 1)[1] if "-" in name else name
    return re.sub(r"-s\d+$", "", name) or name


def _checked_records(run_dir: Path) -> list[dict[str, Any]]:
    if not jsonl_exists(run_dir / METRICS_FILE):
        what = "does not exist" if not run_dir.exists() else f"holds no {METRICS_FILE}"
        raise RunDirError(f"run dir {run_dir} {what}")
    return read_metrics(run_dir)


def _curves(records: Sequence[Mapping[str, Any]], x: str) -> dict[str, Curve]:
    curves = {}
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


def load_curves(run_dir: str | Path, x: str = "steps") -> dict[str, Curve]:
    """Score curves of one run by phase, as ``(x, score)`` sorted by x (NaN scores dropped).

    ``x`` is ``steps`` (training env steps) or ``hours``; the latter gives wall-clock seconds,
    scaled to a readable unit by ``plot_runs``.

    Raises:
        RunDirError: Missing directory or no ``metrics.jsonl``.
    """
    return _curves(_checked_records(Path(run_dir)), x)


def eval_protocol(run_dir: str | Path, records: Sequence[Mapping[str, Any]]) -> EvalProtocol | None:
    """How a run's eval scores were measured: its ``config.yaml``'s ``eval_actions`` and
    ``eval_episodes``; without one, its last eval report's; None without either."""
    path = Path(run_dir) / "config.yaml"
    if path.is_file():
        return EvalProtocol.of_config(configs.load_config(path))
    evals = [r for r in records if r.get("phase") == "eval"]
    return EvalProtocol.of_record(evals[-1]) if evals else None


def load_run_curves(run_dir: str | Path, x: str = "steps") -> RunCurves:
    """A run's curves (``load_curves``) and its eval protocol (``eval_protocol``).

    Raises:
        RunDirError: Missing directory or no ``metrics.jsonl``.
    """
    records = _checked_records(Path(run_dir))
    return RunCurves(Path(run_dir), _curves(records, x), eval_protocol(run_dir, records))


def can_average(curves: Sequence[Curve]) -> bool:
    """Whether ``aggregate`` has a stretch of x to average ``curves`` over: one curve; or a
    range that every curve covers, of two points or more where any curve has two."""
    if len(curves) == 1:
        return True
    lo = max(c[0][0] for c in curves)
    hi = min(c[0][-1] for c in curves)
    return lo < hi or (lo == hi and all(c[0].size == 1 for c in curves))


def aggregate(curves: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and standard deviation of several curves on the x range they share.

    Each curve is linearly interpolated onto the union of their x values inside the shared
    range, so runs logged at different steps (or hours) still average point by point. Curves
    that share no range (``can_average``) give empty arrays.

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


Grouped = dict[str, dict[str, list[RunCurves]]]


def group_runs(run_dirs: Sequence[str | Path], x: str = "steps", panels: str = "env") -> Grouped:
    """Loads runs as ``{panel: {config: [RunCurves of each run]}}``, in order of first
    appearance.

    Raises:
        UserError: Unknown ``panels``.
        RunDirError: A missing run dir or one without metrics (or config, for env panels).
    """
    if panels not in PANELS:
        raise UserError(f"panels={panels!r}: use {' or '.join(PANELS)}")
    grouped: Grouped = {}
    for run_dir in run_dirs:
        run = load_run_curves(run_dir, x)
        series = grouped.setdefault(panel_key(run_dir, panels), {})
        series.setdefault(run_group(run_dir), []).append(run)
    return grouped


def _time_unit(grouped: Grouped) -> tuple[str, float]:
    # Short runs read better in minutes or seconds than in thousandths of an hour.
    longest = max(
        c[0][-1] for series in grouped.values() for runs in series.values()
        for run in runs for c in run.curves.values()
    )  # fmt: skip
    for unit, seconds, limit in (("seconds", 1, 120), ("minutes", 60, 7200)):
        if longest < limit:
            return f"wall-clock {unit}", seconds
    return "wall-clock hours", 3600


def _runs(n: int) -> str:
    return f"{n} run{'s' * (n != 1)}"


class _Curves(NamedTuple):
    """The curves of one phase of a config's runs that are averaged together."""

    what: str  # the phase, as the legend names it
    style: str
    curves: list[Curve]
    protocol: str | None  # of eval curves: their protocol in words (None: not known)


def _phase_curves(runs: Sequence[RunCurves], phase: str) -> list[_Curves]:
    """A config's curves of ``phase``, the eval curves split by protocol (in order of first
    appearance); only those with a curve."""
    if phase == "train":
        curves = [r.curves["train"] for r in runs if "train" in r.curves]
        return [_Curves(TRAIN_LABEL, TRAIN_STYLE, curves, None)] if curves else []
    by_protocol: dict[str | None, list[Curve]] = {}
    for run in runs:
        if "eval" in run.curves:
            key = None if run.protocol is None else str(run.protocol)
            by_protocol.setdefault(key, []).append(run.curves["eval"])
    return [
        _Curves("eval" if key is None else f"eval ({key})", EVAL_STYLES[i % len(EVAL_STYLES)],
                curves, key)
        for i, (key, curves) in enumerate(by_protocol.items())
    ]  # fmt: skip


def _config_series(
    panel: str, name: str, runs: Sequence[RunCurves], phase: str, x: str, scale: float,
    notes: list[str],
) -> list[Series]:  # fmt: skip
    """The series of one config's runs and phase in a panel; what is not averaged, in ``notes``."""
    subsets = _phase_curves(runs, phase)
    if len(subsets) > 1:
        found = "; ".join(f"{s.protocol or 'unknown'}: {_runs(len(s.curves))}" for s in subsets)
        notes.append(
            f"{panel}: the runs of {name} were evaluated by {len(subsets)} protocols ({found}): "
            "their eval curves are drawn apart, not averaged together"
        )
    out = []
    for what, style, curves, _ in subsets:
        n = len(curves)
        if can_average(curves):
            xs, mean, std = aggregate(curves)
            out.append(Series(
                name, phase, f"{name}: {what}, {_runs(n)}", xs / scale, mean,
                std if n > 1 else None, style, "o" if xs.size == 1 else None,
            ))  # fmt: skip
            continue
        stretch = "steps" if x == "steps" else "time"
        notes.append(
            f"{panel}: the {n} runs of {name} share no {stretch} for their {phase} curves, so "
            "there is nothing to average: they are drawn one by one"
        )
        label = f"{name}: {what}, {_runs(n)} drawn one by one (no common {stretch})"
        out += [
            Series(name, phase, label, xs / scale, ys, None, style, "o" if xs.size == 1 else None)
            for xs, ys in curves
        ]
    return out


def curve_series(
    grouped: Grouped, phases: Sequence[str] = PHASES, x: str = "steps", scale: float = 1.0
) -> tuple[dict[str, list[Series]], list[str]]:
    """What ``plot_runs`` draws of ``group_runs``' runs.

    Args:
        grouped: Runs by panel and config (``group_runs``).
        phases: The curves to draw, ``eval`` and/or ``train``.
        x: ``steps`` or ``hours``, as the runs were loaded.
        scale: x values are divided by it (seconds per unit of the time axis).

    Returns:
        The series of each panel, in order; and the notes on what is not drawn averaged (runs
        evaluated by different protocols, runs without common steps) or not drawn at all (a
        panel without such scores), one line each.
    """
    panels: dict[str, list[Series]] = {}
    notes: list[str] = []
    for panel, series in grouped.items():
        drawn = panels[panel] = []
        for name, runs in series.items():
            for phase in phases:
                drawn += _config_series(panel, name, runs, phase, x, scale, notes)
        if not drawn:
            notes.append(
                f"{panel}: its runs hold no {' or '.join(phases)} scores: the panel is empty"
            )
    return panels, notes


def learning_curves(
    run_dirs: Sequence[str | Path],
    x: str = "steps",
    panels: str = "env",
    phases: Sequence[str] = PHASES,
    columns: int = 3,
) -> Figure:
    """The figure ``plot_runs`` saves (its arguments but ``out``); each note of
    ``curve_series`` is a ``PlotWarning``.

    Returns:
        The matplotlib figure: a panel's curves are its axes' lines, each labelled as its legend
        entry (``Series.label``); the caller closes it (``matplotlib.pyplot.close``).

    Raises:
        UserError: As ``plot_runs``.
        RunDirError: As ``plot_runs``.
    """
    if x not in ("steps", "hours"):
        raise UserError(f"x={x!r}: use steps or hours")
    unknown = sorted(set(phases) - set(PHASES))
    if unknown or not phases:
        raise UserError(f"phases={list(phases)!r}: choose from {', '.join(PHASES)}")
    if columns < 1:
        raise UserError(f"columns={columns}: must be >= 1")
    grouped = group_runs(run_dirs, x, panels)
    if not any(
        phase in run.curves for series in grouped.values() for runs in series.values()
        for run in runs for phase in phases
    ):  # fmt: skip
        raise UserError(
            f"no {' or '.join(phases)} scores to plot yet: the runs' metrics.jsonl hold no such "
            "reports"
        )
    xlabel, scale = ("env steps", 1.0) if x == "steps" else _time_unit(grouped)
    drawn, notes = curve_series(grouped, phases, x, scale)
    for note in notes:
        warnings.warn(note, PlotWarning, stacklevel=3)
    return _draw(drawn, xlabel, columns)


def _draw(drawn: Mapping[str, Sequence[Series]], xlabel: str, columns: int) -> Figure:
    """The figure of ``curve_series``' panels: a grid of them, one legend below it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(s.config for series in drawn.values() for s in series))
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}
    cols = min(len(drawn), columns)
    rows = math.ceil(len(drawn) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    legend: dict[str, object] = {}
    for ax, (title, series) in zip(axes.flat, drawn.items(), strict=False):
        for s in series:
            color = colors[s.config]
            (line,) = ax.plot(s.x, s.y, s.style, color=color, lw=1.4, marker=s.marker,
                              label=s.label)  # fmt: skip
            legend.setdefault(s.label, line)
            if s.std is not None and s.x.size > 1:
                ax.fill_between(s.x, s.y - s.std, s.y + s.std, color=color, alpha=0.2, lw=0)
            elif s.std is not None:  # one point: its spread as an error bar
                ax.errorbar(s.x, s.y, yerr=s.std, fmt="none", ecolor=color, alpha=0.5)
        if not series:
            ax.text(0.5, 0.5, "no scores", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    # One legend column per column of panels: a label ("config: eval (10 episodes, sampled
    # actions), 3 runs") takes about a panel's width, so more legend columns than panels run
    # off the image, and a longer one is wrapped onto more lines.
    ncol = max(1, min(len(legend), cols))
    labels = [textwrap.fill(label, LEGEND_CHARS) for label in legend]
    fig.legend(
        list(legend.values()), labels, loc="lower center", ncol=ncol, fontsize="small",
        frameon=False,
    )  # fmt: skip
    # Room below the panels for the legend: about a fifth of an inch per line of text.
    lines = max(label.count("\n") + 1 for label in labels) if labels else 1
    legend_inches = 0.15 + 0.2 * lines * math.ceil(len(legend) / ncol)
    fig.set_figheight(3.4 * rows + legend_inches)
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    return fig


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    x: str = "steps",
    panels: str = "env",
    phases: Sequence[str] = PHASES,
    columns: int = 3,
) -> Path:
    """Draws the learning curves of ``run_dirs`` into the PNG ``out``.

    Runs drawn otherwise than averaged, or a panel with nothing to draw, each give a
    ``PlotWarning`` that says why (``curve_series``).

    Args:
        run_dirs: Run directories; runs of the same config (and eval protocol) are averaged
            (mean and std) over the x range they share.
        out: Output image path (``.png``).
        x: ``steps`` (training env steps) or ``hours`` (wall-clock time).
        panels: ``env`` (one panel per environment, configs side by side in it) or
            ``config`` (one panel per config).
        phases: Which curves to draw: ``eval`` (as each run's ``eval_actions`` and
            ``eval_episodes`` say, which the legend names) and/or ``train`` (sampled actions).
        columns: Panels per row.

    Returns:
        The path written.

    Raises:
        UserError: Bad ``x``, ``panels`` or ``phases``, or runs without any such score yet.
        RunDirError: Missing run dirs.
    """
    fig = learning_curves(run_dirs, x, panels, phases, columns)
    import matplotlib.pyplot as plt

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
    from batchppo.experiment.analysis.evaluate import load_results

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
    from batchppo.experiment.analysis.evaluate import missing_references

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

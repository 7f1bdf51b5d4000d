"""The ways papers and libraries score a trained agent, each computed from our own runs.

A comparison with a peer is like for like only when both sides are scored by the peer's
protocol. The protocols met in the PPO literature differ in what they average:

* ``final-mean``: the final policy's episodes with the mean (deterministic) action;
  rl-baselines3-zoo's benchmark and our own headline figures (``batchppo evaluate``).
* ``final-sampled``: the final policy's episodes with sampled actions, as it trained
  (``batchppo evaluate --sample``).
* ``training-window-exact``: the mean return of a run's last N training episodes, sampled
  actions from the policies of the run's last updates; CleanRL's benchmark tables (the mean of
  its ``charts/episodic_return`` over the last 100 episodes) and the PPO paper (Schulman et al.
  2017). `training_window` reads exactly those N episodes from the run's ``episodes.jsonl``
  (``batchppo.experiment.artifacts.episode_log``), without running anything; over Atari envs it
  takes the last N whole games (all lives, raw score), as CleanRL's ``episodic_return`` there counts
  the games (its ``RecordEpisodeStatistics`` wraps the env inside the life-loss and clipping
  wrappers, ``cleanrl/ppo_atari.py``).
* ``training-window-approx``: the same window read from the train reports of ``metrics.jsonl``,
  for run dirs from before ``episodes.jsonl``: a report keeps only the mean of its episodes, so
  the window's oldest episodes enter at their report's mean. Results files written before the
  two were told apart name it ``training-window``.
* ``max-eval-mean``: the highest, over a group's evaluation points, of the mean over its seeds
  of each periodic evaluation; Tianshou's MuJoCo benchmark (10 seeds, 10 test episodes each,
  the maximum within the first 1M steps), after the TD3 paper's method.
  `max_eval_mean` reads it from the runs' eval reports.

Each protocol's entry says the statistic, the action mode and the episodes, as a results
table must state them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.experiment.analysis.plot import run_group
from batchppo.experiment.artifacts.episode_log import EPISODES_FILE, read_episodes
from batchppo.experiment.artifacts.logging import METRICS_FILE, read_metrics
from batchppo.experiment.artifacts.rundir import open_run_dir
from batchppo.experiment.errors import UserError
from batchppo.experiment.fileio import jsonl_exists


@dataclasses.dataclass(frozen=True)
class ScoringProtocol:
    """How one score is measured.

    Attributes:
        name: The protocol's key (``batchppo evaluate`` writes it into every result).
        statistic: What one run's score is.
        actions: ``mean`` or ``sampled``.
        used_by: Who reports scores this way.
    """

    name: str
    statistic: str
    actions: str
    used_by: str


PROTOCOLS: dict[str, ScoringProtocol] = {
    p.name: p
    for p in (
        ScoringProtocol(
            "final-mean", "mean return of the final policy's evaluation episodes", "mean",
            "rl-baselines3-zoo (deterministic evaluation); batchppo's own tables",
        ),
        ScoringProtocol(
            "final-sampled", "mean return of the final policy's evaluation episodes",
            "sampled", "batchppo evaluate --sample",
        ),
        ScoringProtocol(
            "training-window-exact", "mean return of the run's last N training episodes "
            "(Atari: whole games)", "sampled",
            "CleanRL's benchmarks and the PPO paper (last 100 episodes)",
        ),
        ScoringProtocol(
            "training-window-approx", "mean return of the run's last N training episodes, "
            "the oldest at their train report's mean", "sampled",
            "batchppo evaluate --training-window on run dirs without episodes.jsonl",
        ),
        ScoringProtocol(
            "max-eval-mean", "maximum over evaluation points of the mean over seeds of each "
            "periodic evaluation", "as the runs' evaluations (eval_actions)",
            "Tianshou's MuJoCo benchmark (10 seeds, first 1M steps)",
        ),
    )
}  # fmt: skip
"""Every protocol by name."""


def _records(run_dir: str | Path) -> list[dict[str, Any]]:
    """The reports of a run dir, or a one-line error for a dir that is not a run's."""
    path = Path(run_dir)
    if not jsonl_exists(path / METRICS_FILE):
        what = "does not exist" if not path.exists() else f"holds no {METRICS_FILE}"
        raise UserError(f"run dir {run_dir} {what}")
    return read_metrics(path)


class ApproximateWindowWarning(UserWarning):
    """A training window read from a run's train reports: the run dir has no
    ``episodes.jsonl``, so the window is ``training-window-approx``."""


def training_window(run_dir: str | Path, episodes: int = 100) -> dict[str, Any]:
    """The mean return of a run's last ``episodes`` training episodes (sampled actions).

    Exactly those episodes where the run dir has ``episodes.jsonl`` (``training-window-exact``;
    over Atari envs, the last whole games: see the module docstring). A run dir from before
    that file gets the approximation from its train reports (``training-window-approx``,
    ``approximate_window``), with an ``ApproximateWindowWarning``.

    Args:
        run_dir: A run directory written by ``batchppo train``.
        episodes: How many of the last training episodes (>= 1).

    Returns:
        A results entry as ``batchppo evaluate`` writes: ``run_dir``, ``env``, ``preset``,
        ``seed``, ``first_step`` and ``checkpoint`` (the steps of the window's first and last
        episodes; approximated: of its first and last reports), ``episodes``,
        ``mean_return``, ``std_return`` (the population std of the episodes' returns) and
        ``stderr_return`` (of their mean; both None where approximated) and ``protocol``; the
        exact window adds ``unit`` (``episodes`` or ``games``), ``returns``, and for episodes
        ``mean_length`` and ``terminated_fraction``; the approximate one ``first_episodes``.

    Raises:
        UserError: ``episodes`` < 1, a missing run dir, or a run with fewer training episodes
            than asked.
    """
    if episodes < 1:
        raise UserError(f"--training-window {episodes}: must be >= 1")
    train = [r for r in _records(run_dir) if r.get("phase") == "train"]
    config, _ = open_run_dir(run_dir)
    head = {"run_dir": str(run_dir), "env": config.env, "preset": run_group(run_dir),
            "seed": config.seed}  # fmt: skip
    if jsonl_exists(Path(run_dir) / EPISODES_FILE):
        return {**head, **exact_window(read_episodes(run_dir), episodes, run_dir)}
    warnings.warn(
        f"{run_dir} has no {EPISODES_FILE} (a run from before it): its last {episodes} training "
        "episodes are approximated from its train reports' means (training-window-approx)",
        ApproximateWindowWarning,
        stacklevel=2,
    )
    return {**head, **approximate_window(train, episodes, run_dir)}


def exact_window(
    records: Sequence[dict[str, Any]], episodes: int, run_dir: str | Path
) -> dict[str, Any]:
    """The last ``episodes`` episodes of a run's ``episodes.jsonl`` records, or its last games
    where it records games (Atari): their mean return and spread (``training_window``).

    Raises:
        UserError: Fewer episodes (games) recorded than asked.
    """
    games = [r for r in records if "game_score" in r]
    unit = "games" if games else "episodes"
    window = (games or [r for r in records if "return" in r])[-episodes:]
    if len(window) < episodes:
        raise UserError(
            f"{run_dir}: its {EPISODES_FILE} holds {len(window)} {unit}, fewer than the "
            f"{episodes} asked (--training-window)"
        )
    key = "game_score" if games else "return"
    # Returns were float32 on the device: read back as exactly those values.
    dtype = np.float64 if games else np.float32
    returns = np.array([_number(r[key]) for r in window], dtype).astype(np.float64)
    std = float(returns.std())
    entry = {
        "first_step": int(window[0]["step"]),
        "checkpoint": int(window[-1]["step"]),
        "episodes": episodes,
        "unit": unit,
        "mean_return": float(returns.mean()),
        "std_return": std,
        "stderr_return": std / math.sqrt(episodes),
        "returns": returns.tolist(),
        "protocol": "training-window-exact",
    }
    if not games:
        entry["mean_length"] = float(np.mean([r["length"] for r in window]))
        entry["terminated_fraction"] = float(np.mean([r["terminated"] for r in window]))
    return entry


def _number(value: float | None) -> float:
    """A record's number; nan for the null that stands for a non-finite one."""
    return math.nan if value is None else float(value)


def approximate_window(
    train: Sequence[dict[str, Any]], episodes: int, run_dir: str | Path
) -> dict[str, Any]:
    """The last ``episodes`` episodes as a run's train reports hold them (``training_window``).

    A train report holds the mean return and the number of the episodes that ended since the
    report before. The window holds exactly ``episodes`` episodes: the run's last reports
    whole, and from the report before them the episodes still missing, which enter at that
    report's mean; ``first_episodes`` (``[taken, held]``) says how many of that report's
    episodes were taken, of how many.

    Raises:
        UserError: Fewer episodes in the reports than asked.
    """
    reports = [r for r in train if r.get("episodes") and r.get("score") is not None]
    held, total, first, taken = 0, 0.0, 0, None
    for record in reversed(reports):
        count = int(record["episodes"])
        taken = [min(count, episodes - held), count]
        held += taken[0]
        total += float(record["score"]) * taken[0]
        first = int(record["step"])
        if held == episodes:
            break
    if held < episodes:
        raise UserError(
            f"{run_dir}: its training reports hold {held} episodes, fewer than the "
            f"{episodes} asked (--training-window)"
        )
    return {
        "first_step": first,
        "checkpoint": int(reports[-1]["step"]),
        "first_episodes": taken,
        "episodes": held,
        "mean_return": total / held,
        "std_return": None,
        "stderr_return": None,
        "protocol": "training-window-approx",
    }


def max_eval_mean(run_dirs: Sequence[str | Path], max_step: int | None = None) -> dict[str, Any]:
    """The maximum over evaluation points of the mean over runs of their eval scores.

    The runs (the seeds of one preset) must share their evaluation steps; only the steps that
    every run evaluated count, up to ``max_step``.

    Args:
        run_dirs: Run directories of one task (at least 1).
        max_step: Only evaluations at or before this env step (None: all).

    Returns:
        ``value`` (the maximum), ``step`` (where it is reached), ``std`` (the population std
        over runs of their scores at that step), ``runs``, ``points`` (evaluation steps
        compared), ``episodes`` (episodes per evaluation, as the runs' reports say),
        ``actions`` (how the evaluations acted: ``mean`` or ``sampled``) and ``protocol``
        (``"max-eval-mean"``).

    Raises:
        UserError: No run, a missing run dir, runs evaluated with different actions, or no
            evaluation step that every run shares.
    """
    if not run_dirs:
        raise UserError("max-eval-mean needs at least one run dir")
    by_step: list[dict[int, float]] = []
    episodes, actions = set(), set()
    for run_dir in run_dirs:
        evals = [r for r in _records(run_dir) if r.get("phase") == "eval"]
        evals = [r for r in evals if r.get("score") is not None and not math.isnan(r["score"])]
        by_step.append({int(r["step"]): float(r["score"]) for r in evals})
        episodes.update(int(r["episodes"]) for r in evals if r.get("episodes"))
        # Eval reports written before `eval_actions` existed acted with the mean action.
        actions.update(r.get("actions", "mean") for r in evals)
    if len(actions) > 1:
        raise UserError(
            f"the {len(run_dirs)} runs' evaluations act differently "
            f"({' and '.join(sorted(actions))} actions): max-eval-mean compares runs evaluated "
            "alike; set one eval_actions"
        )
    steps = sorted(set.intersection(*(set(s) for s in by_step)))
    steps = [s for s in steps if max_step is None or s <= max_step]
    if not steps:
        raise UserError(
            f"the {len(run_dirs)} runs share no evaluation step"
            + (f" up to step {max_step:,}" if max_step is not None else "")
            + ": max-eval-mean compares runs evaluated at the same steps"
        )
    scores = np.array([[s[step] for s in by_step] for step in steps])  # (steps, runs)
    means = scores.mean(axis=1)
    best = int(np.argmax(means))
    return {
        "value": float(means[best]),
        "step": steps[best],
        "std": float(scores[best].std()),
        "runs": len(run_dirs),
        "points": len(steps),
        "episodes": sorted(episodes),
        "actions": actions.pop() if actions else None,
        "protocol": "max-eval-mean",
    }

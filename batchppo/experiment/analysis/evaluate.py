"""Evaluation of a saved run: many episodes of its policy, without videos.

The training evals of a run use ``eval_episodes`` episodes (10 for the ``*_fast`` MuJoCo presets),
enough to follow a curve but not to tell two final policies apart on a task whose returns vary a
lot from episode to episode (Reacher's targets are random). ``evaluate_run`` restores a checkpoint
and runs the run's own evaluator (the same eval env and backend as the training evals) from a key
of its own, and reports the episodes' mean, spread and standard error, with the task metrics the
eval env's infos carry (``batchppo.envs.episode_metrics.TASK_METRICS``: forward velocity and
distance on MuJoCo's locomotion tasks) and the fraction of episodes that ended in a terminal state
(a fall, on the tasks that end episodes on unhealthy states). By default it scores by the run's own
evaluation protocol (``eval_actions``, ``eval_episodes``: ``run_protocol``); the number of
episodes and the action mode can each be given instead.

``group_statistics`` aggregates the runs of one or two groups with ``stats`` (IQM and the rest with
stratified-bootstrap intervals, the probability of improvement); ``write_csv`` writes one row per
run.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.algorithms.run_config import RunConfig
from batchppo.core.keys import host_key
from batchppo.envs.episode_metrics import TASK_METRICS, episode_task_metrics
from batchppo.experiment.analysis import stats
from batchppo.experiment.analysis.plot import run_group
from batchppo.experiment.artifacts import provenance
from batchppo.experiment.artifacts.eval_protocol import ACTION_WORDS, EvalProtocol
from batchppo.experiment.artifacts.loading import load_run
from batchppo.experiment.artifacts.rundir import open_run_dir
from batchppo.experiment.errors import UserError
from batchppo.experiment.trainers import EVALUATE_RUN_KEY, TrainerFactory


def run_protocol(
    config: RunConfig,
    num_episodes: int | None = None,
    sample: bool | None = None,
    run_dir: str | Path = "the run",
) -> EvalProtocol:
    """The protocol ``evaluate_run`` scores a run of ``config`` by.

    Args:
        config: The run's config.
        num_episodes: Episodes; None: the run's ``eval_episodes``.
        sample: True: sampled actions; False: the mean action; None: the run's
            ``eval_actions``.
        run_dir: The run, as the error names it.

    Returns:
        The action mode and number of episodes.

    Raises:
        UserError: ``num_episodes`` < 1, or None for a run that does not evaluate
            (``eval_episodes`` 0).
    """
    if num_episodes is not None and num_episodes < 1:
        raise UserError(f"--episodes {num_episodes}: must be >= 1")
    if num_episodes is None and config.eval_episodes < 1:
        raise UserError(
            f"{run_dir}: its config evaluates no episodes (eval_episodes={config.eval_episodes}),"
            " so it has no number of episodes of its own: pass --episodes N"
        )
    actions = config.eval_actions if sample is None else ("sampled" if sample else "mean")
    return EvalProtocol(actions, config.eval_episodes if num_episodes is None else num_episodes)


def evaluate_run(
    run_dir: str | Path,
    checkpoint: int | None = None,
    num_episodes: int | None = None,
    seed: int = 0,
    trainer_factory: TrainerFactory | None = None,
    sample: bool | None = None,
) -> dict[str, Any]:
    """Evaluates a run's checkpoint, by default as the run's periodic evaluations do.

    Args:
        run_dir: A run directory written by ``batchppo train``.
        checkpoint: Env step of the checkpoint; None: the newest.
        num_episodes: Episodes to run (>= 1); None: the run's ``eval_episodes``.
        seed: Seed of the episode starts (the key is derived from the run's seed and this).
        trainer_factory: Builds the trainer (default: the trainer of the run's algorithm).
        sample: True: act with sampled actions, as training does; False: with the mean
            (deterministic) action; None: as the run's ``eval_actions`` says.

    Returns:
        ``env``, ``checkpoint``, ``episodes``, ``mean_return``, ``std_return`` (of the
        episodes), ``stderr_return`` (of the mean), ``mean_length``, ``cut`` (episodes cut by
        ``eval_max_steps``, counted with their return so far), ``returns`` and ``lengths``;
        ``preset`` (the config name of the run dir), ``seed``, ``protocol`` (``"final-mean"``
        or ``"final-sampled"``: see ``batchppo.experiment.analysis.protocols``), ``actions``
        (``"mean"`` or ``"sampled"``), ``platform`` (``platform_info()``),
        ``terminated_fraction`` and ``terminated`` (per episode), ``metrics`` (the means over
        the episodes of the task metrics that every episode has), ``episode_metrics`` (their
        per-episode values) and ``info_means`` (the mean over the episodes of each numeric
        info key's per-episode mean).

    Raises:
        UserError: ``num_episodes`` < 1 (or None for a run that does not evaluate), or a
            missing or corrupt run dir or checkpoint.
    """
    if seed < 0:
        raise UserError(f"--seed {seed}: must be >= 0")
    protocol = run_protocol(open_run_dir(run_dir)[0], num_episodes, sample, run_dir)
    sample = protocol.actions == "sampled"
    config, trainer, state, step = load_run(run_dir, checkpoint, trainer_factory)
    try:
        key = host_key(config.seed, EVALUATE_RUN_KEY, seed)
        result = trainer.evaluate(state, protocol.episodes, key, task_metrics=True, sample=sample)
    finally:
        trainer.close()
    # At least one episode per eval env: one that the step bound cut still counts.
    returns = np.asarray(result["returns"], np.float64)
    lengths = np.asarray(result["lengths"], np.int64)
    std = float(returns.std())
    return {
        "env": config.env,
        "checkpoint": step,
        "episodes": int(returns.size),
        "mean_return": float(returns.mean()),
        "std_return": std,
        "stderr_return": std / math.sqrt(returns.size),
        "mean_length": float(lengths.mean()),
        "cut": int(result.get("cut", 0)),
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        "preset": run_group(run_dir),
        "seed": config.seed,
        "protocol": "final-sampled" if sample else "final-mean",
        "actions": protocol.actions,
        "platform": platform_info(),
        **episode_summary(result["terminated"], result["infos"]),
    }


def platform_info() -> dict[str, str]:
    """Where a figure was measured: the CPU, its widest vector ISA, JAX's version and backend.

    A deterministic policy's return on a chaotic task (HalfCheetah) depends on the float
    rounding of the policy's arithmetic, which XLA's code generation for the CPU's ISA sets:
    the same checkpoint and command can score differently on another CPU. Results files carry
    this so that a figure names where it reproduces.
    """
    import jax

    cpu, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name" and cpu == "unknown":
                cpu = value.strip()
            elif name.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    isa = next((i for i in ("avx512f", "avx2", "avx", "sse4_2") if i in flags), "unknown")
    return {"cpu": cpu, "isa": isa, "jax": jax.__version__, "backend": jax.default_backend()}


def episode_summary(
    terminated: Sequence[bool], infos: Sequence[Mapping[str, Mapping[str, float]]]
) -> dict[str, Any]:
    """Falls and task metrics of evaluated episodes.

    Args:
        terminated: Per episode, whether it ended in a terminal state.
        infos: Per episode, its ``batchppo.envs.episode_metrics.EpisodeInfoRecorder`` summary.

    Returns:
        ``terminated_fraction``, ``terminated`` (a list), ``metrics`` (the mean over the
        episodes of each task metric every episode has), ``episode_metrics`` (their
        per-episode values) and ``info_means`` (per numeric info key that every episode has,
        the mean over the episodes of its per-episode mean).
    """
    terminated = [bool(t) for t in terminated]
    per_episode = [episode_task_metrics(info) for info in infos]
    names = [m.name for m in TASK_METRICS if per_episode and all(m.name in e for e in per_episode)]
    episode_metrics = {name: [e[name] for e in per_episode] for name in names}
    keys = sorted(set.intersection(*(set(i) for i in infos))) if infos else []
    return {
        "terminated_fraction": float(np.mean(terminated)),
        "terminated": terminated,
        "metrics": {name: float(np.mean(v)) for name, v in episode_metrics.items()},
        "episode_metrics": episode_metrics,
        "info_means": {k: float(np.mean([i[k]["mean"] for i in infos])) for k in keys},
    }


def group_protocol(results: Sequence[Mapping[str, Any]]) -> str:
    """How runs were scored, in words: ``"100 episodes, mean action"`` (the final policy's
    episodes), ``"last 100 training episodes, sampled actions"``; ``"10 or 100 episodes, mean
    action"`` where the runs' numbers of episodes differ. Entries written before ``protocol``
    was recorded are the mean action's."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        by_kind.setdefault(protocol_kind(r.get("protocol")), []).append(r)
    parts = []
    for kind, entries in by_kind.items():
        counts = sorted({int(e["episodes"]) for e in entries})
        number = " or ".join(map(str, counts))
        if kind == "training-window":
            unit = entries[0].get("unit", "episodes")
            parts.append(f"last {number} training {unit}, sampled actions")
        else:
            unit = "episode" if counts == [1] else "episodes"
            parts.append(f"{number} {unit}, {ACTION_WORDS[KIND_ACTIONS[kind]]}")
    return " or ".join(parts)


KIND_ACTIONS = {"final-mean": "mean", "final-sampled": "sampled", "training-window": "sampled"}
"""How the episodes of each ``protocol_kind`` acted."""


def protocol_kind(name: str | None) -> str:
    """``final-mean``, ``final-sampled`` or ``training-window`` (exact or approximated) for
    a results entry's ``protocol`` (None: written before it was recorded, the mean action's)."""
    name = name or "final-mean"
    return "training-window" if name.startswith("training-window") else name


def check_protocols(kinds: Mapping[str, Sequence[str]]) -> None:
    """Checks that the runs to be summarised and compared are scored alike, before anything
    is evaluated: a policy's mean action and its sampled actions score far apart.

    Args:
        kinds: Each group's runs' ``protocol_kind``, by group name.

    Raises:
        UserError: Runs of more than one kind.
    """
    counts: dict[str, int] = {}
    for group in kinds.values():
        for kind in group:
            counts[kind] = counts.get(kind, 0) + 1
    if len(counts) > 1:
        found = "; ".join(f"{k}: {n} run{'s' * (n > 1)}" for k, n in counts.items())
        raise UserError(
            f"the runs would be scored by different protocols ({found}), whose scores do not "
            "compare: pass --mean-action or --sample to score every run dir alike (results "
            "files keep the protocol they were scored by)"
        )


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean and (population) std over runs of their ``mean_return``, as papers report seeds.

    Args:
        results: ``evaluate_run`` results, one per run.

    Returns:
        ``runs`` (their number), ``mean`` and ``std``.
    """
    means = np.asarray([r["mean_return"] for r in results], np.float64)
    return {"runs": int(means.size), "mean": float(means.mean()), "std": float(means.std())}


def write_stats(stats: Any, path: str | Path) -> Path:
    """Writes ``stats`` as JSON to ``path`` (its parent directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stats, indent=2) + "\n")
    return path


# --- several runs: results files, groups, aggregate statistics, CSV ---------------------------

RESULT_KEYS = ("run_dir", "env", "checkpoint", "episodes", "mean_return", "std_return")
"""What every run's entry of an ``evaluate --json`` file holds."""
CSV_COLUMNS = (
    "group", "run_dir", "preset", "env", "seed", "protocol", "actions", "step", "episodes",
    "mean_return", "std_return", "stderr_return", "mean_length", "terminated_fraction",
    *(m.name for m in TASK_METRICS), "cut",
)  # fmt: skip
"""The columns of ``write_csv``, one row per run."""


def is_results_file(path: str | Path) -> bool:
    """Whether a RUN argument names an ``evaluate --json`` file rather than a run dir."""
    path = Path(path)
    return path.suffix == ".json" and path.is_file()


def results_document(groups: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """What ``batchppo evaluate --json`` writes: ``runs`` (one entry per run, its ``group``
    named) and ``provenance``: per group, the runs' ``commit``, ``note`` and ``config``
    (``batchppo.experiment.artifacts.provenance``; one value where the runs agree, else a list in
    their order), and ``evaluated_with``, the code version that scored them."""
    keys = provenance.PROVENANCE_KEYS
    return {
        "provenance": {
            name: {k: provenance.fold([r.get(k) for r in results]) for k in keys}
            for name, results in groups.items()
        },
        "evaluated_with": provenance.code_version(),
        "runs": [
            {**{k: v for k, v in r.items() if k not in keys}, "group": name}
            for name, results in groups.items()
            for r in results
        ],
    }


def load_results(path: str | Path) -> list[dict[str, Any]]:
    """The run entries of a file written by ``batchppo evaluate --json``, each with its run's
    ``commit``, ``note`` and ``config`` (None in a file written before they were
    recorded: a bare list of entries).

    Raises:
        UserError: The file is not such a file (no runs with ``RESULT_KEYS``).
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: not a readable JSON file ({error})") from None
    entries = data.get("runs") if isinstance(data, dict) else data
    if (
        not isinstance(entries, list)
        or not entries
        or not all(isinstance(e, dict) and all(k in e for k in RESULT_KEYS) for e in entries)
    ):
        raise UserError(
            f"{path}: not a file of `batchppo evaluate --json` (runs with {', '.join(RESULT_KEYS)})"
        )
    groups = data.get("provenance", {}) if isinstance(data, dict) else {}
    order = list(dict.fromkeys(e.get("group") for e in entries))
    for name in order:
        runs = [e for e in entries if e.get("group") == name]
        record = groups.get(name, {})
        for key in provenance.PROVENANCE_KEYS:
            try:
                values = provenance.unfold(record.get(key), len(runs))
            except ValueError as error:
                raise UserError(f"{path}: group {name}'s {key}: {error}") from None
            for entry, value in zip(runs, values, strict=True):
                entry[key] = value
    return entries


def default_labels(presets: Sequence[Sequence[str]]) -> list[str]:
    """Group names from each group's runs' presets: the preset when each group has one and
    they differ, else A, B."""
    distinct = [set(group) for group in presets]
    names = [next(iter(p)) for p in distinct if len(p) == 1]
    if len(names) == len(presets) and len(set(names)) == len(names):
        return names
    return ["A", "B"][: len(presets)]


def missing_references(
    name: str, envs: Sequence[str], references: Mapping[str, stats.Reference]
) -> str | None:
    """Why group ``name``'s runs of ``envs`` cannot be aggregated across envs (a line), or
    None: one env, or a reference for each."""
    tasks = sorted(set(envs))
    missing = [t for t in tasks if t not in references]
    if len(tasks) < 2 or not missing:
        return None
    return (
        f"group {name} spans {len(tasks)} envs: aggregates across envs need a reference score "
        f"for {', '.join(missing)} (--reference ENV=HIGH, or a set: "
        f"{', '.join(stats.REFERENCE_SETS)})"
    )


def check_groups(envs: Mapping[str, Sequence[str]]) -> None:
    """Checks that two groups can be compared, before anything is evaluated.

    Args:
        envs: Each group's runs' env ids, by group name.

    Raises:
        UserError: Two groups that cover different envs.
    """
    covered = [sorted(set(group)) for group in envs.values()]
    if len(covered) == 2 and covered[0] != covered[1]:
        a, b = envs
        raise UserError(
            f"groups {a} and {b} cover different envs ({', '.join(covered[0])} against "
            f"{', '.join(covered[1])}): compare runs of the same envs"
        )


def _scores(results: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Each env's runs' mean returns, in order of first appearance."""
    by_env: dict[str, list[float]] = {}
    for r in results:
        by_env.setdefault(r["env"], []).append(float(r["mean_return"]))
    return {env: np.asarray(v, np.float64) for env, v in by_env.items()}


def group_statistics(
    groups: Mapping[str, Sequence[Mapping[str, Any]]],
    references: Mapping[str, stats.Reference],
    *,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Aggregate statistics of one or two groups of evaluated runs.

    A run's score is its ``mean_return``. Per group and env with at least 2 runs: the
    aggregates of the raw returns (no optimality gap). Where every env of a group has a
    reference: the aggregates of the normalised scores across its envs, stratified by env.
    With two groups: the probability that a run of the first beats one of the second.

    Args:
        groups: ``evaluate_run`` results by group name (one or two groups).
        references: Reference scores by env (may be empty).
        resamples: Bootstrap resamples.
        seed: Seed of the bootstrap.

    Returns:
        ``{"groups": {name: {"runs", "protocol" (``group_protocol``), "envs": {env: aggregates
        or None}, "normalized": aggregates or None, "note": why not across envs, or None}},
        "improvement": {"x", "y", "value", "low", "high"} or None}``, aggregates as
        ``stats.aggregate_intervals`` returns them; None where some env has fewer than 2 runs.

    Raises:
        UserError: See ``check_groups``.
    """
    check_groups({n: [r["env"] for r in g] for n, g in groups.items()})
    out: dict[str, Any] = {"groups": {}, "improvement": None}
    enough = {}
    for name, results in groups.items():
        scores = _scores(results)
        enough[name] = min(v.size for v in scores.values()) >= 2
        per_env = {
            env: stats.aggregate_intervals(
                {env: v}, normalized=False, resamples=resamples, seed=seed
            )
            if v.size >= 2
            else None
            for env, v in scores.items()
        }
        normalized = None
        if enough[name] and all(env in references for env in scores):
            normalized = stats.aggregate_intervals(
                stats.normalize_scores(scores, references), normalized=True,
                resamples=resamples, seed=seed,
            )  # fmt: skip
        out["groups"][name] = {
            "runs": len(results), "protocol": group_protocol(results), "envs": per_env,
            "normalized": normalized, "note": missing_references(name, list(scores), references),
        }  # fmt: skip
    if len(groups) == 2 and all(enough.values()):
        (x, rx), (y, ry) = groups.items()
        estimate = stats.improvement_interval(
            _scores(rx), _scores(ry), resamples=resamples, seed=seed
        )
        out["improvement"] = {"x": x, "y": y, **estimate}
    return out


def _interval(a: Mapping[str, float | None], digits: int) -> str:
    return f"{a['value']:.{digits}f} [{a['low']:.{digits}f}, {a['high']:.{digits}f}]"


def _aggregates_line(aggregates: Mapping[str, Mapping[str, float | None]], digits: int) -> str:
    names = {"mean": "mean", "median": "median", "iqm": "IQM", "optimality_gap": "optimality gap"}
    shown = [(k, v) for k, v in aggregates.items() if v["value"] is not None]
    return ", ".join(f"{names[k]} {_interval(v, digits)}" for k, v in shown)


def format_statistics(result: Mapping[str, Any]) -> list[str]:
    """The lines ``batchppo evaluate`` prints for ``group_statistics``' result."""
    lines = []
    for name, group in result["groups"].items():
        lines.append(
            f"group {name}: {group['runs']} runs, each {group['protocol']} "
            "(95% stratified-bootstrap intervals)"
        )
        for env, aggregates in group["envs"].items():
            if aggregates is None:
                lines.append(f"  {env}: one run; an interval needs at least 2")
            else:
                lines.append(f"  {env} return: {_aggregates_line(aggregates, 1)}")
        if group["normalized"] is not None:
            lines.append(f"  normalised score: {_aggregates_line(group['normalized'], 3)}")
        elif group["note"] is not None:
            lines.append(f"  no aggregate across envs: {group['note']}")
    improvement = result["improvement"]
    if improvement is not None:
        lines.append(
            f"P({improvement['x']} > {improvement['y']}) = {_interval(improvement, 3)} "
            "(probability of improvement)"
        )
    return lines


def format_run(result: Mapping[str, Any]) -> str:
    """The line of falls and task metrics that ``batchppo evaluate`` prints under a run's."""
    falls = sum(result.get("terminated", []))
    parts = [f"terminated {falls} of {result['episodes']} episodes"]
    for metric in TASK_METRICS:
        value = result.get("metrics", {}).get(metric.name)
        if value is not None:
            parts.append(f"{metric.description} {value:.3f} {metric.unit}")
    return "  " + "; ".join(parts)


def write_csv(groups: Mapping[str, Sequence[Mapping[str, Any]]], path: str | Path) -> Path:
    """Writes one row per run (``CSV_COLUMNS``; empty where a run has no such value; ``actions``
    follows from ``protocol`` where an entry does not name it).

    Args:
        groups: ``evaluate_run`` results (with ``run_dir``) by group name.
        path: The CSV file (its parent directories created).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for name, results in groups.items():
            for r in results:
                metrics = r.get("metrics", {})
                row = {
                    **r, "group": name, "step": r["checkpoint"],
                    "preset": r.get("preset", run_group(r["run_dir"])),
                    **{m.name: metrics.get(m.name) for m in TASK_METRICS},
                }  # fmt: skip
                if r.get("protocol") and not r.get("actions"):
                    row["actions"] = KIND_ACTIONS.get(protocol_kind(r["protocol"]))
                writer.writerow(["" if row.get(c) is None else row[c] for c in CSV_COLUMNS])
    return path

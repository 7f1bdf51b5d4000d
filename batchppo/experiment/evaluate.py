"""Evaluation of a saved run: many episodes of its policy, without videos.

The training evals of a run use ``eval_episodes`` episodes (16 for the MuJoCo presets), enough
to follow a curve but not to tell two final policies apart on a task whose returns vary a lot
from episode to episode (Reacher's targets are random). :func:`evaluate_run` restores a
checkpoint and runs the run's own evaluator (the same eval env, backend and mean action as the
training evals) for as many episodes as asked, from a key of its own, and reports their mean,
spread and standard error.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.core.keys import host_key
from batchppo.experiment.errors import UserError
from batchppo.experiment.loop import EVALUATE_RUN_KEY, TrainerFactory, load_run


def evaluate_run(
    run_dir: str | Path,
    checkpoint: int | None = None,
    num_episodes: int = 100,
    seed: int = 0,
    trainer_factory: TrainerFactory | None = None,
) -> dict[str, Any]:
    """Evaluates a run's checkpoint with the mean action over ``num_episodes`` episodes.

    Args:
        run_dir: A run directory written by ``batchppo train``.
        checkpoint: Env step of the checkpoint; None: the newest.
        num_episodes: Episodes to run (>= 1).
        seed: Seed of the episode starts (the key is derived from the run's seed and this).
        trainer_factory: Builds the trainer (default: the trainer of the run's algorithm).

    Returns:
        ``env``, ``checkpoint``, ``episodes``, ``mean_return``, ``std_return`` (of the
        episodes), ``stderr_return`` (of the mean), ``mean_length``, ``cut`` (episodes cut by
        ``eval_max_steps``, counted with their return so far), ``returns`` and ``lengths``.

    Raises:
        UserError: ``num_episodes`` < 1, or a missing or corrupt run dir or checkpoint.
    """
    if num_episodes < 1:
        raise UserError(f"--episodes {num_episodes}: must be >= 1")
    if seed < 0:
        raise UserError(f"--seed {seed}: must be >= 0")
    config, trainer, state, step = load_run(run_dir, checkpoint, trainer_factory)
    try:
        key = host_key(config.seed, EVALUATE_RUN_KEY, seed)
        result = trainer.evaluate(state, num_episodes, key)
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
    }


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean and (population) std over runs of their ``mean_return``, as papers report seeds.

    Args:
        results: :func:`evaluate_run` results, one per run.

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

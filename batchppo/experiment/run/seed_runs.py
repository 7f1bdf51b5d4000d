"""The runs of ``batchppo train --seeds N`` (``train(..., seeds=N)``): a run dir per seed.

Seed ``i`` is ``config.seed + i``. The seeds train together in one
``batchppo.algorithms.training.stacked_seeds.SeedsTrainer`` (one compiled iteration; for host envs
one shared batch env), and each writes an ordinary single-seed run dir
``<logdir>/<timestamp>-<config>-s<i>/`` whose ``config.yaml`` holds its own seed. Each seed has
its own ledger (``RunLedger``: reports, evaluations, checkpoints, their cadence), and the driver a
single run uses (``batchppo.experiment.run.driver``) iterates them over the stacked state; what sets
them apart from a single run is their run set, ``batchppo.experiment.run.run_set.StackedSeeds``.
This module makes or reopens their run dirs.

Resume: ``--seeds N --timestamp T`` resumes all ``N`` dirs together when all exist and their
newest checkpoints are at one step; otherwise it stops with a one-line error. One seed's dir
resumes alone as any run: ``--config <config>-s<i> --timestamp T`` (without ``--seeds``).

An env error (host backends: the seeds share their envs) stops every seed as a single run
stops: each seed's open report, a checkpoint of its last completed iteration (all at
one step, so ``--seeds N --timestamp T`` resumes them) and its ``env_error.txt``; the env's
exception then propagates with an ``EnvFailure`` whose ``seeds`` hold each seed's failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR, make_timestamp, prepare_run_dir
from batchppo.experiment.config import configs
from batchppo.experiment.errors import RunDirError


def seed_configs(config: RunConfig, num_seeds: int) -> list[RunConfig]:
    """Each seed's config: ``config`` with seed ``config.seed + i`` (``i < num_seeds``)."""
    return [dataclasses.replace(config, seed=config.seed + i) for i in range(num_seeds)]


def prepare_seed_dirs(
    logdir: str | Path,
    name: str,
    config: RunConfig,
    num_seeds: int,
    timestamp: str | None,
    overrides: dict[str, Any] | None,
    resume: bool = False,
    locks: contextlib.ExitStack | None = None,
) -> tuple[list[RunConfig], list[Path]]:
    """Creates (or reopens, to resume) the run dirs ``<timestamp>-<name>-s<i>``.

    With ``locks``, every dir's lock is held there (see ``prepare_run_dir``).

    Returns:
        Each seed's config (its own seed) and run dir.

    Raises:
        RunDirError: Only some of the dirs exist (or, with ``resume``, not all of them), their
            configs differ by more than the seed, or their newest checkpoints are at different
            steps.
    """
    timestamp = timestamp or make_timestamp()
    names = [configs.seed_run_name(name, i) for i in range(num_seeds)]
    exist = [(Path(logdir) / f"{timestamp}-{n}").exists() for n in names]
    if (resume or any(exist)) and not all(exist):
        missing = [n for n, e in zip(names, exist, strict=True) if not e]
        raise RunDirError(
            f"--seeds {num_seeds} --timestamp {timestamp}: no run dir for {', '.join(missing)} "
            f"in {logdir}; resume with the --logdir, --config and number of seeds the run was "
            "started with"
        )
    run_configs, run_dirs = [], []
    for seed_name, seed_config in zip(names, seed_configs(config, num_seeds), strict=True):
        explicit = overrides if all(exist) else None
        seed_config, run_dir, _ = prepare_run_dir(
            logdir, seed_name, seed_config, timestamp, explicit, locks=locks
        )
        run_configs.append(seed_config)
        run_dirs.append(run_dir)
    if all(exist):
        first = run_configs[0]
        if run_configs != seed_configs(first, num_seeds):
            raise RunDirError(
                f"{timestamp}: the {num_seeds} seed dirs' configs differ by more than their "
                "seeds; resume each alone (--config NAME-s<i> without --seeds)"
            )
        steps = [ckpt.latest_checkpoint(d / CHECKPOINT_DIR) for d in run_dirs]
        found = [None if s is None else s[0] for s in steps]
        if len(set(found)) > 1:
            listed = ", ".join(f"s{i}: {s}" for i, s in enumerate(found))
            raise RunDirError(
                f"{timestamp}: the seeds' checkpoints are at different steps ({listed}); "
                "resume each alone (--config NAME-s<i> without --seeds)"
            )
    return run_configs, run_dirs

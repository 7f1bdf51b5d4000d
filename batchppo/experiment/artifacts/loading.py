"""Loading trained runs: a checkpoint's state and trainer, and the policy it acts with."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.algorithms.run_config import RunConfig
from batchppo.core.keys import host_key
from batchppo.experiment import trainers
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR, open_run_dir
from batchppo.experiment.config import env_checks
from batchppo.experiment.errors import CorruptCheckpointError
from batchppo.experiment.trainers import INIT_KEY, TrainerFactory, TrainerLike

LOAD_WITH: dict[str, str] = {"process": "sync", "ray": "sync"}
"""The backend a trained policy is loaded with, by the backend of its run: loading needs the
networks, not parallel simulation, so a backend that runs its envs away from the caller (worker
processes, Ray actors) loads with its in-process twin. A backend not listed loads with itself."""


def loading_config(config: RunConfig) -> RunConfig:
    """``config`` as a trained policy is loaded: on the backend ``LOAD_WITH`` names, if any."""
    twin = LOAD_WITH.get(config.backend, config.backend)
    if twin == config.backend:
        return config
    # The old backend's own options (its workers, its cluster) mean nothing to its twin.
    return dataclasses.replace(config, backend=twin, backend_options={})


def load_run(
    run_dir: str | Path,
    checkpoint: int | None = None,
    trainer_factory: TrainerFactory | None = None,
) -> tuple[RunConfig, TrainerLike, Any, int]:
    """Restores a run's checkpoint.

    Args:
        run_dir: A run directory written by [`train`][batchppo.experiment.run.training.train].
        checkpoint: Env step of the checkpoint; None: the newest.
        trainer_factory: Builds the trainer (default: the config's algorithm's).

    Returns:
        ``(config, trainer, train_state, step)``; the caller closes the trainer.

    Raises:
        RunDirError, ConfigError, CheckpointError: Missing or corrupt run dir or checkpoint.
    """
    config, run_dir = open_run_dir(run_dir)
    step, path = ckpt.find_checkpoint(run_dir / CHECKPOINT_DIR, checkpoint)
    # One device: the policy acts unsharded, and any num_agents loads on a machine of several.
    loading = dataclasses.replace(loading_config(config), devices=1)
    # Refuses an env unknown here, e.g. a module:factory that is not importable from here.
    env_checks.check_config_env_id(loading)
    trainer = trainers.build_trainer(trainer_factory, loading)
    try:
        template = trainer.init(host_key(config.seed, INIT_KEY))
        state, _ = ckpt.restore_checkpoint(path, template)
    except CorruptCheckpointError as error:
        trainer.close()
        older = [s for s, _ in ckpt.list_checkpoints(run_dir / CHECKPOINT_DIR) if s < step]
        if not older:
            raise
        raise CorruptCheckpointError(
            f"{error}; an older one may be intact: --checkpoint {older[-1]}"
        ) from None
    except BaseException:
        trainer.close()
        raise
    return config, trainer, state, step


def load_policy(
    run_dir: str | Path,
    checkpoint: int | None = None,
    trainer_factory: TrainerFactory | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """The trained policy of a run as ``obs batch -> action batch`` (mean action).

    Args:
        run_dir: A run directory written by [`train`][batchppo.experiment.run.training.train].
        checkpoint: Env step of the checkpoint; None: the newest.
        trainer_factory: Builds the trainer (default: the config's algorithm's).

    Returns:
        A function mapping observations of shape ``(batch, *obs_shape)`` to actions, both as the
        agent sees them inside the env stack. With ``normalize_ranges`` (the default) it takes
        observations whose bounded dims are mapped to ``[-1, 1]`` (the maps of
        ``batchppo.core.ranges``) and gives Box actions on that ``[-1, 1]`` scale, unclipped (the
        stack clips them and maps them to the env's bounds); without it, the env's own observations
        and Box actions, unclipped. The run's observation normalisation is applied inside.
        ``batchppo export`` writes a file that takes and gives the env's own values.

    Raises:
        RunDirError, ConfigError, CheckpointError: Missing or corrupt run dir or checkpoint.
    """
    _, trainer, state, _ = load_run(run_dir, checkpoint, trainer_factory)
    try:
        return trainer.policy(state, deterministic=True)
    finally:
        trainer.close()

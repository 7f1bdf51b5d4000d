"""Several seeds in one program: ``batchppo train --seeds N`` and ``train(..., seeds=N)``.

Seed ``i`` is ``config.seed + i``. The seeds train together in one
``batchppo.algorithms.common.seeds.SeedsTrainer`` (one compiled iteration; for host envs one shared
batch env), and each writes an ordinary single-seed run dir ``<logdir>/<timestamp>-<config>-s<i>/``
whose ``config.yaml`` holds its own seed. Each seed has its own ledger (``RunLedger``: reports,
evaluations, checkpoints, their cadence), and the driver a single run uses
(``batchppo.experiment.driver``) iterates them over the stacked state (``StackedSeeds``).

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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import algorithm_of
from batchppo.experiment import checkpoint as ckpt
from batchppo.experiment import configs, trainers
from batchppo.experiment.callbacks import Callback
from batchppo.experiment.driver import drive
from batchppo.experiment.errors import ConfigError, RunDirError
from batchppo.experiment.launch import RunDirRequest
from batchppo.experiment.ledger import TrainResult
from batchppo.experiment.rundir import CHECKPOINT_DIR, make_timestamp, prepare_run_dir

if TYPE_CHECKING:
    from batchppo.algorithms.common.networks import NetworkFactory


class StackedSeeds:
    """A ``SeedsTrainer`` as the driver sees it (a ``TrainerOfRuns``): the seeds' states stacked,
    one metrics dict per seed.

    Args:
        trainer: The ``SeedsTrainer``.
    """

    stacked = True

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def init(self, keys: Sequence[np.ndarray]) -> Any:
        """The seeds' fresh states, stacked."""
        return self.trainer.init(list(keys))

    def init_sim(self, state: Any, keys: Sequence[np.ndarray]) -> Any:
        """The seeds' sim states."""
        return self.trainer.init_sim(state, list(keys))

    def iteration(self, state: Any, sim: Any) -> tuple[Any, Any, Sequence[dict]]:
        """One iteration of every seed; one metrics dict per seed."""
        return self.trainer.iteration(state, sim)

    def step(self, state: Any) -> int:
        """Training env steps done (every seed's)."""
        return int(state.step[0])

    def part(self, state: Any, index: int) -> Any:
        """Seed ``index``'s state."""
        from batchppo.algorithms.common.seeds import unstack

        return unstack(state, index)

    def join(self, parts: Sequence[Any]) -> Any:
        """The seeds' states, stacked."""
        from batchppo.algorithms.common.seeds import stack

        return stack(list(parts))


def _seed_configs(config: RunConfig, num_seeds: int) -> list[RunConfig]:
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
    for seed_name, seed_config in zip(names, _seed_configs(config, num_seeds), strict=True):
        explicit = overrides if all(exist) else None
        seed_config, run_dir, _ = prepare_run_dir(
            logdir, seed_name, seed_config, timestamp, explicit, locks=locks
        )
        run_configs.append(seed_config)
        run_dirs.append(run_dir)
    if all(exist):
        first = run_configs[0]
        if run_configs != _seed_configs(first, num_seeds):
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


def run_seeds(
    trainer: Any,
    run_configs: Sequence[RunConfig],
    run_dirs: Sequence[Path | None],
    progress: str,
    callbacks: Sequence[Callback] = (),
) -> list[TrainResult]:
    """Trains the seeds of ``trainer`` (a ``SeedsTrainer``), one ledger per seed.

    Seed 0 shows the progress (``progress``); each evaluation prints every seed's score. The
    user's ``callbacks`` are called for every seed (``RunInfo.index``).

    Raises:
        Exception: An env's own exception, after every seed's run dir got its checkpoint and
            ``env_error.txt`` (see the module docstring).
    """
    # A tracked --seeds run groups its seeds: <timestamp>-<name> of <timestamp>-<name>-s<i>.
    group = None if run_dirs[0] is None else run_dirs[0].name.rpartition("-s")[0]
    return drive(StackedSeeds(trainer), run_configs, run_dirs, progress, group, callbacks=callbacks)


class SeedsLayout:
    """The ``--seeds`` run dirs ``<timestamp>-<name>-s<i>`` for ``launch``.

    Args:
        num_seeds: Number of seeds (>= 1).
        network_factory: Builds the seeds' network (``SeedsTrainer``'s); None: the config's.
    """

    def __init__(self, num_seeds: int, network_factory: NetworkFactory | None = None) -> None:
        if num_seeds < 1:
            raise ConfigError(f"--seeds {num_seeds}: must be >= 1")
        self.num_seeds = num_seeds
        self.network_factory = network_factory

    def check(self, config: RunConfig) -> None:
        """Refuses an algorithm without a ``SeedsTrainer``.

        Raises:
            ConfigError: Naming the fix (one run per seed).
        """
        algorithm = algorithm_of(config)
        if algorithm.seeds_trainer is None:
            raise ConfigError(
                f"--seeds {self.num_seeds}: {algorithm.title} trains one seed per run; drop "
                "--seeds and start one run per seed (--set seed=N)"
            )

    def dir_names(self, name: str) -> list[str]:
        """``<name>-s<i>`` for each seed."""
        return [configs.seed_run_name(name, i) for i in range(self.num_seeds)]

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """Each seed's config: its own seed."""
        return _seed_configs(config, self.num_seeds)

    def prepare(
        self, request: RunDirRequest, locks: contextlib.ExitStack
    ) -> tuple[list[RunConfig], list[Path], bool]:
        """The seeds' run dirs (``prepare_seed_dirs``); reopened when all existed."""
        r = request
        existed = r.timestamp is not None and all(
            (Path(r.logdir) / f"{r.timestamp}-{n}").exists() for n in self.dir_names(r.name)
        )
        run_configs, run_dirs = prepare_seed_dirs(
            r.logdir, r.name, r.config, self.num_seeds, r.timestamp, r.explicit, r.resume, locks
        )
        return run_configs, run_dirs, existed

    def build(self, config: RunConfig) -> Any:
        """The algorithm's ``SeedsTrainer`` of the seeds."""
        make_seeds_trainer = algorithm_of(config).seeds_trainer
        network = {} if self.network_factory is None else {"network_factory": self.network_factory}
        return trainers.build_trainer(
            lambda c: make_seeds_trainer(c, self.num_seeds, **network), config
        )

    def run(
        self,
        trainer: Any,
        run_configs: list[RunConfig],
        run_dirs: list[Any],
        progress: str,
        callbacks: Sequence[Callback],
    ) -> list[TrainResult]:
        """Trains the seeds (``run_seeds``)."""
        return run_seeds(trainer, run_configs, run_dirs, progress, callbacks)

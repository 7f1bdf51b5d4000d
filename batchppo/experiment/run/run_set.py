"""The runs one train call trains: one run, or the seeds of ``--seeds`` in one program.

A [`RunSet`][batchppo.experiment.run.run_set.RunSet] is that one choice, asked by both sides of a
call: the set-up (``batchppo.experiment.run.launch``) asks it which run dirs and configs the call
has and which trainer trains them; the driver (``batchppo.experiment.run.driver``) asks it how the
trainer's state splits into one part per run (one ledger each). Its two kinds:
[`SingleRun`][batchppo.experiment.run.run_set.SingleRun] (one run, the trainer's state its own) and
[`StackedSeeds`][batchppo.experiment.run.run_set.StackedSeeds] (the seeds' states stacked in one
``SeedsTrainer``; see ``batchppo.experiment.run.seed_runs``). A run set is frozen: the trainer it
builds is passed back to it, never kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.experiment import trainers
from batchppo.experiment.artifacts.rundir import prepare_run_dir
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run.seed_runs import prepare_seed_dirs, seed_configs

if TYPE_CHECKING:
    from batchppo.algorithms.networks.networks import NetworkFactory
    from batchppo.experiment.trainers import TrainerFactory, TrainerLike


@dataclasses.dataclass(frozen=True)
class RunDirRequest:
    """The run dirs a train call asks its ``RunSet`` for.

    Attributes:
        logdir: Parent directory of runs.
        name: The run's name (a dir's suffix, before a seed's ``-s<i>``).
        config: The config of a new run.
        timestamp: The dirs' prefix; existing dirs resume. None: now.
        explicit: When resuming, the explicit changes asked for; None compares ``config`` with the
            stored one (``prepare_run_dir``).
        resume: The dirs must exist (``--resume``).
    """

    logdir: str | Path
    name: str
    config: RunConfig
    timestamp: str | None
    explicit: dict[str, Any] | None
    resume: bool


class RunSet(Protocol):
    """The runs of a train call, one ledger each, trained by one trainer: one run, or the seeds
    of ``--seeds``.

    The set-up (``launch``) calls ``check``, ``dir_names``, ``configs``, ``prepare``,
    ``run_factory`` and ``build``; the driver (``drive``) calls ``group`` and the trainer's side:
    ``init``, ``init_sim``, ``iteration`` (N keys in, N metrics out), ``step``, ``part`` and
    ``join``.

    Attributes:
        stacked: Whether the parts are seeds of one program (``--seeds``, even of one seed):
            their env-failure notes name each seed's dir, and the failure holds each seed's.
    """

    stacked: bool

    def check(self, config: RunConfig) -> None:
        """Refuses a config this kind of run cannot train (a ``ConfigError``)."""

    def dir_names(self, name: str) -> list[str]:
        """The run dirs' names after ``<timestamp>-``."""

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """Each ledger's config of a run without a logdir."""

    def prepare(
        self, request: RunDirRequest, locks: contextlib.ExitStack
    ) -> tuple[list[RunConfig], list[Path], bool]:
        """Makes or reopens the run dirs, their locks held in ``locks``: each ledger's
        config and run dir, and whether they were reopened (a resume)."""

    def build(self, config: RunConfig) -> Any:
        """The trainer (built with ``build_trainer``)."""

    def run_factory(self) -> TrainerFactory | None:
        """The factory of one run's trainer, which loads one of the runs (``load_run``)."""

    def group(self, run_dirs: Sequence[Path | None]) -> str | None:
        """The W&B group of the ledgers (see ``RunLedger``)."""

    def init(self, trainer: Any, keys: Sequence[np.ndarray]) -> Any:
        """The trainer's fresh state from each ledger's key."""

    def init_sim(self, trainer: Any, state: Any, keys: Sequence[np.ndarray]) -> Any:
        """The trainer's sim state from each ledger's key."""

    def iteration(self, trainer: Any, state: Any, sim: Any) -> tuple[Any, Any, Sequence[dict]]:
        """One iteration of every ledger; one metrics dict per ledger."""

    def step(self, state: Any) -> int:
        """Training env steps done (every ledger's)."""

    def part(self, state: Any, index: int) -> Any:
        """Ledger ``index``'s part of the state."""

    def join(self, parts: Sequence[Any]) -> Any:
        """The state of the ledgers' parts."""


@dataclasses.dataclass(frozen=True)
class SingleRun:
    """One run in ``<logdir>/<timestamp>-<name>/``, its trainer's state its one ledger's.

    Attributes:
        factory: Builds the trainer from the config; None: the algorithm's.
    """

    factory: TrainerFactory | None = None
    stacked = False

    def check(self, config: RunConfig) -> None:
        """Any algorithm's config trains a single run."""

    def dir_names(self, name: str) -> list[str]:
        """The run dir's name: the run's."""
        return [name]

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """The config itself."""
        return [config]

    def prepare(
        self, request: RunDirRequest, locks: contextlib.ExitStack
    ) -> tuple[list[RunConfig], list[Path], bool]:
        """The run dir (``prepare_run_dir``)."""
        r = request
        config, run_dir, resumed = prepare_run_dir(
            r.logdir, r.name, r.config, r.timestamp, r.explicit, resume=r.resume, locks=locks
        )
        return [config], [run_dir], resumed

    def build(self, config: RunConfig) -> TrainerLike:
        """The run's trainer."""
        return trainers.build_trainer(self.factory, config)

    def run_factory(self) -> TrainerFactory | None:
        """The run's trainer factory."""
        return self.factory

    def group(self, run_dirs: Sequence[Path | None]) -> str | None:
        """None: a single run is no group."""
        return None

    def init(self, trainer: TrainerLike, keys: Sequence[np.ndarray]) -> Any:
        """The trainer's fresh state for the one ledger's key."""
        (key,) = keys
        return trainer.init(key)

    def init_sim(self, trainer: TrainerLike, state: Any, keys: Sequence[np.ndarray]) -> Any:
        """The trainer's sim state for the one ledger's key."""
        (key,) = keys
        return trainer.init_sim(state, key)

    def iteration(
        self, trainer: TrainerLike, state: Any, sim: Any
    ) -> tuple[Any, Any, Sequence[dict]]:
        """One iteration; its metrics as a list of one."""
        state, sim, metrics = trainer.iteration(state, sim)
        return state, sim, [metrics]

    def step(self, state: Any) -> int:
        """Training env steps done."""
        return int(state.step)

    def part(self, state: Any, index: int) -> Any:
        """The state itself (the one ledger's)."""
        return state

    def join(self, parts: Sequence[Any]) -> Any:
        """The one ledger's state."""
        (state,) = parts
        return state


class StackedStates:
    """The trainer's side of a run set whose ledgers' states are stacked in one ``SeedsTrainer``
    (a leading axis, one entry per ledger): ``StackedSeeds``' seeds, ``batchppo tune --batch``'s
    members (``batchppo.experiment.tune.members.MemberRuns``)."""

    stacked = True

    def init(self, trainer: Any, keys: Sequence[np.ndarray]) -> Any:
        """The ledgers' fresh states, stacked."""
        return trainer.init(list(keys))

    def init_sim(self, trainer: Any, state: Any, keys: Sequence[np.ndarray]) -> Any:
        """The ledgers' sim states."""
        return trainer.init_sim(state, list(keys))

    def iteration(self, trainer: Any, state: Any, sim: Any) -> tuple[Any, Any, Sequence[dict]]:
        """One iteration of every ledger; one metrics dict per ledger."""
        return trainer.iteration(state, sim)

    def step(self, state: Any) -> int:
        """Training env steps done (every ledger's)."""
        return int(state.step[0])

    def part(self, state: Any, index: int) -> Any:
        """Ledger ``index``'s state."""
        from batchppo.algorithms.training.stacked_seeds import unstack

        return unstack(state, index)

    def join(self, parts: Sequence[Any]) -> Any:
        """The ledgers' states, stacked."""
        from batchppo.algorithms.training.stacked_seeds import stack

        return stack(list(parts))


@dataclasses.dataclass(frozen=True)
class StackedSeeds(StackedStates):
    """The ``--seeds`` runs ``<logdir>/<timestamp>-<name>-s<i>/``, seed ``i`` being
    ``config.seed + i``, trained by the algorithm's ``SeedsTrainer``: the seeds' states stacked,
    one metrics dict per seed.

    Attributes:
        num_seeds: Number of seeds (>= 1).
        network_factory: Builds the seeds' network (``SeedsTrainer``'s); None: the config's.

    Raises:
        ConfigError: ``num_seeds`` < 1.
    """

    num_seeds: int
    network_factory: NetworkFactory | None = None

    def __post_init__(self) -> None:
        if self.num_seeds < 1:
            raise ConfigError(f"--seeds {self.num_seeds}: must be >= 1")

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
        if get_backend(config.backend).steps_in_program(config.parsed_backend_options):
            raise ConfigError(
                f"--seeds {self.num_seeds}: the seeds share one host env through host calls, and "
                f"backend={config.backend!r} with backend_options {config.backend_options} steps "
                "its envs inside the compiled program; start one run per seed (--set seed=N)"
            )

    def dir_names(self, name: str) -> list[str]:
        """``<name>-s<i>`` for each seed."""
        return [configs.seed_run_name(name, i) for i in range(self.num_seeds)]

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """Each seed's config: its own seed."""
        return seed_configs(config, self.num_seeds)

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

    def run_factory(self) -> TrainerFactory | None:
        """The factory of one seed's trainer: the algorithm's, with the seeds' network."""
        return trainers.network_trainer_factory(self.network_factory)

    def group(self, run_dirs: Sequence[Path | None]) -> str | None:
        """``<timestamp>-<name>`` of the seed dirs ``<timestamp>-<name>-s<i>`` (None without a
        logdir): a tracked ``--seeds`` run groups its seeds."""
        return None if run_dirs[0] is None else run_dirs[0].name.rpartition("-s")[0]

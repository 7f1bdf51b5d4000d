"""The runs of a batch of trials in one program (``batchppo tune --batch``): a run set whose
members are the seeds of several trials.

Member ``b * K + k`` is seed ``k`` (``config.seed + k``) of trial ``b``; its run dir is an
ordinary run dir, ``STUDY/trials/<number>/<timestamp>-<name>-s<k>``, its ``config.yaml`` the
trial's config with its seed. The members' configs differ only in the values the algorithm
carries per member (``Algorithm.member_fields``: PPO's ``batchppo.algorithms.ppo.hparams``)
and their seeds, so they train as the stacked seeds of ``--seeds`` do (the algorithm's
``SeedsTrainer`` over ``B x K`` members, one compiled program), each member's state carrying
its trial's values (``Algorithm.members``). A member's part of the state, which its ledger
evaluates and checkpoints, is a run's state without them: its checkpoints are those of a run
of its own config.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.artifacts.rundir import make_timestamp
from batchppo.experiment.config import configs
from batchppo.experiment.run.run_set import RunDirRequest, StackedSeeds, StackedStates
from batchppo.experiment.run.seed_runs import prepare_seed_dirs, seed_configs


@dataclasses.dataclass(frozen=True)
class MemberRuns(StackedStates):
    """The seeds of several trials as the members of one program (see the module docstring);
    a [`RunSet`][batchppo.experiment.run.run_set.RunSet], whose trainer's side is
    ``StackedStates``' with the members' values attached to their states.

    Attributes:
        trial_configs: Each trial's config (its seed the trials' first).
        trial_dirs: Each trial's directory, whose run dirs its seeds write.
        seeds: Seeds per trial.
        members: The algorithm's per-member values of every member (``Algorithm.members``).
    """

    trial_configs: tuple[RunConfig, ...]
    trial_dirs: tuple[Path, ...]
    seeds: int
    members: Any

    def check(self, config: RunConfig) -> None:
        """Refuses what ``--seeds`` refuses (an algorithm without a ``SeedsTrainer``, a backend
        that steps its envs in the program through host calls)."""
        StackedSeeds(self.num_members).check(config)

    @property
    def num_members(self) -> int:
        """Trials x seeds."""
        return len(self.trial_configs) * self.seeds

    def dir_names(self, name: str) -> list[str]:
        """``<name>-s<k>`` for each member (under its trial's directory)."""
        one = [configs.seed_run_name(name, k) for k in range(self.seeds)]
        return one * len(self.trial_configs)

    def configs(self, config: RunConfig) -> list[RunConfig]:
        """Each member's config: its trial's, with its seed."""
        return [c for trial in self.trial_configs for c in seed_configs(trial, self.seeds)]

    def prepare(
        self, request: RunDirRequest, locks: contextlib.ExitStack
    ) -> tuple[list[RunConfig], list[Path], bool]:
        """Each trial's seed dirs (``prepare_seed_dirs``) under its own directory, all with one
        timestamp; never a resume (a stopped trial is retried from its start)."""
        timestamp = request.timestamp or make_timestamp()
        run_configs, run_dirs = [], []
        for config, trial_dir in zip(self.trial_configs, self.trial_dirs, strict=True):
            found = prepare_seed_dirs(
                trial_dir, request.name, config, self.seeds, timestamp, None, locks=locks
            )
            run_configs += found[0]
            run_dirs += found[1]
        return run_configs, run_dirs, False

    def build(self, config: RunConfig) -> Any:
        """The algorithm's ``SeedsTrainer`` of every member."""
        return StackedSeeds(self.num_members).build(config)

    def run_factory(self) -> None:
        """None: a member's run is the algorithm's own."""
        return None

    def group(self, run_dirs: Sequence[Path | None]) -> str | None:
        """None: the members are no W&B group."""
        return None

    def init(self, trainer: Any, keys: Sequence[np.ndarray]) -> Any:
        """The members' fresh states, stacked, with their values."""
        return self.members.attach(super().init(trainer, keys), fresh=True)

    def part(self, state: Any, index: int) -> Any:
        """Member ``index``'s state, as a run of its config holds it."""
        return self.members.detach(super().part(state, index))

    def join(self, parts: Sequence[Any]) -> Any:
        """The members' states, stacked, with their values."""
        return self.members.attach(super().join(parts))


def member_runs(
    trial_configs: Sequence[RunConfig], trial_dirs: Sequence[Path], seeds: int
) -> MemberRuns:
    """The run set of trials whose configs differ only in their algorithm's per-member values.

    Raises:
        ValueError: An algorithm without per-member values (``Algorithm.members``), or
            configs that differ in more.
    """
    algorithm = algorithm_of(trial_configs[0])
    if algorithm.members is None:
        raise ValueError(f"{algorithm.title} carries no per-member values")
    member_configs = [c for trial in trial_configs for c in seed_configs(trial, seeds)]
    return MemberRuns(
        tuple(trial_configs), tuple(trial_dirs), seeds, algorithm.members(member_configs)
    )

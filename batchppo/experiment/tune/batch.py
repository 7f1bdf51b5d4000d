"""``batchppo tune --batch B``: B trials at a time, trained as one compiled program on a fused
backend.

Each round asks Optuna for up to B trials (``study.ask``: waiting retries first), samples them
and groups them by program: trials whose configs differ only in the values the algorithm
carries per member (``Algorithm.member_fields``; PPO's are
``batchppo.algorithms.ppo.config.MEMBER_FIELDS``: learning rate and its anneal, clip range,
discount, GAE lambda, entropy and value coefficients, the KL terms, the gradient clip, Adam's
decays) and their seeds train together, ``B x K`` members in one program
(``batchppo.experiment.tune.members``); a key that changes shapes or code paths (``num_agents``,
``update_epochs``, network sizes, a choice between on and off) splits the batch into one
program per combination of its values, one program after another, as a line says. Each trial
is told (``study.tell``) as its program ends.

Each member's periodic evaluations go to its own trial's pruner as ``--batch 1``'s do. A pruned
trial's members keep computing in the program until it ends (its others go on), but the trial
is marked pruned with its note and its result is not used; a program whose trials are all
pruned stops. Invalid combinations fail their trial alone. A signal (Ctrl-C, SIGTERM) stops
the program with its checkpoints; every trial of the round not told yet is failed with a note
and queued again. The trials' heartbeats (database storages) beat while the round runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import signal
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend, names
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run.callbacks import Callback, RunInfo
from batchppo.experiment.tune.objective import TrialMonitor
from batchppo.experiment.tune.space import SearchSpace
from batchppo.experiment.tune.study import NOTE_ATTR, import_optuna, quiet_experimental
from batchppo.experiment.tune.trials import (
    TRIALS_DIR,
    InvalidTrialError,
    StudyRunner,
    begin_trial,
    stop_trial,
    trial_value,
)


def check_batch(batch: int, config: RunConfig, space: SearchSpace) -> None:
    """Refuses a ``--batch`` the study cannot train in one program.

    Raises:
        ConfigError: ``batch < 1``; above 1: a host backend, an algorithm that carries no
            per-member values, or a space that tunes the backend; each in one line with the fix.
    """
    if batch < 1:
        raise ConfigError(f"--batch {batch}: must be >= 1")
    if batch == 1:
        return
    algorithm = algorithm_of(config)
    if not get_backend(config.backend).fused:
        raise ConfigError(
            f"--batch {batch}: a batch of trials trains as one compiled program on a fused "
            f"backend {names(host=False)}, and backend={config.backend!r} steps its envs on the "
            "host; drop --batch (or --batch 1)"
        )
    if algorithm.members is None or algorithm.seeds_trainer is None:
        raise ConfigError(
            f"--batch {batch}: {algorithm.title} carries no per-trial values in one program; "
            "drop --batch (or --batch 1)"
        )
    tuned = [key for key in space.keys if key.partition(".")[0] in ("backend", "backend_options")]
    if tuned:
        raise ConfigError(
            f"--batch {batch}: the space tunes {', '.join(tuned)}, which picks how envs run; "
            "fix it with --set (or drop --batch)"
        )


def program_key(config: RunConfig) -> tuple[Any, ...]:
    """What the trials of one program share: every field but the algorithm's per-member ones
    and the seed, and which of those are None."""
    fields = algorithm_of(config).member_fields
    data = configs.config_to_dict(config)
    shared = tuple(
        (key, repr(value)) for key, value in data.items() if key not in fields and key != "seed"
    )
    return (*shared, tuple(data.get(key) is None for key in fields))


def split_by_program(
    trials: Sequence[tuple[Any, RunConfig, Path]],
) -> tuple[list[list[tuple[Any, RunConfig, Path]]], list[str]]:
    """The trials grouped by program (``program_key``), in the order their first trial was
    asked; and the config keys whose values set the groups apart (none for one group)."""
    groups: dict[tuple[Any, ...], list[tuple[Any, RunConfig, Path]]] = {}
    for entry in trials:
        groups.setdefault(program_key(entry[1]), []).append(entry)
    keys: list[str] = []
    if len(groups) > 1:
        dicts = [configs.config_to_dict(config) for _, config, _ in trials]
        keys = [k for k in dicts[0] if len({repr(d.get(k)) for d in dicts}) > 1 and k != "seed"]
        fields = algorithm_of(trials[0][1]).member_fields
        keys = [k for k in keys if k not in fields] or keys
    return list(groups.values()), keys


class BatchMonitor(Callback):
    """The callback of a program's members: each member's evaluations go to its trial's
    ``TrialMonitor`` (member ``b * K + k`` is seed ``k`` of trial ``b``) until the trial is
    pruned; the program stops once every trial in it is pruned.

    Args:
        monitors: Each trial's monitor, in the members' order.
        seeds: Seeds per trial (K).
    """

    def __init__(self, monitors: Sequence[TrialMonitor], seeds: int) -> None:
        self.monitors, self.seeds = list(monitors), seeds

    def on_eval(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool | None:
        """Gives the evaluation to its trial's monitor (not after it pruned the trial); False
        once every trial is pruned."""
        trial, seed = divmod(run.index, self.seeds)
        monitor = self.monitors[trial]
        if monitor.pruned is None:
            monitor.on_eval(dataclasses.replace(run, index=seed), step, metrics)
        return False if all(m.pruned is not None for m in self.monitors) else None


@contextlib.contextmanager
def heartbeats(storage: Any, trial_ids: Callable[[], list[int]]) -> Iterator[None]:
    """Records the heartbeat of each trial ``trial_ids()`` names, every interval of a storage
    with a heartbeat (as ``study.optimize`` does for its one trial), while the block runs."""
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    if interval is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while True:
            for trial_id in trial_ids():
                storage.record_heartbeat(trial_id)
            if stop.wait(timeout=interval):
                return

    thread = threading.Thread(target=beat, name="tune-heartbeats", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@dataclasses.dataclass
class BatchRunner(StudyRunner):
    """Runs a study's trials ``batch`` at a time (see the module docstring). Its fields are
    ``StudyRunner``'s (``seeds`` is K), then its own.

    Attributes:
        batch: Trials per round (B).
        storage: The study's storage (its heartbeat, if any).
        finished: Called with each trial as it is told (its ``FrozenTrial``).
    """

    batch: int
    storage: Any
    finished: Callable[[Any], None]

    def run(self, study: Any, trials: int, remaining: int) -> int | None:
        """Runs up to ``remaining`` trials, a round of up to ``batch`` at a time, until the study
        has ``trials`` complete or pruned ones (other processes' included).

        Returns:
            The signal that stopped the study; None.
        """
        optuna = import_optuna()
        done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        ran = 0
        while ran < remaining:
            missing = trials - len(study.get_trials(deepcopy=False, states=done))
            size = min(self.batch, remaining - ran, missing)
            if size <= 0:
                break
            stopped = self._round(study, size)
            ran += size
            if stopped is not None:
                return stopped
        return None

    def _round(self, study: Any, size: int) -> int | None:
        """Asks for ``size`` trials and trains them; the signal that stopped them (None)."""
        optuna = import_optuna()
        with quiet_experimental():  # as study.optimize before each trial (heartbeat storages)
            optuna.storages.fail_stale_trials(study)
        with warnings.catch_warnings():  # ask's warning that only optimize beats: heartbeats do
            warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
            asked = [study.ask() for _ in range(size)]
        pending = {trial.number: trial for trial in asked}
        with heartbeats(self.storage, lambda: [t._trial_id for t in list(pending.values())]):
            try:
                return self._train_round(study, asked, pending)
            except KeyboardInterrupt:
                how = "interrupted by SIGINT (Ctrl-C) before its runs saved"
                self._stop(study, list(pending.values()), how, pending)
                return signal.SIGINT
            except BaseException as error:
                for trial in list(pending.values()):
                    trial.set_user_attr(NOTE_ATTR, f"its program failed: {type(error).__name__}")
                    self._tell(study, pending, trial, state=optuna.trial.TrialState.FAIL)
                raise

    def _train_round(self, study: Any, asked: list[Any], pending: dict[int, Any]) -> int | None:
        """Samples the round's trials (failing invalid ones) and trains them, program after
        program; the signal that stopped them (None)."""
        optuna = import_optuna()
        valid = []
        for trial in asked:
            try:
                config, logdir = begin_trial(trial, self.space, self.config, self.study_dir)
            except InvalidTrialError:
                self._tell(study, pending, trial, state=optuna.trial.TrialState.FAIL)
                continue
            valid.append((trial, config, logdir))
        if not valid:
            return None
        groups, keys = split_by_program(valid)
        if len(groups) > 1:
            self.progress.note(
                f"trials {', '.join(str(t.number) for t, _, _ in valid)}: {len(groups)} "
                f"programs, one after another (they differ in {', '.join(keys)}, which changes "
                "shapes or code paths)"
            )
        for group in groups:
            stopped = self._train_group(study, group, pending)
            if stopped is not None:
                how = f"stopped by {signal.Signals(stopped).name} before its program started"
                self._stop(study, list(pending.values()), how, pending)
                return stopped
        return None

    def _train_group(
        self, study: Any, group: list[tuple[Any, RunConfig, Path]], pending: dict[int, Any]
    ) -> int | None:
        """Trains one program's trials and tells each; the signal that stopped it (None)."""
        from batchppo.experiment.run.launch import TrainCall, launch
        from batchppo.experiment.tune.members import member_runs

        optuna = import_optuna()
        trials = [trial for trial, _, _ in group]
        steps = group[0][1].steps
        monitors = []
        for trial in trials:
            on_value = functools.partial(self.progress.evaluated, trial.number)
            monitors.append(TrialMonitor(trial, self.objective, self.seeds, steps, True, on_value))
            self.progress.started(trial.number, trial.params)
        run_set = member_runs([c for _, c, _ in group], [d for _, _, d in group], self.seeds)
        call = TrainCall(
            group[0][1], self.study_dir / TRIALS_DIR, self.name, None, (), "none", False, None,
            [BatchMonitor(monitors, self.seeds)],
        )  # fmt: skip
        results = launch(run_set, call)
        stop = next((r.stop_signal for r in results if r.stop_signal), None)
        if stop is not None:
            how = f"stopped by {signal.Signals(stop).name} at step {results[0].step:,}"
            self._stop(study, trials, how, pending)
            return stop
        for b, (trial, monitor) in enumerate(zip(trials, monitors, strict=True)):
            own = results[b * self.seeds : (b + 1) * self.seeds]
            value = trial_value(trial, self.objective, own, monitor, steps)
            if value is None:
                self._tell(study, pending, trial, state=optuna.trial.TrialState.PRUNED)
            else:
                self._tell(study, pending, trial, values=value)
        return None

    def _stop(self, study: Any, trials: Sequence[Any], how: str, pending: dict[int, Any]) -> None:
        """Fails each of ``trials`` still pending with the note ``how``, a retry queued."""
        optuna = import_optuna()
        for trial in trials:
            if trial.number in pending:
                stop_trial(trial, how)
                self._tell(study, pending, trial, state=optuna.trial.TrialState.FAIL)

    def _tell(self, study: Any, pending: dict[int, Any], trial: Any, **outcome: Any) -> None:
        """Tells ``trial``'s outcome, takes it off ``pending`` and reports it finished."""
        frozen = study.tell(trial, **outcome)
        pending.pop(trial.number, None)
        self.finished(frozen)

"""The driver: one iterate loop over N run ledgers (a single run is N = 1).

The trainer runs the iterations of every ledger at once (one state for a single run, the seeds'
states stacked for ``--seeds``); after each, every ledger gets its part of the state for its own
reports, evaluations and checkpoints (``RunLedger``); the call's run set
(``batchppo.experiment.run.run_set``) says how the state splits into those parts. The loop, its stop
request and its env failures are written here once.

An env error (its exception, or a dead worker, with ``max_restarts`` 0 or spent) stops every
ledger as Ctrl-C does: each reports its open window, checkpoints its part of the last completed
state and writes ``env_error.txt``; the env's exception then propagates carrying an ``EnvFailure``.

The user's callbacks (``batchppo.experiment.run.callbacks``) are called by the driver at the start
and the end of each ledger's run and by each ledger after its reports; a stop they ask for raises
the stop flag as Ctrl-C does. An exception one raises stops every ledger as an env error does
(without ``env_error.txt``) and propagates with a note on the checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from batchppo._clock import IMPORTED_AT
from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.errors import RunDirError, StorageError
from batchppo.experiment.run.callbacks import (
    Callback,
    RunCallbacks,
    RunInfo,
    stop_on_callback_error,
)
from batchppo.experiment.run.env_failures import (
    EnvFailure,
    mark_env_failure,
    state_deleted,
    stop_on_env_error,
)
from batchppo.experiment.run.ledger import RunLedger, TrainResult
from batchppo.experiment.run.stopping import StopFlag, graceful_stop
from batchppo.experiment.run.window import MetricWindow
from batchppo.experiment.trainers import INIT_KEY, SIM_KEY

if TYPE_CHECKING:
    from batchppo.experiment.run.run_set import RunSet


class Driver:
    """Trains N ledgers with one trainer: start, the iterate loop, the final save, close.

    Args:
        run_set: The runs of the ledgers: how the trainer's state splits into their parts.
        trainer: The trainer of the ledgers (built by ``run_set``); each ledger evaluates its
            part with it, and the driver precompiles with its ``precompile`` if it has one.
        ledgers: One per run, in order; the first shows the progress and the messages.
        stop: The stop flag the ledgers hold; the driver's signal handlers raise it.
    """

    def __init__(
        self, run_set: RunSet, trainer: Any, ledgers: Sequence[RunLedger], stop: StopFlag
    ) -> None:
        self.run_set, self.trainer, self.ledgers, self.stop = run_set, trainer, ledgers, stop
        # While training: the newest state an iteration completed, its step, each window.
        self.completed: tuple[Any, int, list[MetricWindow]] | None = None

    def run(self) -> list[TrainResult]:
        """Runs the whole training call; one result per ledger.

        A KeyboardInterrupt (a second Ctrl-C) propagates without saving: the trainer donates
        its input buffers, so the state in hand may be gone; the last checkpoint stays valid
        and resuming from it drops the reports written after it. An env error checkpoints the
        last completed state and propagates (see the module docstring).

        Raises:
            RunDirError: The ledgers resume from different steps (a damaged checkpoint was
                skipped in some).
        """
        # The stop flag covers start-up too: a Ctrl-C while programs compile or envs start
        # stops the run cleanly before its first iteration.
        with graceful_stop(self.ledgers[0].message, self.stop):
            return self._run()

    def _run(self) -> list[TrainResult]:
        run_set, trainer, ledgers = self.run_set, self.trainer, self.ledgers
        first = ledgers[0]
        precompile = getattr(trainer, "precompile", None)
        if precompile is not None:  # Compile every program side by side, in the background.
            episodes = first.config.eval_episodes if first.eval_on() else None
            sample = first.config.eval_actions == "sampled"
            precompile(iterations=(1,), eval_episodes=episodes, eval_sample=sample)
        try:
            keys = [ledger.key(INIT_KEY) for ledger in ledgers]
            state, step = self._start(run_set.init(trainer, keys))
            state, step, interrupted = self.train_phases(state, step)
            for i, ledger in enumerate(ledgers):
                ledger.save(run_set.part(state, i), step)
        except BaseException:
            for ledger in ledgers:
                with contextlib.suppress(StorageError):  # the error in flight is the one to show
                    ledger.close()
            raise
        for ledger in ledgers:
            ledger.close()
        results = [
            ledger.result(run_set.part(state, i), step, interrupted)
            for i, ledger in enumerate(ledgers)
        ]
        for ledger, result in zip(ledgers, results, strict=True):
            ledger.callbacks.train_end(result)
        return results

    def _start(self, fresh: Any) -> tuple[Any, int]:
        """Starts every ledger from its part of ``fresh``; the joined state and its step."""
        parts = [ledger.start(self.run_set.part(fresh, i)) for i, ledger in enumerate(self.ledgers)]
        del fresh
        if len({step for _, step in parts}) > 1:  # a seed skipped a damaged checkpoint
            listed = ", ".join(f"s{i}: {step:,}" for i, (_, step) in enumerate(parts))
            raise RunDirError(
                f"the seeds resume from different steps ({listed}): damaged checkpoints were "
                "skipped; resume each alone (--config NAME-s<i> without --seeds)"
            )
        return self.run_set.join([state for state, _ in parts]), parts[0][1]

    def train_phases(self, state: Any, step: int) -> tuple[Any, int, bool]:
        """Iterates until the step budget or a stop request; returns (state, step, stopped)."""
        with stop_on_env_error(self._env_failed), stop_on_callback_error(self._callback_failed):
            return self._iterate(state, step)

    def _iterate(self, state: Any, step: int) -> tuple[Any, int, bool]:
        run_set, trainer, ledgers = self.run_set, self.trainer, self.ledgers
        windows = [MetricWindow() for _ in ledgers]
        self.completed = (state, step, windows)  # `windows` is updated in place
        sim = run_set.init_sim(trainer, state, [ledger.key(SIM_KEY, step) for ledger in ledgers])
        for ledger in ledgers:
            ledger.callbacks.train_start(step)
        compiled = False  # The first iteration's time is mostly compilation: not a speed.
        while step < ledgers[0].config.steps and not self.stop.requested:
            start = time.monotonic()
            state, sim, metrics = run_set.iteration(trainer, state, sim)
            before, step = step, run_set.step(state)
            seconds = time.monotonic() - start
            for window, part_metrics in zip(windows, metrics, strict=True):
                window.add(part_metrics, seconds, compiling=not compiled)
            if not compiled:
                ledgers[0].message(start_up_line(start, seconds))
            compiled = True
            self.completed = (state, step, windows)  # an evaluation may still fail
            for i, ledger in enumerate(ledgers):
                windows[i] = ledger.after_iteration(
                    lambda i=i, state=state: run_set.part(state, i), before, step, windows[i]
                )
            self._eval_line(step)
        stopped = [ledger.stopped(step, w) for ledger, w in zip(ledgers, windows, strict=True)]
        return state, step, any(stopped)

    def _eval_line(self, step: int) -> None:
        """Prints every ledger's score of an evaluation at ``step`` (two or more ledgers)."""
        evals = [ledger.last_eval for ledger in self.ledgers]
        n = len(evals)
        if n > 1 and all(e is not None and e[0] == step for e in evals):
            scores = np.array([e[1] for e in evals])
            self.ledgers[0].message(
                f"eval at step {step:,}, {n} seeds: "
                f"{' '.join(f'{s:.1f}' for s in scores)} "
                f"(mean {scores.mean():.1f} ± {scores.std():.1f})"
            )

    def _env_failed(self, error: Exception) -> None:
        """Stops every ledger after an env error and marks ``error`` with its ``EnvFailure``."""
        mark_env_failure(error, self._stop_ledgers(error, env_error=True))

    def _callback_failed(self, error: Exception) -> None:
        """Stops every ledger after a callback's exception and notes where the checkpoints are."""
        failure = self._stop_ledgers(error, env_error=False)
        error.add_note(
            f"batchppo: training stopped at step {failure.step:,} by this error; "
            f"{failure.checkpoints()}"
        )

    def _stop_ledgers(self, error: Exception, env_error: bool) -> EnvFailure:
        """Stops every ledger after ``error`` (``RunLedger.stop_by_error``), noting on ``error``
        what went wrong on the way; where they stopped (every seed's for stacked runs).

        An evaluation or a callback that failed stops the ledgers after it before their
        bookkeeping of that step: their open windows are reported at ``step`` and checkpointed
        with the rest.
        """
        assert self.completed is not None, "_iterate sets it before its first trainer call"
        state, step, windows = self.completed
        lost = state_deleted(state)
        stacked = self.run_set.stacked
        failures = []
        for i, (ledger, window) in enumerate(zip(self.ledgers, windows, strict=True)):
            part = None if lost else self.run_set.part(state, i)
            failure, notes = ledger.stop_by_error(part, step, window, error if env_error else None)
            for note in notes:
                error.add_note(f"seed dir s{i}: {note}" if stacked else note)
            failures.append(failure)
        failure = failures[0]
        if stacked:
            failure = dataclasses.replace(failure, seeds=tuple(failures))
        return failure


def start_up_line(first_start: float, first_seconds: float) -> str:
    """The line that splits a run's start into set-up, compilation and training.

    The set-up counts from the first import of batchppo (``batchppo._clock``).

    Args:
        first_start: ``time.monotonic()`` when the first iteration was called.
        first_seconds: That iteration's duration: its compilation (or a load from the
            persistent compilation cache) and one iteration.
    """
    setup = first_start - IMPORTED_AT
    return (
        f"start-up: set-up {setup:.1f} s (import of batchppo to the first iteration), first "
        f"iteration {first_seconds:.1f} s (compilation and one iteration); steps/s exclude both"
    )


def drive(
    run_set: RunSet,
    trainer: Any,
    run_configs: Sequence[RunConfig],
    run_dirs: Sequence[Path | None],
    progress: str,
    stop: StopFlag | None = None,
    callbacks: Sequence[Callback] = (),
) -> list[TrainResult]:
    """Trains one ledger per config and run dir with ``trainer``; one result per ledger.

    Args:
        run_set: The runs of the ledgers (``SingleRun``, ``StackedSeeds``).
        trainer: The trainer of the ledgers (built by ``run_set``).
        run_configs: Each ledger's config.
        run_dirs: Each ledger's run dir (None: no disk I/O).
        progress: The first ledger's progress output (the others show none).
        stop: The stop flag to raise; None: a new one.
        callbacks: The user's callbacks, called for every ledger (``RunInfo.index`` its place).

    Raises:
        Exception: An env's own exception, after every ledger's run dir got its checkpoint
            and ``env_error.txt`` (see the module docstring).
    """
    stop = stop if stop is not None else StopFlag()
    group = run_set.group(run_dirs)
    ledgers = []
    for i, (config, run_dir) in enumerate(zip(run_configs, run_dirs, strict=True)):
        run_callbacks = RunCallbacks(callbacks, RunInfo(i, run_dir, config))
        mode = "none" if i else progress
        ledgers.append(RunLedger(trainer, config, run_dir, mode, stop, group, run_callbacks))
    return Driver(run_set, trainer, ledgers, stop).run()

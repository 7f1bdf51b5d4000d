"""A run's ledger: one seed's bookkeeping (reports, evaluations, checkpoints, their cadence).

The driver (``batchppo.experiment.run.driver``) iterates the trainer and hands each ledger its part
of the state after every iteration. Resuming from checkpoint S (dropping records after S) continues
every curve without a gap or a duplicate: a checkpoint follows the reports of its step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from batchppo.algorithms.run_config import RunConfig
from batchppo.core.keys import host_key
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.eval_protocol import EvalProtocol
from batchppo.experiment.artifacts.logging import RunLogger, read_metrics
from batchppo.experiment.artifacts.provenance import record_code
from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR, ENV_ERROR_FILE
from batchppo.experiment.artifacts.tracking import open_tracker
from batchppo.experiment.errors import StorageError
from batchppo.experiment.run.callbacks import RunCallbacks, RunInfo
from batchppo.experiment.run.env_failures import EnvFailure, state_deleted
from batchppo.experiment.run.progress import Progress
from batchppo.experiment.run.stopping import StopFlag
from batchppo.experiment.run.window import RUNNING_TOTALS, MetricWindow, crossed
from batchppo.experiment.trainers import EVAL_KEY


class DeferredState:
    """A train state restored only when read: ``TrainResult.train_state`` of a run that was
    complete already (nothing was built to train it).

    Args:
        restore: Returns the state (loads the run's final checkpoint).
    """

    def __init__(self, restore: Callable[[], Any]) -> None:
        self.restore = restore


class _TrainStateField:
    """The descriptor of ``TrainResult.train_state``: the state given, or where a
    ``DeferredState`` was given, the state it restores on the first read (then kept)."""

    def __get__(self, result: TrainResult | None, owner: type | None = None) -> Any:
        if result is None:
            raise AttributeError("train_state")  # the dataclass field has no default
        state = result.__dict__["_train_state"]
        if isinstance(state, DeferredState):
            state = result.__dict__["_train_state"] = state.restore()
        return state

    def __set__(self, result: TrainResult, state: Any) -> None:
        result.__dict__["_train_state"] = state


@dataclasses.dataclass
class TrainResult:
    """What [`train`][batchppo.experiment.run.training.train] returns.

    Attributes:
        train_state: The final TrainState (params, optimiser, normalisers, RNG, counters). Of a
            run that was complete already, restored from its final checkpoint when first read
            (``load_run``, which builds a trainer); until then nothing is built or compiled.
        score: Mean return of the last evaluation, measured as ``protocol`` says; None when
            evaluation is off.
        step: Training env steps done.
        run_dir: The run directory, or None without a logdir.
        config: The config the run used (the stored one when resuming).
        interrupted: Stopped early by Ctrl-C / SIGTERM or a callback (a checkpoint was saved).
        stop_signal: The signal number that stopped the run, if any.
        records: The reports (metrics.jsonl records) of this call, in order.
        stopped_by: The name of the callback that asked the run to stop, if one did
            ([`Callback`][batchppo.experiment.run.callbacks.Callback]).
    """

    train_state: Any = _TrainStateField()
    score: float | None
    step: int
    run_dir: Path | None
    config: RunConfig
    interrupted: bool = False
    stop_signal: int | None = None
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    stopped_by: str | None = None

    @property
    def protocol(self) -> EvalProtocol | None:
        """How ``score`` was measured: the run's ``eval_actions`` and ``eval_episodes``
        ([`EvalProtocol`][batchppo.experiment.artifacts.eval_protocol.EvalProtocol]; ``str()`` words
        it, ``"10 episodes, sampled actions"``); None when evaluation is off."""
        return EvalProtocol.of_config(self.config) if evaluates(self.config) else None


class SupportsEvaluate(Protocol):
    """What a ledger needs of its trainer: the evaluation of one seed's state (a ``Trainer``'s
    ``evaluate``; not the eval env's runner, ``batchppo.algorithms.training.evaluation.Evaluator``).
    """

    def evaluate(
        self, train_state: Any, num_episodes: int, key: Any, sample: bool = False
    ) -> dict: ...


class RunLedger:
    """One seed's run: its run dir, logs, progress, cadence and results.

    The driver (``Driver``) calls ``start``, ``after_iteration`` after every iteration, ``stopped``,
    ``save``, ``close`` and ``result``; after an env's or a callback's error, ``stop_by_error``.

    Args:
        trainer: Evaluates one seed's state (a ``Trainer``, or a ``SeedsTrainer``).
        config: The run's config.
        run_dir: The run directory; None: no disk I/O.
        progress: Progress output mode (``Progress``).
        stop: The stop flag of the driver, which installs the signal handlers.
        group: The W&B group of a tracked run when ``wandb_group`` is None (a ``--seeds``
            run's common name).
        callbacks: The user's callbacks of the run; None: none.
    """

    def __init__(
        self,
        trainer: SupportsEvaluate,
        config: RunConfig,
        run_dir: Path | None,
        progress: str,
        stop: StopFlag,
        group: str | None = None,
        callbacks: RunCallbacks | None = None,
    ) -> None:
        self.trainer, self.config, self.run_dir = trainer, config, run_dir
        self.group = group
        if callbacks is None:
            callbacks = RunCallbacks((), RunInfo(0, run_dir, config))
        self.callbacks = callbacks
        self.ckpt_dir = run_dir / CHECKPOINT_DIR if run_dir is not None else None
        self.stop = stop
        self.records: list[dict[str, Any]] = []
        self.last_eval: tuple[int, float] | None = None
        self.saved_step = -1
        self.progress_mode = progress
        self.stop_signal: int | None = None
        self.stopped_by: str | None = None
        # Opened by start(): the wall time of earlier sessions (resume), this session's start
        # on the monotonic clock, the logs, the running totals to continue, the progress.
        self.wall_offset = 0.0
        self.started: float | None = None
        self.logger: RunLogger | None = None
        self.totals_before: dict[str, float] = {}
        self.progress: Progress | None = None

    def restore(self, fresh: Any) -> tuple[Any, int | None, float]:
        """The initial TrainState, the step it was restored from (None if fresh), wall time.

        A resume takes the newest checkpoint that verifies, restored into the shape of ``fresh``
        (the state the trainer initialised); damaged ones are moved aside, each named in a message
        (``restore_newest``).
        """
        state = fresh
        found = ckpt.restore_newest(self.ckpt_dir, state, self.message) if self.ckpt_dir else None
        if found is None:
            return state, None, 0.0
        state, meta, step = found
        self.saved_step = step
        return state, step, float(meta.get("wall_time", 0.0))

    def key(self, purpose: int, *words: int) -> np.ndarray:
        """The run's PRNG key for ``purpose`` (init, env resets, evaluation) at ``words``."""
        return host_key(self.config.seed, purpose, *words)

    def _opened(self) -> tuple[RunLogger, Progress]:
        """The logs and progress output that ``start`` opened."""
        if self.logger is None or self.progress is None:
            raise RuntimeError("RunLedger: start() opens the logs and the progress output first")
        return self.logger, self.progress

    def wall_time(self) -> float:
        """Seconds of training wall time, earlier sessions of a resumed run included."""
        if self.started is None:
            raise RuntimeError("RunLedger: start() starts the clock first")
        return self.wall_offset + time.monotonic() - self.started

    def save(self, state: Any, step: int) -> None:
        """Checkpoints ``state`` at ``step`` (not twice at one step; not without a logdir)."""
        if self.ckpt_dir is None or step == self.saved_step:
            return
        logger, _ = self._opened()
        try:
            logger.flush()  # Reports up to `step` must be on disk before the checkpoint.
            ckpt.save_checkpoint(
                self.ckpt_dir, state, step, keep=self.config.keep_checkpoints,
                meta={"wall_time": self.wall_time()},
            )  # fmt: skip
        except OSError as error:
            raise self._storage_error(f"the checkpoint at step {step:,}", error) from None
        self.saved_step = step

    def _storage_error(self, what: str, error: OSError) -> StorageError:
        """The one-line error of a write into the run dir that failed (a full disk)."""
        reason = f"[Errno {error.errno}] {error.strerror}" if error.errno else str(error)
        kept = (
            f"its checkpoint at step {self.saved_step:,} is intact"
            if self.saved_step >= 0
            else "it has no checkpoint yet"
        )
        return StorageError(
            f"writing {what} into {self.run_dir} failed ({reason}); the run stopped and {kept}:"
            " free some space, then resume it (the same train command with --resume)"
        )

    def report(self, phase: str, step: int, values: Mapping[str, Any]) -> None:
        """Writes a report (a metrics.jsonl record), shows it and calls the callbacks with it."""
        record = self._write_report(phase, step, values)
        asked = self.callbacks.report(record)
        if asked is not None:
            if not self.stop.requested:
                self.message(
                    f"callback {asked} asked to stop at step {step:,}: stopping, then saving"
                )
            self.stop.ask(asked)

    def _write_report(self, phase: str, step: int, values: Mapping[str, Any]) -> dict[str, Any]:
        """Writes a report (a metrics.jsonl record) and shows it; the record."""
        logger, progress = self._opened()
        try:
            record = logger.log(phase, step, {**values, "wall_time": self.wall_time()})
        except OSError as error:
            raise self._storage_error(f"the {phase} report at step {step:,}", error) from None
        self.records.append(record)
        progress.report(record)
        if phase == "eval":
            self.last_eval = (step, record["score"])
        return record

    def evaluate(self, state: Any, step: int) -> None:
        """Runs an evaluation of ``state`` and writes its eval report at ``step``."""
        start = time.monotonic()
        key = self.key(EVAL_KEY, step)
        actions = self.config.eval_actions
        result = self.trainer.evaluate(
            state, self.config.eval_episodes, key, sample=actions == "sampled"
        )
        seconds = time.monotonic() - start
        lengths = np.asarray(result.get("lengths", []))
        self.report(
            "eval", step,
            {
                "actions": actions,
                "score": float(result["score"]),
                "length": float(result["length"]),
                "episodes": int(lengths.size) or self.config.eval_episodes,
                "sps": float(lengths.sum()) / seconds if seconds > 0 and lengths.size else None,
                "score_std": float(np.std(result["returns"])) if "returns" in result else None,
                "cut": int(result["cut"]) if "cut" in result else None,
            },
        )  # fmt: skip

    def message(self, text: str) -> None:
        """Prints a line: through the progress output once open, else on stderr."""
        if self.progress is not None:
            self.progress.message(text)
        else:
            print(f"batchppo: {text}", file=sys.stderr, flush=True)

    def start(self, fresh: Any) -> tuple[Any, int]:
        """Restores the state (or takes ``fresh``) and opens the logs; ``(state, step)``.

        Args:
            fresh: The state the trainer initialised with this run's key of ``INIT_KEY``.
        """
        config = self.config
        state, resume_step, self.wall_offset = self.restore(fresh)
        self.stop.check_abort()
        step = int(state.step)
        self.started = time.monotonic()
        try:
            if self.run_dir is not None:  # the code that runs from this step on
                record_code(self.run_dir, step)
            self.logger = RunLogger(self.run_dir, resume_step)
        except OSError as error:  # opening the logs, or cutting them back to the checkpoint
            raise self._storage_error("the reports", error) from None
        try:  # W&B (track=wandb) gets the reports from the logger, on the host side
            self.logger.tracker = open_tracker(config, self.run_dir, self.group)
        except BaseException:
            self.logger.close()
            self.logger = None
            raise
        self.totals_before = self._last_totals()
        self.progress = Progress(self.progress_mode, config.steps, step)
        if resume_step is not None:
            self.message(f"resuming {self.run_dir} from step {step:,}")
            note = config.schedule_note()  # an extended run's schedule past its first budget
            if note is not None:
                self.message(note)
        if self.run_dir is not None and not self.logger.episodes.enabled:
            self.message(
                f"{self.run_dir} has no episodes.jsonl (the run predates it, or its trainer "
                "lists no episodes): its training episodes are not recorded, and evaluate "
                "--training-window approximates them from its reports"
            )
        return state, step

    def close(self) -> None:
        """Closes the progress output and the logs that ``start`` opened."""
        if self.progress is not None:
            self.progress.close()
        if self.logger is not None:
            logger, self.logger = self.logger, None
            try:
                logger.close()
            except OSError as error:
                raise self._storage_error("the last reports", error) from None

    def result(self, state: Any, step: int, interrupted: bool) -> TrainResult:
        """The [`TrainResult`][batchppo.experiment.run.ledger.TrainResult] of a run that ended at
        ``step``."""
        score = self.last_eval[1] if self.last_eval else None
        if score is None:
            score = last_eval_score(self.config, self.run_dir)
        return TrainResult(
            state, score, step, self.run_dir, self.config, interrupted, self.stop_signal,
            self.records, self.stopped_by,
        )  # fmt: skip

    def _last_totals(self) -> dict[str, float]:
        """The running totals of the last train report on disk (a resume continues them)."""
        if self.run_dir is None:
            return {}
        train = [r for r in read_metrics(self.run_dir) if r["phase"] == "train"]
        last = train[-1] if train else {}
        return {key: float(last[key]) for key in RUNNING_TOTALS if last.get(key) is not None}

    def _log_episodes(self, window: MetricWindow) -> None:
        """Appends the episodes the window's iterations listed to ``episodes.jsonl``."""
        logger, _ = self._opened()
        try:
            logger.log_episodes(window.take_ended())
        except OSError as error:
            raise self._storage_error("the training episodes", error) from None

    def _train_values(self, window: MetricWindow) -> dict[str, float]:
        """A train report's values: the window's summary, running totals continued."""
        values = window.summary()
        for key, before in self.totals_before.items():
            if key in values:
                values[key] += before
        return values

    def eval_on(self) -> bool:
        """Whether the run evaluates (``evaluates``)."""
        return evaluates(self.config)

    def stop_by_error(
        self, state: Any, step: int, window: MetricWindow, env_error: Exception | None = None
    ) -> tuple[EnvFailure, list[str]]:
        """Stops the run after an env's error or a callback's as Ctrl-C does.

        Reports the window so far (unless an evaluation or a callback failed after its report;
        the callbacks are not called with it) and checkpoints ``state``, the newest state an
        iteration completed (the input of the iteration that failed: host-env trainers do not
        donate it); an env's error's full text goes to ``env_error.txt``.

        Args:
            state: The state at ``step``; None or deleted buffers: lost with the failed call.
            step: The step of the last completed iteration.
            window: The open train report's window.
            env_error: The env's exception; None for a callback's.

        Returns:
            Where the run stopped (an ``EnvFailure``, without an error file for a callback's
            error) and notes on what went wrong on the way (a lost state, a failed save), for the
            error.
        """
        notes = []
        try:
            self._log_episodes(window)
        except StorageError as storage_error:  # the error in flight stays the one raised
            notes.append(str(storage_error))
        last = self.records[-1] if self.records else {}
        if window.iterations and (last.get("phase"), last.get("step")) != ("train", step):
            # Without the callbacks: one that raises again would cost the checkpoint.
            self._write_report("train", step, self._train_values(window))
        if self.ckpt_dir is not None:
            if state is None or state_deleted(state):
                notes.append(f"the state at step {step:,} was lost with the failed call")
            else:
                try:
                    self.save(state, step)
                except Exception as save_error:  # the env's error stays the one raised
                    notes.append(f"saving a checkpoint at step {step:,} failed: {save_error!r}")
        saved = self.saved_step if self.saved_step >= 0 else None
        error_file = None
        if self.run_dir is not None and env_error is not None:
            error_file = self.run_dir / ENV_ERROR_FILE
            with contextlib.suppress(OSError):
                error_file.write_text("".join(traceback.format_exception(env_error)))
        return EnvFailure(step, saved, self.run_dir, error_file), notes

    def after_iteration(
        self, get_state: Callable[[], Any], before: int, step: int, window: MetricWindow
    ) -> MetricWindow:
        """The bookkeeping after an iteration took the run from ``before`` to ``step``.

        Reports, evaluates and saves when their cadence is crossed.

        Args:
            get_state: Returns the state at ``step``; called only to evaluate or save.
            before: The step before the iteration.
            step: The step after it.
            window: The train report's window, holding the iteration's metrics.

        Returns:
            The window to add the next iteration to (a new one after a train report).
        """
        config = self.config
        _, progress = self._opened()
        progress.advance(step)
        self._log_episodes(window)
        if crossed(before, step, config.log_interval) or step >= config.steps:
            self.report("train", step, self._train_values(window))
            window = MetricWindow()
        if self.eval_on() and (crossed(before, step, config.eval_interval) or step >= config.steps):
            self.evaluate(get_state(), step)
        if crossed(before, step, config.checkpoint_interval):
            self.save(get_state(), step)
        return window

    def stopped(self, step: int, window: MetricWindow) -> bool:
        """Ends the train phases: reports the last window of a stopped run; True if stopped."""
        self._log_episodes(window)
        if self.stop.requested and window.iterations:
            self.report("train", step, self._train_values(window))
        self.stop_signal, self.stopped_by = self.stop.signum, self.stop.callback
        return self.stop.requested


def evaluates(config: RunConfig) -> bool:
    """Whether a run of ``config`` evaluates (an eval interval and a number of episodes)."""
    return config.eval_interval > 0 and config.eval_episodes > 0


def last_eval_score(config: RunConfig, run_dir: Path | None) -> float | None:
    """The score of the last eval report in ``run_dir``; None where the run does not evaluate
    (``evaluates``), has no run dir or no eval report yet."""
    if run_dir is None or not evaluates(config):
        return None
    evals = [r for r in read_metrics(run_dir) if r["phase"] == "eval"]
    return evals[-1]["score"] if evals else None


def complete_result(
    config: RunConfig, run_dir: Path, restore: Callable[[int], Any]
) -> TrainResult | None:
    """The result of run ``run_dir`` if it is complete already: its newest checkpoint verifies
    (``recorded_step``) at ``config.steps`` or beyond. Nothing is built or compiled.

    Args:
        config: The run's config (the stored one, with the changes of this resume).
        run_dir: The run's directory.
        restore: ``step -> train state``, the checkpoint at ``step`` restored; called only
            when the result's ``train_state`` is read (``DeferredState``).

    Returns:
        The result (no records: nothing ran), or None where the run has steps left or its
        newest checkpoint does not verify (the resume moves it aside and trains on).
    """
    newest = ckpt.latest_checkpoint(run_dir / CHECKPOINT_DIR)
    if newest is None or newest[0] < config.steps:
        return None
    step = ckpt.recorded_step(newest[1])
    if step is None or step < config.steps:
        return None
    state = DeferredState(lambda: restore(step))
    return TrainResult(state, last_eval_score(config, run_dir), step, run_dir, config)

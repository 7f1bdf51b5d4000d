"""The host training loop: train and eval phases, reports, checkpoints, resume, progress.

As in the original, training alternates two phases on one x-axis (training env steps):
the *train* phase runs ``trainer.iteration`` (collect a rollout, update) and reports every
``log_every`` steps; every ``eval_every`` steps an *eval* phase runs ``eval_episodes``
episodes with the mean action. A checkpoint follows the reports of its step, every
``checkpoint_every`` steps, at the end and on Ctrl-C / SIGTERM, so resuming from checkpoint S
(dropping records after S) continues every curve without a gap or a duplicate. A cadence left
at None is a fixed fraction of ``steps`` (``RunConfig.eval_interval`` and its siblings), so a
changed budget keeps its number of reports, evaluations and checkpoints.

An env that fails (its exception, or a dead worker, with ``max_env_restarts`` 0 or spent)
stops the run as Ctrl-C does, reports and checkpoint of the last completed iteration
included, and then raises the env's own exception, which carries an :class:`EnvFailure`
(:func:`env_failure`); its full text is in ``<run dir>/env_error.txt``. In a ``--seeds``
run every seed's run dir gets both (:mod:`batchppo.experiment.seeds`).

Example:
    >>> result = train("cartpole_jax", overrides=["steps=20000"])  # no logdir: no disk I/O
    >>> policy = load_policy("logdir/20261121T113000-cartpole_jax")  # obs batch -> actions
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import algorithm_of
from batchppo.core.backends import get_backend
from batchppo.core.keys import host_key
from batchppo.experiment import checkpoint as ckpt
from batchppo.experiment import configs
from batchppo.experiment.errors import (
    ConfigError,
    CorruptCheckpointError,
    RunDirError,
    StorageError,
    UserError,
)
from batchppo.experiment.fileio import fsync_dir
from batchppo.experiment.logging import RunLogger, read_metrics
from batchppo.experiment.runlock import RunDirLock
from batchppo.experiment.tracking import open_tracker

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
ENV_ERROR_FILE = "env_error.txt"
# What each of a run's PRNG keys is for (``host_key(seed, purpose, ...)``): init, env resets of
# training, training evals, and the evaluations of a saved run (``batchppo evaluate``), which
# therefore never repeat a training eval's episodes.
_INIT_KEY, _SIM_KEY, _EVAL_KEY, EVALUATE_RUN_KEY = 0, 1, 2, 3


class TrainerLike(Protocol):
    """What the loop needs of a trainer (``batchppo.algorithms.common.trainer.Trainer``).

    ``iteration`` reports the same metrics every iteration, :data:`EPISODE_METRICS` among
    them.
    """

    def init(self, key: jax.Array) -> Any: ...
    def init_sim(self, train_state: Any, key: jax.Array) -> Any: ...
    def iteration(self, train_state: Any, sim_state: Any) -> tuple[Any, Any, dict]: ...
    def evaluate(
        self, train_state: Any, num_episodes: int, key: jax.Array, task_metrics: bool = False
    ) -> dict: ...
    def policy(self, train_state: Any, deterministic: bool = True) -> Callable: ...
    def close(self) -> None: ...


TrainerFactory = Callable[[RunConfig], TrainerLike]


def default_trainer_factory(config: RunConfig) -> TrainerLike:
    """Builds the trainer of ``config``'s algorithm (:mod:`batchppo.algorithms.registry`)."""
    return algorithm_of(config).trainer(config)


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        train_state: The final TrainState (params, optimiser, normalisers, RNG, counters).
        score: Mean return of the last evaluation (mean action); None when evaluation is off.
        step: Training env steps done.
        run_dir: The run directory, or None without a logdir.
        config: The config the run used (the stored one when resuming).
        interrupted: Stopped early by Ctrl-C / SIGTERM (a checkpoint was saved).
        stop_signal: The signal number that stopped the run, if any.
        records: The reports (metrics.jsonl records) of this call, in order.
    """

    train_state: Any
    score: float | None
    step: int
    run_dir: Path | None
    config: RunConfig
    interrupted: bool = False
    stop_signal: int | None = None
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class EnvFailure:
    """How an env error stopped a run: attached to the env's exception (:func:`env_failure`).

    Attributes:
        step: Training env steps of the last completed iteration; the run's state at this step
            was checkpointed, unless ``checkpoint_step`` says otherwise.
        checkpoint_step: Step of the run's newest checkpoint (``step`` unless saving failed);
            None without one.
        run_dir: The run directory; None without a logdir.
        error_file: ``<run dir>/env_error.txt``, the error's full text (the env's traceback
            included); None without a logdir.
        seeds: In a ``--seeds`` run, each seed's own failure, in seed order (the fields above
            are then seed 0's); empty for a single run.
    """

    step: int
    checkpoint_step: int | None
    run_dir: Path | None
    error_file: Path | None
    seeds: tuple[EnvFailure, ...] = ()

    def checkpoints(self) -> str:
        """Where the run's checkpoint is, for messages.

        Returns:
            ``checkpoint at step S in DIR`` (``no checkpoint`` without one); for a ``--seeds``
            run ``checkpoints at step S in DIR, DIR, ...`` when the seeds' checkpoints are at
            one step, else each seed's ``s<i>: ...``.
        """
        if not self.seeds:
            if self.checkpoint_step is None:
                return "no checkpoint"
            where = f" in {self.run_dir / CHECKPOINT_DIR}" if self.run_dir is not None else ""
            return f"checkpoint at step {self.checkpoint_step:,}{where}"
        steps = {seed.checkpoint_step for seed in self.seeds}
        if steps == {None}:
            return "no checkpoints"
        if len(steps) > 1:
            return "; ".join(f"s{i}: {seed.checkpoints()}" for i, seed in enumerate(self.seeds))
        dirs = [seed.run_dir / CHECKPOINT_DIR for seed in self.seeds if seed.run_dir is not None]
        where = f" in {', '.join(map(str, dirs))}" if dirs else ""
        return f"checkpoints at step {self.checkpoint_step:,}{where}"


_ENV_FAILURE = "batchppo_env_failure"  # the attribute of the env's exception


def env_failure(error: BaseException) -> EnvFailure | None:
    """The :class:`EnvFailure` of an env exception that stopped :func:`train`; else None."""
    failure = getattr(error, _ENV_FAILURE, None)
    return failure if isinstance(failure, EnvFailure) else None


def _is_env_error(error: BaseException) -> bool:
    from batchppo.core.adapters import is_env_error  # imported late: only after a failure

    return is_env_error(error)


@contextmanager
def _stop_on_env_error(stopped: Callable[[Exception], None]) -> Iterator[None]:
    """Calls ``stopped(error)`` on an env error (:func:`_is_env_error`), which propagates.

    Other exceptions propagate untouched.
    """
    try:
        yield
    except Exception as error:
        if not _is_env_error(error):
            raise
        stopped(error)
        raise


def _mark_env_failure(error: Exception, failure: EnvFailure) -> None:
    """Attaches ``failure`` to the env's ``error`` and notes where its checkpoint is."""
    error.add_note(
        f"batchppo: training stopped at step {failure.step:,} by this env error; "
        f"{failure.checkpoints()}"
    )
    with contextlib.suppress(AttributeError, TypeError):
        setattr(error, _ENV_FAILURE, failure)


def _deleted(state: Any) -> bool:
    """Whether a buffer of ``state`` is gone (donated to a compiled call that failed)."""
    leaves = jax.tree.leaves(state)
    return any(isinstance(x, jax.Array) and x.is_deleted() for x in leaves)


# --- Run directories --------------------------------------------------------------------------


def make_timestamp() -> str:
    """The current UTC time as used in run dir names, e.g. ``20261121T113000``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")


def run_timestamp(run_dir: str | Path, name: str) -> str:
    """The timestamp of run dir ``<timestamp>-<name>`` (:func:`prepare_run_dir`), whatever
    it holds (``-`` included): what ``--timestamp`` resumes it with.

    Raises:
        ValueError: The dir's name is not ``<timestamp>-<name>``.
    """
    dir_name = Path(run_dir).name
    timestamp = dir_name.removesuffix(f"-{name}")
    if not timestamp or timestamp == dir_name:
        raise ValueError(f"{dir_name!r} is not a run dir <timestamp>-{name}")
    return timestamp


def prepare_run_dir(
    logdir: str | Path,
    name: str,
    config: RunConfig,
    timestamp: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    resume: bool = False,
    locks: contextlib.ExitStack | None = None,
) -> tuple[RunConfig, Path, bool]:
    """Creates ``<logdir>/<timestamp>-<name>/`` or reopens it to resume.

    Args:
        logdir: Parent directory of runs.
        name: The config name (the directory's suffix).
        config: The config of a new run.
        timestamp: Names the run; an existing one resumes. None: now.
        overrides: When resuming, the explicit changes asked for (e.g. ``--set``); None
            compares ``config`` with the stored one instead.
        resume: The run must exist (``--resume``): a missing directory is an error, not a
            new run.
        locks: Where to hold the run dir's lock (:mod:`~batchppo.experiment.runlock`): it
            is taken before anything in the dir is written (a new run's dir holds it from
            its creation) and released when ``locks`` closes. None: no lock.

    Returns:
        ``(config, run_dir, resumed)``; when resuming, the stored config with allowed changes.

    Raises:
        RunDirError: The directory exists but is not a run (no readable config.yaml), or
            ``resume`` and it does not exist.
        ConfigError: Changes that would alter a resumed run's meaning.
        RunDirLockedError: Another process holds the run dir (a subclass of RunDirError).
    """
    timestamp = timestamp or make_timestamp()
    if not timestamp or "/" in timestamp or os.sep in timestamp or timestamp in (".", ".."):
        raise RunDirError(f"--timestamp {timestamp!r}: use a plain name such as 20261121T113000")
    run_dir = Path(logdir) / f"{timestamp}-{name}"
    config_path = run_dir / CONFIG_FILE
    if resume and not run_dir.exists():
        raise RunDirError(
            f"--resume: there is no run {run_dir}; check --logdir, --timestamp and --config, "
            "or drop --resume to start a new run"
        )
    if run_dir.exists():
        if not config_path.is_file():
            raise RunDirError(f"{run_dir} exists but holds no {CONFIG_FILE}: not a batchppo run")
        if locks is not None:
            locks.enter_context(RunDirLock(run_dir))
        stored = configs.load_config(config_path)
        _check_same_algorithm(stored, config, run_dir)
        if overrides is None:
            overrides = {
                f.name: getattr(config, f.name)
                for f in dataclasses.fields(stored)
                if getattr(config, f.name) != getattr(stored, f.name)
            }
        config = configs.check_resume_overrides(stored, overrides)
        if config != stored:
            configs.save_config(config, config_path)
        return config, run_dir, True
    # Built under a temporary name and renamed: a kill at any moment leaves no half-made run.
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=run_dir.parent, prefix=f".{run_dir.name}."))
    lock = locks.enter_context(RunDirLock(staging)) if locks is not None else None
    (staging / CHECKPOINT_DIR).mkdir()
    configs.save_config(config, staging / CONFIG_FILE)
    try:
        staging.rename(run_dir)
    except OSError:
        if lock is not None:
            lock.release()
        shutil.rmtree(staging, ignore_errors=True)
        raise RunDirError(f"{run_dir} was created by another process meanwhile") from None
    if lock is not None:
        lock.moved(run_dir)
    fsync_dir(run_dir.parent)
    return config, run_dir, False


def _check_same_algorithm(stored: RunConfig, config: RunConfig, run_dir: Path) -> None:
    """Refuses to resume a run of one algorithm with a config of another.

    Raises:
        ConfigError: Naming both algorithms and the fix.
    """
    have, want = algorithm_of(stored).name, algorithm_of(config).name
    if have != want:
        raise ConfigError(
            f"{run_dir} holds a run of algorithm {have!r}, not {want!r}: resume it with a "
            f"{have} config, or start a new run (another --timestamp)"
        )


def open_run_dir(run_dir: str | Path) -> tuple[RunConfig, Path]:
    """Checks that ``run_dir`` is a run and returns its stored config.

    Raises:
        RunDirError: Missing directory or no config.yaml.
        ConfigError: Invalid config.yaml.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run dir {run_dir} does not exist")
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunDirError(f"{run_dir} holds no {CONFIG_FILE}: not a batchppo run dir")
    return configs.load_config(run_dir / CONFIG_FILE), run_dir


# --- Progress output --------------------------------------------------------------------------


def _fmt(value: Any, spec: str = ".1f") -> str:
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


class Progress:
    """A tqdm bar (steps, steps/s, ETA, last score) on a terminal; plain lines otherwise.

    Args:
        mode: ``auto`` (bar if stdout is a terminal), ``bar``, ``lines`` or ``none``.
        total: Step budget.
        initial: Steps already done (resume).
    """

    def __init__(self, mode: str, total: int, initial: int) -> None:
        if mode not in ("auto", "bar", "lines", "none"):
            raise ValueError(f"progress={mode!r}: use auto, bar, lines or none")
        if mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "lines"
        self.mode, self.total, self._score = mode, total, float("nan")
        self._bar = None
        self._start, self._start_step = time.monotonic(), initial
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, initial=initial, unit="step", unit_scale=True, dynamic_ncols=True,
                file=sys.stdout, smoothing=0.1,
            )  # fmt: skip

    def advance(self, step: int) -> None:
        """Moves the bar to ``step``."""
        if self._bar is not None:
            if step > self._bar.total:  # The last iteration may overshoot the budget.
                self._bar.total = step
            self._bar.update(step - self._bar.n)

    def report(self, record: Mapping[str, Any]) -> None:
        """Shows one report (a metrics.jsonl record)."""
        score = record.get("score")
        if record["phase"] == "train":
            # A window in which no episode ended has no score: show the last one.
            self._score = score = self._score if score is None else score
        if self._bar is not None:
            self._bar.set_postfix_str(f"score {_fmt(self._score)}", refresh=False)
            if record["phase"] == "eval":
                self.message(f"eval at step {record['step']:,}: score {_fmt(score)}")
        elif self.mode == "lines":
            step = record["step"]
            if record["phase"] == "eval":
                length = _fmt(record.get("length"), ".0f")
                line = f"eval  step {step:>11,} | score {_fmt(score):>9} | length {length}"
            else:
                elapsed = time.monotonic() - self._start
                rate = (step - self._start_step) / elapsed if elapsed > 0 else 0.0
                eta = max(self.total - step, 0) / rate if rate > 0 else float("nan")
                eta_s = "n/a" if math.isnan(eta) else str(datetime.timedelta(seconds=int(eta)))
                percent = min(100, 100 * step // self.total)
                line = (
                    f"train step {step:>11,}/{self.total:,} ({percent:3d}%) | "
                    f"score {_fmt(score):>9} | {_fmt(record.get('sps'), '.0f')} steps/s | "
                    f"ETA {eta_s}"
                )
            print(line, flush=True)

    def message(self, text: str) -> None:
        """Prints a line without breaking the bar."""
        if self._bar is not None:
            self._bar.write(text)
        elif self.mode != "none":
            print(text, flush=True)

    def close(self) -> None:
        """Closes the bar."""
        if self._bar is not None:
            self._bar.close()


# --- Graceful stop ----------------------------------------------------------------------------


class _StopFlag:
    def __init__(self) -> None:
        self.signum: int | None = None
        self.abort = False

    def check_abort(self) -> None:
        """Raises the KeyboardInterrupt of a second Ctrl-C, in case it got lost.

        Python ignores exceptions raised while a garbage-collection callback runs (JAX has
        one), so a KeyboardInterrupt raised by the signal handler at that moment is printed
        and dropped; the flag keeps the request.
        """
        if self.abort:
            raise KeyboardInterrupt


@contextmanager
def _graceful_stop(
    message: Callable[[str], None], flag: _StopFlag | None = None
) -> Iterator[_StopFlag]:
    """Turns the first SIGINT/SIGTERM into a flag (finish the step, save); a 2nd SIGINT aborts.

    Args:
        message: Tells the user that the run stops after this iteration.
        flag: The flag to raise; None: a new one.

    Yields:
        The flag, raised by the signal handlers while the context is open.
    """
    flag = flag if flag is not None else _StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag  # Signal handlers can only be installed from the main thread.
        return

    def handler(signum: int, frame: Any) -> None:
        if flag.signum is not None and signum == signal.SIGINT:
            flag.abort = True
            raise KeyboardInterrupt
        flag.signum = signum
        message("stopping after this iteration, then saving (Ctrl-C again aborts)")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# --- The loop ---------------------------------------------------------------------------------


def _crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of ``every`` lies in ``(before, after]``."""
    return every > 0 and after // every > before // every


RUNNING_TOTALS = frozenset({"env_restarts"})
"""Trainer metrics that are running totals: a train report shows the latest value (not the
window's mean), and a resumed run continues it from the last report it kept."""


EPISODE_METRICS = ("env_steps", "episodes", "score", "length")
"""Metrics every trainer iteration reports: env steps collected, episodes that ended, and
their mean return and length (nan when none ended)."""


class _Window:
    """Aggregates the trainer's per-iteration metrics between two train reports.

    Every iteration reports the same metrics (a trainer's set is fixed), the
    :data:`EPISODE_METRICS` among them; an iteration that lacks one, or reports others than
    the window's first, raises ``ValueError`` naming them, rather than skewing the means.
    """

    def __init__(self) -> None:
        self.keys: frozenset[str] | None = None  # the metrics of the window's first iteration
        self.values: dict[str, list[float]] = {}
        self.totals: dict[str, float] = {}
        self.steps = self.episodes = self.iterations = 0
        self.score_sum = self.length_sum = 0.0
        self.seconds = self.all_seconds = 0.0
        self.all_steps = 0

    def add(self, metrics: Mapping[str, Any], seconds: float, compiling: bool = False) -> None:
        """Adds one iteration; one that compiled counts for speed only if it is alone.

        Args:
            metrics: The iteration's metrics (``Trainer.iteration``).
            seconds: Its wall time.
            compiling: Whether that time includes compiling the iteration.

        Raises:
            ValueError: ``metrics`` lacks one of :data:`EPISODE_METRICS`, or its metrics
                differ from those of the window's first iteration.
        """
        self._check_keys(metrics)
        self.iterations += 1
        steps = int(metrics["env_steps"])
        self.all_seconds += seconds
        self.all_steps += steps
        if not compiling:
            self.seconds += seconds
            self.steps += steps
        episodes = int(metrics["episodes"])
        if episodes and not math.isnan(float(metrics["score"])):
            self.episodes += episodes
            self.score_sum += episodes * float(metrics["score"])
            self.length_sum += episodes * float(metrics["length"])
        for key, value in metrics.items():
            if key in RUNNING_TOTALS:
                self.totals[key] = float(value)
            elif key not in EPISODE_METRICS:
                self.values.setdefault(key, []).append(float(value))

    def _check_keys(self, metrics: Mapping[str, Any]) -> None:
        missing = [key for key in EPISODE_METRICS if key not in metrics]
        if missing:
            raise ValueError(
                f"iteration metrics lack {', '.join(map(repr, missing))}: a trainer's "
                f"iteration reports {', '.join(EPISODE_METRICS)} (see TrainerLike)"
            )
        keys = frozenset(metrics)
        if self.keys is None:
            self.keys = keys
        elif keys != self.keys:
            lost, new = sorted(self.keys - keys), sorted(keys - self.keys)
            raise ValueError(
                "iteration metrics changed between iterations "
                f"(missing: {', '.join(lost) or 'none'}; new: {', '.join(new) or 'none'}); "
                "a trainer reports the same metrics every iteration"
            )

    def summary(self) -> dict[str, float]:
        """The train report's values: episode means, speed, metric means, running totals."""
        nan = float("nan")
        out = {
            "score": self.score_sum / self.episodes if self.episodes else nan,
            "length": self.length_sum / self.episodes if self.episodes else nan,
            "episodes": self.episodes,
            "sps": self.steps / self.seconds
            if self.seconds > 0 and self.steps
            else (self.all_steps / self.all_seconds if self.all_seconds > 0 else nan),
        }
        for key, values in self.values.items():
            finite = [v for v in values if not math.isnan(v)]
            out[key] = float(np.mean(finite)) if finite else nan
        out.update(self.totals)
        return out


class _Run:
    """One call of :func:`train`: state, cadence and bookkeeping, phase by phase.

    :meth:`run` runs it all; a driver of several runs (:mod:`batchppo.experiment.seeds`)
    calls :meth:`start`, :meth:`after_iteration`, :meth:`stopped`, :meth:`close` and
    :meth:`result` itself.

    Args:
        trainer: Trains and evaluates.
        config: The run's config.
        run_dir: The run directory; None: no disk I/O.
        progress: Progress output mode (:class:`Progress`).
        stop: The stop flag of a driver that installs the signal handlers itself (the
            ``--seeds`` driver, one flag for all its runs); None: a flag of this run's own,
            raised by the handlers that :meth:`run` installs.
        group: The W&B group of a tracked run when ``wandb_group`` is None (a ``--seeds``
            run's common name).
    """

    def __init__(
        self,
        trainer: TrainerLike,
        config: RunConfig,
        run_dir: Path | None,
        progress: str,
        stop: _StopFlag | None = None,
        group: str | None = None,
    ) -> None:
        self.trainer, self.config, self.run_dir = trainer, config, run_dir
        self.group = group
        self.ckpt_dir = run_dir / CHECKPOINT_DIR if run_dir is not None else None
        self.stop = stop if stop is not None else _StopFlag()
        self.records: list[dict[str, Any]] = []
        self.last_eval: tuple[int, float] | None = None
        self.saved_step = -1
        self.progress_mode = progress
        self.stop_signal: int | None = None
        # Opened by start(): the wall time of earlier sessions (resume), this session's start
        # on the monotonic clock, the logs, the running totals to continue, the progress.
        self.wall_offset = 0.0
        self.started: float | None = None
        self.logger: RunLogger | None = None
        self.totals_before: dict[str, float] = {}
        self.progress: Progress | None = None
        # While training: the newest state an iteration completed, its step, the open window.
        self.completed: tuple[Any, int, _Window] | None = None

    def restore(self) -> tuple[Any, int | None, float]:
        """The initial TrainState, the step it was restored from (None if fresh), wall time.

        A resume takes the newest checkpoint that verifies; damaged ones are moved aside,
        each named in a message (:func:`~batchppo.experiment.checkpoint.restore_newest`).
        """
        state = self.trainer.init(self._key(_INIT_KEY))
        found = ckpt.restore_newest(self.ckpt_dir, state, self.message) if self.ckpt_dir else None
        if found is None:
            return state, None, 0.0
        state, meta, step = found
        self.saved_step = step
        return state, step, float(meta.get("wall_time", 0.0))

    def _key(self, purpose: int, *words: int) -> np.ndarray:
        """The run's PRNG key for ``purpose`` (init, env resets, evaluation) at ``words``."""
        return host_key(self.config.seed, purpose, *words)

    def _opened(self) -> tuple[RunLogger, Progress]:
        """The logs and progress output that :meth:`start` opened."""
        if self.logger is None or self.progress is None:
            raise RuntimeError("_Run: start() opens the logs and the progress output first")
        return self.logger, self.progress

    def wall_time(self) -> float:
        """Seconds of training wall time, earlier sessions of a resumed run included."""
        if self.started is None:
            raise RuntimeError("_Run: start() starts the clock first")
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
        """Writes a report (a metrics.jsonl record) and shows it."""
        logger, progress = self._opened()
        try:
            record = logger.log(phase, step, {**values, "wall_time": self.wall_time()})
        except OSError as error:
            raise self._storage_error(f"the {phase} report at step {step:,}", error) from None
        self.records.append(record)
        progress.report(record)
        if phase == "eval":
            self.last_eval = (step, record["score"])

    def evaluate(self, state: Any, step: int) -> None:
        start = time.monotonic()
        key = self._key(_EVAL_KEY, step)
        result = self.trainer.evaluate(state, self.config.eval_episodes, key)
        seconds = time.monotonic() - start
        lengths = np.asarray(result.get("lengths", []))
        self.report(
            "eval", step,
            {
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

    def run(self) -> TrainResult:
        """Runs the whole training call: start, train phases, final checkpoint, close."""
        # The stop flag covers start-up too: a Ctrl-C while programs compile or envs start
        # stops the run cleanly before its first iteration.
        with _graceful_stop(self.message, self.stop):
            return self._run()

    def _run(self) -> TrainResult:
        state, step = self.start()
        interrupted = False
        try:
            state, step, interrupted = self._train_phases(state, step)
            self.save(state, step)
        except BaseException:
            with contextlib.suppress(StorageError):  # the error in flight is the one to show
                self.close()
            raise
        self.close()
        return self.result(state, step, interrupted)

    def start(self, precompile: bool = True) -> tuple[Any, int]:
        """Compiles, restores (or initialises) the state and opens the logs; ``(state, step)``."""
        config = self.config
        precompile_fn = getattr(self.trainer, "precompile", None) if precompile else None
        if precompile_fn is not None:  # Compile every program side by side, in the background.
            precompile_fn(
                iterations=(1,), eval_episodes=config.eval_episodes if self._eval_on() else None
            )
        state, resume_step, self.wall_offset = self.restore()
        self.stop.check_abort()
        step = int(state.step)
        self.started = time.monotonic()
        try:
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
        if step >= config.steps:
            self.message(
                f"run already complete at step {step:,} (steps={config.steps:,}); "
                "raise it with --set steps=N to continue"
            )
        return state, step

    def close(self) -> None:
        """Closes the progress output and the logs that :meth:`start` opened."""
        if self.progress is not None:
            self.progress.close()
        if self.logger is not None:
            logger, self.logger = self.logger, None
            try:
                logger.close()
            except OSError as error:
                raise self._storage_error("the last reports", error) from None

    def result(self, state: Any, step: int, interrupted: bool) -> TrainResult:
        """The :class:`TrainResult` of a run that ended at ``step``."""
        score = self.last_eval[1] if self.last_eval else None
        if score is None and self.run_dir is not None and self._eval_on():
            evals = [r for r in read_metrics(self.run_dir) if r["phase"] == "eval"]
            score = evals[-1]["score"] if evals else None
        return TrainResult(
            state, score, step, self.run_dir, self.config, interrupted, self.stop_signal,
            self.records,
        )  # fmt: skip

    def _last_totals(self) -> dict[str, float]:
        """The running totals of the last train report on disk (a resume continues them)."""
        if self.run_dir is None:
            return {}
        train = [r for r in read_metrics(self.run_dir) if r["phase"] == "train"]
        last = train[-1] if train else {}
        return {key: float(last[key]) for key in RUNNING_TOTALS if last.get(key) is not None}

    def _train_values(self, window: _Window) -> dict[str, float]:
        """A train report's values: the window's summary, running totals continued."""
        values = window.summary()
        for key, before in self.totals_before.items():
            if key in values:
                values[key] += before
        return values

    def _eval_on(self) -> bool:
        return self.config.eval_interval > 0 and self.config.eval_episodes > 0

    def _env_failed(self, error: Exception, state: Any, step: int, window: _Window) -> None:
        """Stops the run after an env error as Ctrl-C does (:meth:`stop_by_env_error`) and
        marks ``error``: an :class:`EnvFailure` and a note saying where the checkpoint is."""
        failure, notes = self.stop_by_env_error(error, state, step, window)
        for note in notes:
            error.add_note(note)
        _mark_env_failure(error, failure)

    def stop_by_env_error(
        self, error: Exception, state: Any, step: int, window: _Window
    ) -> tuple[EnvFailure, list[str]]:
        """Stops the run after an env error as Ctrl-C does.

        Reports the window so far (unless an evaluation failed after its report) and
        checkpoints ``state``, the newest state an iteration completed (the input of the
        iteration that failed: host-env trainers do not donate it), and writes the error's
        full text to ``env_error.txt``.

        Args:
            error: The env's exception.
            state: The state at ``step``; None or deleted buffers: lost with the failed call.
            step: The step of the last completed iteration.
            window: The open train report's window.

        Returns:
            The run's :class:`EnvFailure` and notes on what went wrong on the way (a lost
            state, a failed save), for ``error``.
        """
        notes = []
        last = self.records[-1] if self.records else {}
        if window.iterations and (last.get("phase"), last.get("step")) != ("train", step):
            self.report("train", step, self._train_values(window))
        if self.ckpt_dir is not None:
            if state is None or _deleted(state):
                notes.append(f"the state at step {step:,} was lost with the failed call")
            else:
                try:
                    self.save(state, step)
                except Exception as save_error:  # the env's error stays the one raised
                    notes.append(f"saving a checkpoint at step {step:,} failed: {save_error!r}")
        saved = self.saved_step if self.saved_step >= 0 else None
        error_file = None
        if self.run_dir is not None:
            error_file = self.run_dir / ENV_ERROR_FILE
            with contextlib.suppress(OSError):
                error_file.write_text("".join(traceback.format_exception(error)))
        return EnvFailure(step, saved, self.run_dir, error_file), notes

    def _train_phases(self, state: Any, step: int) -> tuple[Any, int, bool]:
        """Iterates until the step budget or a stop request; returns (state, step, stopped).

        A KeyboardInterrupt (a second Ctrl-C) propagates without saving: the trainer donates
        its input buffers, so the state in hand may be gone; the last checkpoint stays valid
        and resuming from it drops the reports written after it. An env error checkpoints
        the last completed state and propagates (:meth:`_env_failed`).
        """
        # On an env error: the newest state an iteration completed, its step, the open window.
        with _stop_on_env_error(self._env_failed_in_training):
            return self._iterate(state, step)

    def _env_failed_in_training(self, error: Exception) -> None:
        """:meth:`_env_failed` with the newest completed state of :meth:`_iterate`."""
        assert self.completed is not None, "_iterate sets it before its first trainer call"
        self._env_failed(error, *self.completed)

    def _iterate(self, state: Any, step: int) -> tuple[Any, int, bool]:
        config = self.config
        window = _Window()
        self.completed = (state, step, window)
        sim = self.trainer.init_sim(state, self._key(_SIM_KEY, step))
        compiled = False  # The first iteration's time is mostly compilation: not a speed.
        stop = self.stop
        while step < config.steps and stop.signum is None:
            start = time.monotonic()
            state, sim, metrics = self.trainer.iteration(state, sim)
            before, step = step, int(state.step)
            window.add(metrics, time.monotonic() - start, compiling=not compiled)
            compiled = True
            self.completed = (state, step, window)  # an evaluation may still fail
            window = self.after_iteration(lambda state=state: state, before, step, window)
            self.completed = (state, step, window)
        return state, step, self.stopped(step, window)

    def after_iteration(
        self, get_state: Callable[[], Any], before: int, step: int, window: _Window
    ) -> _Window:
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
        if _crossed(before, step, config.log_interval) or step >= config.steps:
            self.report("train", step, self._train_values(window))
            window = _Window()
        if self._eval_on() and (
            _crossed(before, step, config.eval_interval) or step >= config.steps
        ):
            self.evaluate(get_state(), step)
        if _crossed(before, step, config.checkpoint_interval):
            self.save(get_state(), step)
        return window

    def stopped(self, step: int, window: _Window) -> bool:
        """Ends the train phases: reports the last window of a stopped run; True if stopped."""
        if self.stop.signum is not None and window.iterations:
            self.report("train", step, self._train_values(window))
        self.stop_signal = self.stop.signum
        return self.stop.signum is not None


EnvArg = str | Callable[..., Any]
"""An env for :func:`train`: an env id (``"Pendulum-v1"``, ``"module:EnvId"``,
``"module:factory"``) or a factory (a callable returning a ``gymnasium.Env``)."""


def env_id_of(env: EnvArg) -> str:
    """The env id a run records for ``env``: the id itself, or a factory's
    ``"module:qualname"`` (:func:`batchppo.envs.make.factory_env_id`).

    Raises:
        ConfigError: A factory that cannot be recorded (a lambda, a nested function, a
            function of a script run as a file), naming the fix.
    """
    if isinstance(env, str):
        return env
    from batchppo.envs.make import factory_env_id

    try:
        return factory_env_id(env)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _resolve(
    config: RunConfig | str | None,
    name: str | None,
    overrides: Sequence[str],
    env: EnvArg | None = None,
) -> tuple[RunConfig, str, dict[str, Any]]:
    if config is None:
        if env is None:
            raise ConfigError("train: give a config (a preset name or a config), or an env")
        # The env is built with the env_kwargs of the overrides to read its spaces.
        env_kwargs = dict(configs.parse_override(o) for o in overrides).get("env_kwargs")
        config, message = configs.recipe_for_env(env_id_of(env), env_kwargs)
        print(f"batchppo: {message}", file=sys.stderr, flush=True)
        name = name or config.env.rpartition(":")[2]
    elif isinstance(config, str):
        name, config = name or config, configs.get_preset(config)
    else:
        algorithm_of(config)  # a TypeError naming the config classes, for anything else
    changes = dict(configs.parse_override(o, type(config)) for o in overrides)
    if env is not None:
        changes = {"env": env_id_of(env), **changes}
    return configs.replace_config(config, changes), name or "custom", changes


def _build_trainer(factory: TrainerFactory | None, config: RunConfig) -> TrainerLike:
    import gymnasium

    try:
        return (factory or default_trainer_factory)(config)
    except gymnasium.error.DependencyNotInstalled as error:
        # E.g. MuJoCo envs without the extra: a set-up problem, not a bug.
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"cannot build {config.env!r}: {first}") from None


def train(
    config: RunConfig | str | None = None,
    logdir: str | Path | None = None,
    *,
    env: EnvArg | None = None,
    name: str | None = None,
    timestamp: str | None = None,
    overrides: Sequence[str] = (),
    progress: str = "auto",
    trainer_factory: TrainerFactory | None = None,
    seeds: int | None = None,
    resume: bool = False,
) -> TrainResult | list[TrainResult]:
    """Trains a policy; resumes when ``<logdir>/<timestamp>-<name>`` already exists.

    With ``seeds=N``, seeds ``config.seed + i`` (``i < N``) train together in one program
    into run dirs ``<timestamp>-<name>-s<i>`` (see :mod:`batchppo.experiment.seeds`), and
    one result per seed comes back.

    Args:
        config: An algorithm's config (``PPOConfig``, ``A2CConfig``; see
            :mod:`batchppo.algorithms.registry`) or a preset name (see ``batchppo list``).
            When a run resumes, a preset name checks only ``overrides`` against the stored
            config (the preset may have been retuned since); a config must match it field by
            field (up to the changes a resume allows). None with ``env``: a starting recipe
            chosen from the env's spaces (:func:`configs.recipe_for_env`; the choice is
            printed on stderr).
        logdir: Parent directory of runs; None: no disk I/O (no logs, no checkpoints).
        env: The env to train on, replacing the config's: an env id (``"Pendulum-v1"``,
            ``"module:EnvId"``, ``"module:factory"``) or a factory, a callable returning a
            ``gymnasium.Env`` (called with ``env_kwargs``). The run's ``config.yaml``
            records a factory as ``"module:qualname"``, which a resume imports again, so it
            must be defined at the top level of an importable module.
        name: Run dir suffix; defaults to the preset name (the env's name for a recipe), or
            ``custom``.
        timestamp: Run dir prefix; an existing run resumes with its stored config.
        overrides: ``KEY=VALUE`` strings applied to the config (typed; see
            :func:`configs.apply_overrides`). When resuming, only bookkeeping keys and a
            larger ``steps`` are accepted.
        progress: ``auto`` (bar on a terminal, lines otherwise), ``bar``, ``lines``, ``none``.
        trainer_factory: Builds the trainer from the config (default: the trainer of the
            config's algorithm); not with ``seeds``.
        seeds: Train this many seeds together (see above); None: one run.
        resume: The run (every seed's) must exist: a missing run dir raises
            :class:`~batchppo.experiment.errors.RunDirError` instead of starting a new run.

    Returns:
        The final state, last eval score, step count and run dir; with ``seeds``, a list of
        them, one per seed.

    Raises:
        UserError: Unknown preset, bad override, an env that fails its start-up check (its
            id, module, constructor or spaces: :func:`configs.check_env`, run before a run
            dir is made), unusable run dir or checkpoint (subclasses of
            :class:`~batchppo.experiment.errors.UserError`), a run dir that another process
            holds (:class:`~batchppo.experiment.runlock.RunDirLockedError`), a write into the
            run dir that failed (:class:`~batchppo.experiment.errors.StorageError`).
    """
    if resume and (logdir is None or timestamp is None):
        raise RunDirError("--resume needs --logdir and --timestamp: the run to resume")
    if seeds is not None:
        if trainer_factory is not None:
            raise TypeError("train: seeds= trains with the algorithm's SeedsTrainer (no factory)")
        from batchppo.experiment.seeds import train_seeds

        return train_seeds(
            config, logdir, seeds, name=name, timestamp=timestamp, overrides=overrides,
            progress=progress, resume=resume, env=env,
        )  # fmt: skip
    # With a preset, only the explicit overrides may differ from a resumed run's stored config
    # (the preset itself may have been retuned since); with a config, every differing field.
    # A recipe is a preset too: only the explicit overrides count on resume.
    from_preset = config is None or isinstance(config, str)
    config, name, changes = _resolve(config, name, overrides, env)
    run_dir = None
    if logdir is None or timestamp is None or not (Path(logdir) / f"{timestamp}-{name}").exists():
        configs.check_env(config)  # Before a run dir is made for it (a resume checks its own).
    resumed = False
    with contextlib.ExitStack() as locks:
        if logdir is not None:
            explicit = changes if from_preset else None
            config, run_dir, resumed = prepare_run_dir(
                logdir, name, config, timestamp, explicit, resume=resume, locks=locks
            )
            if resumed:
                configs.check_env(config)
        try:
            trainer = _build_trainer(trainer_factory, config)
        except BaseException:
            if run_dir is not None and not resumed:  # a failed start leaves no run dir behind
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
        try:
            return _Run(trainer, config, run_dir, progress).run()
        finally:
            trainer.close()


# --- Loading trained policies -----------------------------------------------------------------


def _loading_config(config: RunConfig) -> RunConfig:
    # Loading needs the networks, not parallel simulation: a backend that runs its envs away
    # from the caller (workers, actors) loads with its in-process twin (``load_with``).
    backend = get_backend(config.backend)
    if backend.load_with is None or backend.load_with == backend.name:
        return config
    dropped = dict.fromkeys(backend.config_fields)  # the old backend's own fields, unset
    return dataclasses.replace(config, backend=backend.load_with, num_workers=None, **dropped)


def load_run(
    run_dir: str | Path,
    checkpoint: int | None = None,
    trainer_factory: TrainerFactory | None = None,
) -> tuple[RunConfig, TrainerLike, Any, int]:
    """Restores a run's checkpoint.

    Args:
        run_dir: A run directory written by :func:`train`.
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
    loading = dataclasses.replace(_loading_config(config), devices=1)
    configs.check_env_id(loading)  # e.g. a module:factory that is not importable from here
    trainer = _build_trainer(trainer_factory, loading)
    try:
        template = trainer.init(host_key(config.seed, _INIT_KEY))
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
        run_dir: A run directory written by :func:`train`.
        checkpoint: Env step of the checkpoint; None: the newest.
        trainer_factory: Builds the trainer (default: the config's algorithm's).

    Returns:
        A function mapping observations of shape ``(batch, *obs_shape)`` to actions, both
        as the agent sees them inside the env stack. With ``normalize_ranges`` (the
        default) it takes observations whose bounded dims are mapped to ``[-1, 1]`` (the
        maps of :mod:`batchppo.envs.ranges`) and gives Box actions on that ``[-1, 1]``
        scale, unclipped (the stack clips them and maps them to the env's bounds); without
        it, the env's own observations and Box actions, unclipped. The run's observation
        normalisation is applied inside. ``batchppo export`` writes a file that takes and
        gives the env's own values.

    Raises:
        RunDirError, ConfigError, CheckpointError: Missing or corrupt run dir or checkpoint.
    """
    _, trainer, state, _ = load_run(run_dir, checkpoint, trainer_factory)
    try:
        return trainer.policy(state, deterministic=True)
    finally:
        trainer.close()

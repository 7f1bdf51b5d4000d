"""Several seeds in one program: ``batchppo train --seeds N`` and ``train(..., seeds=N)``.

Seed ``i`` is ``config.seed + i``. The seeds train together in one
:class:`~batchppo.algorithms.common.seeds.SeedsTrainer` (one compiled iteration; for host envs
one shared batch env), and each writes an ordinary single-seed run dir
``<logdir>/<timestamp>-<config>-s<i>/`` whose ``config.yaml`` holds its own seed. The
bookkeeping of each seed (reports, evaluations, checkpoints, their cadence) is the
single-run loop's (:class:`~batchppo.experiment.run.Run`), driven per seed with its slice
of the stacked state.

Resume: ``--seeds N --timestamp T`` resumes all ``N`` dirs together when all exist and their
newest checkpoints are at one step; otherwise it stops with a one-line error. One seed's dir
resumes alone as any run: ``--config <config>-s<i> --timestamp T`` (without ``--seeds``).

An env error (host backends: the seeds share their envs) stops every seed as a single run's
loop stops: each seed's open report, a checkpoint of its last completed iteration (all at
one step, so ``--seeds N --timestamp T`` resumes them) and its ``env_error.txt``; the env's
exception then propagates with an :class:`~batchppo.experiment.env_failures.EnvFailure` whose
``seeds`` hold each seed's failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import algorithm_of
from batchppo.core.keys import host_key
from batchppo.experiment import checkpoint as ckpt
from batchppo.experiment import configs, trainers
from batchppo.experiment.env_failures import mark_env_failure, state_deleted, stop_on_env_error
from batchppo.experiment.errors import ConfigError, RunDirError
from batchppo.experiment.launch import EnvArg, resolve_config
from batchppo.experiment.run import Run, TrainResult
from batchppo.experiment.rundir import CHECKPOINT_DIR, make_timestamp, prepare_run_dir
from batchppo.experiment.stopping import graceful_stop
from batchppo.experiment.trainers import INIT_KEY, SIM_KEY
from batchppo.experiment.window import MetricWindow


class _SeedView:
    """One seed of a :class:`SeedsTrainer` as the single-run loop sees its trainer.

    ``init`` hands out the seed's slice of the stacked fresh state (the loop restores a
    checkpoint into it); evaluation and policies are the trainer's single-seed ones.
    """

    def __init__(self, trainer: Any, fresh: Any) -> None:
        self._trainer = trainer
        self._fresh = fresh

    def init(self, key: Any) -> Any:
        del key  # the stacked init used this seed's key already
        return self._fresh

    def init_sim(self, train_state: Any, key: Any) -> Any:
        raise NotImplementedError("the seeds are simulated together")

    def iteration(self, train_state: Any, sim_state: Any) -> tuple[Any, Any, dict]:
        raise NotImplementedError("the seeds are trained together")

    def evaluate(self, train_state: Any, num_episodes: int, key: Any) -> dict:
        return self._trainer.evaluate(train_state, num_episodes, key)

    def policy(self, train_state: Any, deterministic: bool = True) -> Any:
        return self._trainer.policy(train_state, deterministic)

    def close(self) -> None:
        """The trainer is closed by its owner."""


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

    With ``locks``, every dir's lock is held there (see
    :func:`~batchppo.experiment.rundir.prepare_run_dir`).

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


def _stop_message(text: str) -> None:
    print(f"batchppo: {text}", flush=True)


class _SeedRuns:
    """The train phases of every seed's run loop, driven over one stacked state.

    Args:
        trainer: The ``SeedsTrainer``.
        runs: Each seed's started :class:`~batchppo.experiment.run.Run`.
        stop: The stop flag of the runs.
    """

    def __init__(self, trainer: Any, runs: Sequence[Run], stop: Any) -> None:
        self.trainer, self.runs, self.stop = trainer, runs, stop
        # The newest stacked state an iteration completed, its step and each seed's window.
        self.completed: tuple[Any, int, list[MetricWindow]] | None = None

    def train_phases(self, state: Any, step: int) -> tuple[Any, int, bool]:
        """Iterates until the step budget or a stop request; returns (state, step, stopped).

        An env error stops every seed (:meth:`_env_failed`) and propagates, as in
        ``Run._train_phases``.
        """
        with stop_on_env_error(lambda error: self._env_failed(error, *self.completed)):
            return self._iterate(state, step)

    def _iterate(self, state: Any, step: int) -> tuple[Any, int, bool]:
        from batchppo.algorithms.common.seeds import unstack

        runs, n = self.runs, len(self.runs)
        windows = [MetricWindow() for _ in runs]
        self.completed = (state, step, windows)  # `windows` is updated in place
        keys = [host_key(run.config.seed, SIM_KEY, step) for run in runs]
        sim = self.trainer.init_sim(state, keys)
        compiled = False
        while step < runs[0].config.steps and self.stop.signum is None:
            start = time.monotonic()
            state, sim, metrics = self.trainer.iteration(state, sim)
            before, step = step, int(state.step[0])
            seconds = time.monotonic() - start
            for window, seed_metrics in zip(windows, metrics, strict=True):
                window.add(seed_metrics, seconds, compiling=not compiled)
            compiled = True
            self.completed = (state, step, windows)  # an evaluation may still fail
            for i, run in enumerate(runs):
                windows[i] = run.after_iteration(
                    lambda i=i, state=state: unstack(state, i), before, step, windows[i]
                )
            evals = [run.last_eval for run in runs]
            if all(e is not None and e[0] == step for e in evals) and n > 1:
                scores = np.array([e[1] for e in evals])
                runs[0].message(
                    f"eval at step {step:,}, {n} seeds: "
                    f"{' '.join(f'{s:.1f}' for s in scores)} "
                    f"(mean {scores.mean():.1f} ± {scores.std():.1f})"
                )
        interrupted = any([run.stopped(step, w) for run, w in zip(runs, windows, strict=True)])
        return state, step, interrupted

    def _env_failed(
        self, error: Exception, state: Any, step: int, windows: Sequence[MetricWindow]
    ) -> None:
        """Stops every seed's run after an env error (``Run.stop_by_env_error``) and marks
        ``error`` with an :class:`~batchppo.experiment.env_failures.EnvFailure` of all seeds.

        An evaluation that failed stops the seeds after it before their bookkeeping of that
        step: their open windows are reported at ``step`` and checkpointed with the rest.
        """
        from batchppo.algorithms.common.seeds import unstack

        lost = state_deleted(state)
        failures = []
        for i, (run, window) in enumerate(zip(self.runs, windows, strict=True)):
            seed_state = None if lost else unstack(state, i)
            failure, notes = run.stop_by_env_error(error, seed_state, step, window)
            for note in notes:
                error.add_note(f"seed dir s{i}: {note}")
            failures.append(failure)
        mark_env_failure(error, dataclasses.replace(failures[0], seeds=tuple(failures)))


def run_seeds(
    trainer: Any,
    run_configs: Sequence[RunConfig],
    run_dirs: Sequence[Path | None],
    progress: str,
) -> list[TrainResult]:
    """Trains the seeds of ``trainer`` (a ``SeedsTrainer``) with one run loop per seed.

    Seed 0 shows the progress (``progress``); each evaluation prints every seed's score.

    Raises:
        Exception: An env's own exception, after every seed's run dir got its checkpoint and
            ``env_error.txt`` (see the module docstring).
    """
    from batchppo.algorithms.common.seeds import stack, unstack

    with graceful_stop(_stop_message) as stop:
        fresh = trainer.init([host_key(c.seed, INIT_KEY) for c in run_configs])
        runs = []
        # A tracked --seeds run groups its seeds: <timestamp>-<name> of <timestamp>-<name>-s<i>.
        group = None if run_dirs[0] is None else run_dirs[0].name.rpartition("-s")[0]
        for i, (config, run_dir) in enumerate(zip(run_configs, run_dirs, strict=True)):
            view = _SeedView(trainer, unstack(fresh, i))
            progress_i = "none" if i else progress
            runs.append(Run(view, config, run_dir, progress_i, stop, group=group))
        started = [run.start(precompile=False) for run in runs]
        del fresh
        if len({step for _, step in started}) > 1:  # a seed skipped a damaged checkpoint
            for run in runs:
                run.close()
            listed = ", ".join(f"s{i}: {step:,}" for i, (_, step) in enumerate(started))
            raise RunDirError(
                f"the seeds resume from different steps ({listed}): damaged checkpoints were "
                "skipped; resume each alone (--config NAME-s<i> without --seeds)"
            )
        state = stack([s for s, _ in started])
        step = started[0][1]
        interrupted = False
        try:
            state, step, interrupted = _SeedRuns(trainer, runs, stop).train_phases(state, step)
            for i, run in enumerate(runs):
                run.save(unstack(state, i), step)
        finally:
            for run in runs:
                run.close()
    return [run.result(unstack(state, i), step, interrupted) for i, run in enumerate(runs)]


def train_seeds(
    config: RunConfig | str,
    logdir: str | Path | None,
    num_seeds: int,
    *,
    name: str | None = None,
    timestamp: str | None = None,
    overrides: Sequence[str] = (),
    progress: str = "auto",
    resume: bool = False,
    env: EnvArg | None = None,
) -> list[TrainResult]:
    """Trains seeds ``config.seed + i`` (``i < num_seeds``) together; one result per seed.

    Args:
        config: An algorithm's config or a preset name.
        logdir: Parent directory of runs; None: no disk I/O.
        num_seeds: Number of seeds (>= 1).
        name: Run dir suffix before ``-s<i>``; defaults to the preset name, or ``custom``.
        timestamp: Run dir prefix; existing dirs resume (all seeds at one checkpoint step).
        overrides: ``KEY=VALUE`` strings, as :func:`~batchppo.experiment.loop.train`.
        progress: ``auto``, ``bar``, ``lines`` or ``none`` (seed 0's progress).
        resume: Every seed's run dir must exist (``--resume``).
        env: The env, replacing the config's (as :func:`~batchppo.experiment.loop.train`).

    Returns:
        One :class:`~batchppo.experiment.run.TrainResult` per seed, in seed order.

    Raises:
        UserError: As :func:`~batchppo.experiment.loop.train`, and a resume whose seed dirs
            are incomplete, differ or stand at different checkpoint steps.
    """
    if num_seeds < 1:
        raise ConfigError(f"--seeds {num_seeds}: must be >= 1")
    from_preset = config is None or isinstance(config, str)
    config, name, changes = resolve_config(config, name, overrides, env)
    algorithm = algorithm_of(config)
    make_seeds_trainer = algorithm.seeds_trainer
    if make_seeds_trainer is None:
        raise ConfigError(
            f"--seeds {num_seeds}: {algorithm.title} trains one seed per run; drop --seeds and "
            "start one run per seed (--set seed=N)"
        )
    configs.check_env(config)  # before a run dir is made for it
    before: set[Path] = set()
    with contextlib.ExitStack() as locks:
        if logdir is None:
            run_configs, run_dirs = _seed_configs(config, num_seeds), [None] * num_seeds
        else:
            before = set(Path(logdir).iterdir()) if Path(logdir).is_dir() else set()
            explicit = changes if from_preset else None
            run_configs, run_dirs = prepare_seed_dirs(
                logdir, name, config, num_seeds, timestamp, explicit, resume, locks
            )
            configs.check_env(run_configs[0])
        try:
            trainer = trainers.build_trainer(
                lambda c: make_seeds_trainer(c, num_seeds), run_configs[0]
            )
        except BaseException:
            for run_dir in run_dirs:  # a failed start leaves no new run dir behind
                if run_dir is not None and run_dir not in before:
                    shutil.rmtree(run_dir, ignore_errors=True)
            raise
        try:
            return run_seeds(trainer, run_configs, run_dirs, progress)
        finally:
            trainer.close()

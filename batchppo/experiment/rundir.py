"""Run directories: ``<logdir>/<timestamp>-<name>/`` made (atomically) or reopened to resume.

A run dir holds ``config.yaml``, ``metrics.jsonl``, ``checkpoints/`` and, after an env
failure, ``env_error.txt``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import glob
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.registry import algorithm_of
from batchppo.experiment import configs
from batchppo.experiment.errors import ConfigError, RunDirError
from batchppo.experiment.fileio import fsync_dir
from batchppo.experiment.resume import check_resume_overrides
from batchppo.experiment.runlock import RunDirLock

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
ENV_ERROR_FILE = "env_error.txt"


def make_timestamp() -> str:
    """The current UTC time as used in run dir names, e.g. ``20261121T113000``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")


def run_timestamp(run_dir: str | Path, name: str) -> str:
    """The timestamp of run dir ``<timestamp>-<name>`` (``prepare_run_dir``), whatever it holds
    (``-`` included): what ``--timestamp`` resumes it with.

    Raises:
        ValueError: The dir's name is not ``<timestamp>-<name>``.
    """
    dir_name = Path(run_dir).name
    timestamp = dir_name.removesuffix(f"-{name}")
    if not timestamp or timestamp == dir_name:
        raise ValueError(f"{dir_name!r} is not a run dir <timestamp>-{name}")
    return timestamp


def find_run_name(
    logdir: str | Path, timestamp: str, name: str | None = None, seeds: int | None = None
) -> str:
    """The name of the one run at ``timestamp`` in ``logdir``: what ``--resume --timestamp T``
    resumes without ``--config``.

    Args:
        logdir: Parent directory of runs.
        timestamp: The run dirs' prefix, ``<timestamp>-<name>``.
        name: Only the run of this name (``--name``); None: any.
        seeds: A ``--seeds`` run's number of seeds: its dirs ``<timestamp>-<name>-s<i>``
            count as one run of ``name``; None: a single run.

    Returns:
        The name after the timestamp (before ``-s<i>`` with ``seeds``).

    Raises:
        RunDirError: No run, or several, at ``timestamp``: one line naming them and the fix.
    """
    prefix = f"{timestamp}-"
    found = sorted(
        path.name.removeprefix(prefix)
        for path in Path(logdir).glob(f"{glob.escape(prefix)}*")
        if (path / CONFIG_FILE).is_file()
    )
    if seeds is not None:
        found = sorted({n.rpartition("-s")[0] for n in found if re.fullmatch(r".+-s\d+", n)})
    if name is not None:
        found = [n for n in found if n == name]
    if len(found) == 1:
        return found[0]
    what = f"--resume --timestamp {timestamp}" + (f" --name {name}" if name else "")
    if not found:
        kind = f"--seeds run {prefix}<name>-s<i>" if seeds else f"run dir {prefix}<name>"
        raise RunDirError(f"{what}: {logdir} holds no {kind}; check --logdir and --timestamp")
    runs = ", ".join(f"{prefix}{n}" for n in found)
    raise RunDirError(
        f"{what}: several runs in {logdir} have that timestamp ({runs}); say which with --name "
        "NAME (the part after the timestamp; a --seeds run's without -s<i>, with --seeds N)"
    )


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
        locks: Where to hold the run dir's lock (``runlock``): it is taken before anything in the
            dir is written (a new run's dir holds it from its creation) and released when ``locks``
            closes. None: no lock.

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
        config = check_resume_overrides(stored, overrides)
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

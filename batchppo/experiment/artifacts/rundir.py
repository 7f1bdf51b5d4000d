"""Run directories: ``<logdir>/<timestamp>-<name>/`` made (atomically) or reopened to resume.

A run dir holds ``config.yaml``, ``metrics.jsonl``, ``checkpoints/``, after an env
failure ``env_error.txt``, and, for an env class or function of a script run as a file
(``"__main__:name"``, which no other process can import), ``env.pkl``: that callable by value
(cloudpickle), which resuming or opening the run loads again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import glob
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.artifacts.runlock import RunDirLock
from batchppo.experiment.config import configs
from batchppo.experiment.config.resume import check_resume_overrides
from batchppo.experiment.errors import ConfigError, RunDirError
from batchppo.experiment.fileio import atomic_write_bytes, fsync_dir

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
ENV_ERROR_FILE = "env_error.txt"
ENV_FILE = "env.pkl"


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
        load_script_env(stored, run_dir)
        _check_same_algorithm(stored, config, run_dir)
        if overrides is None:
            overrides = {
                f.name: getattr(config, f.name)
                for f in dataclasses.fields(stored)
                if getattr(config, f.name) != getattr(stored, f.name)
            }
        config = check_resume_overrides(stored, overrides)
        if config != stored:
            _save_config(config, run_dir)
        record_script_env(config, run_dir)  # the script's class, as this session trains it
        return config, run_dir, True
    # Built under a temporary name and renamed: a kill at any moment leaves no half-made run.
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=run_dir.parent, prefix=f".{run_dir.name}."))
    lock = locks.enter_context(RunDirLock(staging)) if locks is not None else None
    (staging / CHECKPOINT_DIR).mkdir()
    _save_config(config, staging)
    recorded = record_script_env(config, staging)
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
    if recorded:
        print(
            f"batchppo: env {config.env} is a class or function of the script run as a file, "
            f"which no other process can import: recorded by value in {run_dir / ENV_FILE} "
            "(cloudpickle), which resume, evaluate and visualize load",
            file=sys.stderr,
            flush=True,
        )
    return config, run_dir, False


def _save_config(config: RunConfig, run_dir: Path) -> None:
    """Writes ``config.yaml`` into ``run_dir``; for a script's env, a first comment line names
    the ``env.pkl`` that holds it."""
    from batchppo.envs.env_ids import is_script_env_id

    text = configs.config_to_yaml(config)
    if is_script_env_id(config.env):
        text = (
            f"# env {config.env}: a class or function of a script run as a file, recorded by "
            f"value in {ENV_FILE} beside this file (cloudpickle)\n{text}"
        )
    atomic_write_bytes(run_dir / CONFIG_FILE, text.encode())


def record_script_env(config: RunConfig, run_dir: Path) -> bool:
    """Writes ``env.pkl`` into ``run_dir`` when ``config.env`` is a script's
    ``"__main__:name"``: the callable it names here, by value (cloudpickle).

    Returns:
        Whether it wrote one.

    Raises:
        ConfigError: The id names nothing in this process (``script_factory``).
    """
    from batchppo.envs.env_ids import is_script_env_id, script_factory

    if not is_script_env_id(config.env):
        return False
    import cloudpickle

    try:
        factory = script_factory(config.env)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    atomic_write_bytes(run_dir / ENV_FILE, cloudpickle.dumps(factory))
    return True


def load_script_env(config: RunConfig, run_dir: Path) -> None:
    """Holds the callable of ``run_dir``'s ``env.pkl`` as what its script's env id names in this
    process (``hold_script_factory``); nothing for any other env.

    Raises:
        RunDirError: The run's env is a script's but ``env.pkl`` is missing or cannot be loaded.
    """
    from batchppo.envs.env_ids import hold_script_factory, is_script_env_id

    if not is_script_env_id(config.env):
        return
    import cloudpickle

    path = run_dir / ENV_FILE
    try:
        factory = cloudpickle.loads(path.read_bytes())
    except Exception as error:
        raise RunDirError(
            f"{run_dir}: its env {config.env} is a script's, recorded by value in {ENV_FILE}, "
            f"which cannot be loaded ({type(error).__name__}: {error}); restore {path}, or "
            "train the run again from its script"
        ) from error
    hold_script_factory(config.env, factory)


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
    """Checks that ``run_dir`` is a run and returns its stored config; a script's env
    recorded in its ``env.pkl`` is loaded (``load_script_env``).

    Raises:
        RunDirError: Missing directory, no config.yaml, or a script's env not loadable.
        ConfigError: Invalid config.yaml.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run dir {run_dir} does not exist")
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunDirError(f"{run_dir} holds no {CONFIG_FILE}: not a batchppo run dir")
    config = configs.load_config(run_dir / CONFIG_FILE)
    load_script_env(config, run_dir)
    return config, run_dir

"""Where a ``batchppo tune`` study lives: its Optuna storage, its settings, and the trials of
processes that ended while they ran.

The storage is ``sqlite:///STUDY/study.db`` by default; ``--storage`` takes any Optuna storage
URL (``postgresql://...``, ``mysql://...``, ``sqlite:///...``) or ``journal:PATH``, a journal file
(``JournalFileBackend``). Several processes, on one machine or several, share one study through
it (``study.optimize`` in each, ``load_if_exists``).

A trial whose process ended while it ran (killed, a lost machine) is failed and retried with the
same parameters (Optuna's ``RetryHeartbeatStaleTrialCallback``: a WAITING trial that the next
``study.ask`` takes first): through Optuna's heartbeat on a database storage (every
``--heartbeat`` seconds; a trial whose heartbeat is older than twice that is stale), and, on
any storage, at the start of each ``batchppo tune`` for the trials of this machine whose process
is gone (``recover_trials``: each trial records its host, pid and the process's start time).

A study records the settings it was started with (``SETTINGS_ATTR``: the config, the space, the
seeds, the objective); a later start with other settings is refused in one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil

from batchppo.experiment.errors import UserError

JOURNAL_PREFIX = "journal:"
DEFAULT_DB = "study.db"
SETTINGS_ATTR = "batchppo"
"""The study's user attribute that holds its settings."""
OWNER_ATTR = "process"
"""A trial's user attribute naming the process that runs it: trial, host, pid, start time."""
NOTE_ATTR = "note"
"""A trial's user attribute saying why it was pruned, failed or stopped."""
SQLITE_TIMEOUT_S = 60
"""How long a SQLite storage waits for another process's write (several processes)."""


def import_optuna() -> Any:
    """The ``optuna`` module.

    Raises:
        UserError: Optuna is not installed (one line naming the extra).
    """
    try:
        import optuna
    except ImportError:
        raise UserError(
            'batchppo tune needs optuna: pip install -e ".[tune]" (or pip install '
            "'batchppo[tune]')"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # tune prints its own lines
    return optuna


@contextlib.contextmanager
def quiet_experimental() -> Iterator[None]:
    """Silences Optuna's ``ExperimentalWarning`` (the heartbeat, the retry callback and the
    matplotlib plots are marked experimental)."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def storage_url(study_dir: Path, storage: str | None) -> str:
    """``storage``, or the default ``sqlite:///STUDY/study.db``."""
    return storage or f"sqlite:///{study_dir / DEFAULT_DB}"


def open_storage(url: str, heartbeat: int | None) -> Any:
    """The Optuna storage of ``url`` (see the module docstring).

    Args:
        url: A database URL, or ``journal:PATH``.
        heartbeat: Seconds between a running trial's heartbeats (database storages); None:
            no heartbeat.

    Raises:
        UserError: A URL Optuna cannot open (a missing driver, a bad URL, a database that
            refuses), in one line.
    """
    optuna = import_optuna()
    if url.startswith(JOURNAL_PREFIX):
        path = Path(url.removeprefix(JOURNAL_PREFIX))
        if not path.parent.is_dir():
            raise UserError(f"--storage {url}: the directory {path.parent} does not exist")
        backend = optuna.storages.journal.JournalFileBackend(str(path))
        return optuna.storages.JournalStorage(backend)
    options: dict[str, Any] = {}
    if url.startswith("sqlite"):
        options["engine_kwargs"] = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    try:
        with quiet_experimental(), _sqlite_lock(url):
            if heartbeat is not None:
                retry = optuna.storages.RetryHeartbeatStaleTrialCallback()
                options.update(heartbeat_interval=heartbeat, heartbeat_stale_trial_callback=retry)
            return optuna.storages.RDBStorage(url, **options)
    except Exception as error:  # SQLAlchemy's errors, a missing driver (ImportError)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(
            f"--storage {url}: Optuna cannot open it ({first}); give a database URL "
            f"(sqlite:///PATH, postgresql://..., mysql://...) or {JOURNAL_PREFIX}PATH"
        ) from error


@contextlib.contextmanager
def _sqlite_lock(url: str) -> Iterator[None]:
    """Holds an exclusive lock on ``<database>.lock`` beside a SQLite file while the storage
    opens: two processes that start together would otherwise both create its tables, and one
    would fail (``table studies already exists``). Other URLs: nothing to hold."""
    prefix = "sqlite:///"
    path = url.removeprefix(prefix)
    if not url.startswith(prefix) or not path or path == ":memory:":
        yield
        return
    import fcntl

    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def study_names(storage: Any) -> list[str]:
    """The names of the studies in ``storage``."""
    optuna = import_optuna()
    return optuna.study.get_all_study_names(storage)


def stored_settings(storage: Any, name: str) -> dict[str, Any] | None:
    """The settings a study was started with; None for a study that is not there."""
    optuna = import_optuna()
    if name not in study_names(storage):
        return None
    study = optuna.load_study(study_name=name, storage=storage)
    return study.user_attrs.get(SETTINGS_ATTR)


def plain(data: Any) -> Any:
    """``data`` as a study's attributes hold it (JSON: tuples become lists)."""
    return json.loads(json.dumps(data))


def check_settings(stored: Mapping[str, Any], given: Mapping[str, Any], where: str) -> None:
    """Refuses settings that differ from a study's own.

    Raises:
        UserError: Naming the settings that differ and the fix.
    """
    differ = [key for key in given if key in stored and plain(given[key]) != stored[key]]
    if differ:
        raise UserError(
            f"{where} was started with another {', '.join(differ)}: resume it with the ones it "
            "was started with (or leave out --config and --space to take them from the study), "
            "or start another study (--study DIR or --study-name NAME)"
        )


def owner() -> dict[str, Any]:
    """This process, as a trial records it (``OWNER_ATTR``, with the trial's number)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": psutil.Process().create_time(),
    }


def _gone(record: Mapping[str, Any]) -> bool:
    """Whether the process of an owner record of this host has ended (a pid taken again by
    another process counts as ended: its start time differs)."""
    try:
        started = psutil.Process(int(record["pid"])).create_time()
    except psutil.NoSuchProcess:
        return True
    return abs(started - float(record["started"])) > 1.0


def recover_trials(study: Any, storage: Any) -> list[int]:
    """Fails the running trials of this machine whose process has ended and queues their
    retries (``RetryHeartbeatStaleTrialCallback``).

    A trial's owner record counts only when it names that trial: a retry starts with a copy of
    the failed trial's attributes until its own process records itself.

    Returns:
        The numbers of the trials failed.
    """
    optuna = import_optuna()
    failed = []
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        record = trial.user_attrs.get(OWNER_ATTR)
        if not (
            isinstance(record, dict)
            and record.get("trial") == trial.number
            and record.get("host") == host
            and _gone(record)
        ):
            continue
        note = f"its process (pid {record['pid']} on {host}) ended while it ran"
        trial_id = trial._trial_id  # Optuna's storages address trials by id
        try:
            storage.set_trial_user_attr(trial_id, NOTE_ATTR, note)
            storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another process failed it first
        with quiet_experimental():
            retry = optuna.storages.RetryHeartbeatStaleTrialCallback()
            retry(study, storage.get_trial(trial_id))
        failed.append(trial.number)
    return failed

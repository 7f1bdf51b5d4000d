"""Crash-safe file writes and JSON-lines files read and cut back by step (no heavy imports:
used by configs, logs and checkpoints).

A JSON-lines log may be stored xz-compressed beside where it would be (``metrics.jsonl.xz``
for ``metrics.jsonl``), as the repository keeps the logs of its published runs
(``bench/rundata.py``): it is read where the plain file is not there, and never written.
"""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(directory: str | Path) -> None:
    """Makes renames inside ``directory`` durable; a no-op where unsupported."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` through a fsynced temporary file and an atomic rename.

    A reader, or a process killed at any moment, sees the old content or the new one,
    never a mix.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def packed(path: str | Path) -> Path:
    """Where a JSON-lines file is stored xz-compressed: ``<path>.xz``."""
    path = Path(path)
    return path.with_name(path.name + ".xz")


def jsonl_exists(path: str | Path) -> bool:
    """Whether a JSON-lines file is there, plain or xz-compressed (``packed``)."""
    return Path(path).is_file() or packed(path).is_file()


def _jsonl(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each complete line of a JSON-lines file with its record; a torn line, the one a killed
    process was writing, is skipped."""
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append((line, json.loads(line)))
        except json.JSONDecodeError:
            continue
    return records


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The complete records of a JSON-lines file, or of its xz-compressed copy (``packed``)
    where the plain file is not there; none where neither exists."""
    path = Path(path)
    if path.exists():
        return [record for _, record in _jsonl(path)]
    if packed(path).is_file():
        text = lzma.decompress(packed(path).read_bytes()).decode()
        return [json.loads(line) for line in text.splitlines()]
    return []


def truncate_jsonl(path: str | Path, max_step: int) -> int:
    """Keeps the lines of a JSON-lines file whose record has ``step <= max_step``, as they
    were written (atomically); returns how many. A missing file stays missing."""
    path = Path(path)
    if not path.exists():
        return 0
    kept = [line for line, record in _jsonl(path) if record.get("step", 0) <= max_step]
    atomic_write_bytes(path, "".join(line + "\n" for line in kept).encode())
    return len(kept)

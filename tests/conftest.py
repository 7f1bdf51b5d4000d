"""Fixtures shared across the test packages."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil
import pytest

_RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "default_worker")


def ray_children() -> list[str]:
    """Command lines of this process's Ray daemons and workers still running."""
    names = []
    for child in psutil.Process().children(recursive=True):
        try:
            name = " ".join(child.cmdline()) or child.name()
        except psutil.Error:
            continue
        if any(part in name for part in _RAY_PROCESSES):
            names.append(name)
    return names


def wait_no_ray_children(timeout: float = 10.0) -> list[str]:
    """Waits up to ``timeout`` s for this process's Ray processes to exit; returns those left."""
    deadline = time.monotonic() + timeout
    while (left := ray_children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="session")
def ray_processes_left() -> Callable[[], list[str]]:
    """:func:`wait_no_ray_children`, for fixtures that check Ray shut down completely."""
    return wait_no_ray_children

"""The suite's tiers: ``pytest -q`` leaves out exactly the ``extended`` tests, which
``pytest -m extended`` collects, those that tests/bench/investigations' conftest marks
included (pyproject.toml's addopts, docs/getting_started.md "The tests")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A folder whose tests a conftest hook marks, and a file with a test of each tier.
PATHS = ("tests/bench/investigations", "tests/bench/test_ale_fused.py")


def _collect(*args: str) -> tuple[set[str], int]:
    """The ids that ``pytest --collect-only`` with the project's addopts and ``args`` keeps, and
    the number of tests it found before ``-m`` deselected any."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"]
    command += ["-p", "no:cacheprovider", *args, *PATHS]
    env = {**os.environ, "BATCHPPO_TEST_CACHE": "0"}  # collecting compiles nothing
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    kept = {line for line in result.stdout.splitlines() if "::" in line}
    found = re.search(r"^\d+/(\d+) tests collected", result.stdout, re.M)
    assert found, result.stdout[-3000:]
    return kept, int(found.group(1))


def test_pytest_q_leaves_out_the_extended_tests_and_m_extended_collects_them():
    (default, found), (extended, _) = _collect(), _collect("-m", "extended")
    assert default and extended, (default, extended)
    assert default.isdisjoint(extended) and len(default) + len(extended) == found
    investigations = {test for test in default | extended if test.startswith(PATHS[0])}
    assert investigations and investigations <= extended, investigations - extended

"""The investigation scripts' tests share tests/bench's ``benchlib`` (``load_bench``), and all
are ``extended`` tests: the scripts are one-off investigations, checked before their results
are published (``pytest -m extended``), not in ``pytest -q``."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

sys.path.insert(0, str(HERE.parent))


# First, so that the mark is on the items before `-m` deselects by it.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test of this folder ``extended`` (a conftest's hook sees the session's items)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.extended)

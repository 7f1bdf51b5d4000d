"""Makes the experiment tests' helpers (``experiment_fakes``, ``tiny_runs``, ``crash_envs``,
``ecosystem_envs``) importable from the tests in the folders below, and holds the fixtures
that only experiment tests share."""

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="module")
def module_cold_training_programs() -> Iterator[None]:
    """``cold_training_programs`` for a whole module: for module-scoped fixtures that train
    runs of a few iterations, which the module's tests then load (their programs compile
    with the same options)."""
    from batchppo.algorithms.training import programs

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(programs, "COMPILER_OPTIONS", programs.cold_compiler_options())
        yield

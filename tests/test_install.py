"""The package installs beside other libraries: with the oldest and with the newest versions its
declared ranges allow, into a fresh virtualenv of its own, and runs there.

uv resolves the ranges (``--resolution lowest-direct``: every direct dependency at the lowest
version its range admits; ``highest``: the newest), so a range wider than the code supports
fails here rather than on a user's machine. Neither runs in ``pytest -q`` (pyproject.toml's
addopts): the newest is an ``extended`` test (``pytest -m extended``), the oldest is marked
``lowest_versions``, which a maintainer runs with ``pytest -m lowest_versions
tests/test_install.py`` when a range's lower end moves (docs/getting_started.md, "The tests").
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# The tests run inside the new environment with the test runner CI uses.
RUNNER = ("pytest==9.2.0", "pytest-timeout==2.4.0")
# A smoke subset: the math of returns, and the exact sequences of the batch env's workers across
# episode ends in both autoreset modes, on the Dict space whose leaves are a Box, a Discrete, a
# MultiBinary and a Tuple (the CLI commands the test runs first cover the learner, the logs, the
# statistics and the plot).
CONFORMANCE = (
    "tests/envs/test_vector_conformance.py::test_exact_sequences_across_episode_boundaries"
)
SUBSET = (
    "tests/core/test_returns.py",
    f"{CONFORMANCE}[BatchEnv-dict-AutoresetMode.SAME_STEP]",
    f"{CONFORMANCE}[BatchEnv-dict-AutoresetMode.NEXT_STEP]",
)


def _core_requirements(python: Path, cwd: Path, env: dict[str, str]) -> list[Requirement]:
    """The installed package's own dependencies, extras left out, as its metadata declares them."""
    script = "import importlib.metadata as m, json; print(json.dumps(m.requires('batchppo')))"
    declared = json.loads(_run([python, "-c", script], cwd, env, 120))
    requirements = [Requirement(text) for text in declared]
    return [req for req in requirements if req.marker is None]


def _lower_bound(requirement: Requirement) -> Version:
    (bound,) = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    return bound


def _run(args: list, cwd: Path, env: dict[str, str], timeout: float) -> str:
    result = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{args[:3]}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


# A fresh environment: the install (downloads where uv's cache lacks a wheel), then compilation.
# The newest releases change as PyPI publishes, so the `highest` case is not in `pytest -q`
# (whose verdict must not change without a change of the checkout): it is an `extended` test.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    "resolution",
    [
        pytest.param("lowest-direct", marks=pytest.mark.lowest_versions),
        pytest.param("highest", marks=pytest.mark.extended),
    ],
)
def test_the_package_installs_and_runs_with_the_ends_of_its_ranges(resolution, tmp_path):
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is missing: install the test extra (pip install -e '.[test]')"
    venv = tmp_path / "venv"
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "JAX_PLATFORMS": "cpu"}
    env.pop("PYTHONPATH", None)
    _run([uv, "venv", "-q", "-p", sys.executable, venv], tmp_path, env, 120)
    _run(
        [uv, "pip", "install", "-q", "--resolution", resolution, ROOT, *RUNNER],
        tmp_path,
        env,
        600,
    )
    listed = _run([uv, "pip", "list", "--format", "json"], tmp_path, env, 60)
    installed = {row["name"].lower(): Version(row["version"]) for row in json.loads(listed)}
    python, batchppo = venv / "bin" / "python", venv / "bin" / "batchppo"
    for requirement in _core_requirements(python, tmp_path, env):
        version = installed[requirement.name.lower()]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
        if resolution == "lowest-direct":
            assert version == _lower_bound(requirement), (requirement, version)

    # The installed package, not this checkout: the commands run outside it.
    where = _run([python, "-c", "import batchppo; print(batchppo.__file__)"], tmp_path, env, 120)
    assert where.startswith(str(venv)), where
    logdir = tmp_path / "logdir"
    _run(
        [
            batchppo,
            "train",
            "--config",
            "cartpole_jax",
            "--logdir",
            logdir,
            "--set",
            "steps=4096",
            "--progress",
            "none",
        ],
        tmp_path,
        env,
        600,
    )
    (run_dir,) = logdir.iterdir()
    scored = _run([batchppo, "evaluate", run_dir, "--episodes", "3"], tmp_path, env, 600)
    assert "over 3 episodes" in scored, scored
    _run([batchppo, "plot", run_dir, "--out", tmp_path / "curve.png"], tmp_path, env, 300)
    assert (tmp_path / "curve.png").stat().st_size > 0
    tests = [f"{ROOT}/{path}" for path in SUBSET]
    _run(
        [venv / "bin" / "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", *tests],
        tmp_path,
        env,
        900,
    )

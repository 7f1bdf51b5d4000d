"""The core imports no backend: backends adapt to it, never the other way round. Nor Gymnasium:
the mock envs, Gymnasium envs among them, are fixtures of ``batchppo.testing``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import batchppo.core

# Module names (and their submodules) that no core module may import.
FORBIDDEN = (
    "batchppo.envs",
    "batchppo.backends",
    "batchppo.testing",
    "gymnax",
    "brax",
    "ray",
    "gymnasium",
)

CODE = f"""
import importlib, json, pkgutil, sys
import batchppo.core
modules = sorted(m.name for m in pkgutil.iter_modules(batchppo.core.__path__, "batchppo.core."))
for name in modules:
    importlib.import_module(name)
for name in batchppo.core.__all__:  # the lazy names resolve too
    getattr(batchppo.core, name)
forbidden = {FORBIDDEN!r}
loaded = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))
print(json.dumps({{"modules": modules, "loaded": loaded}}))
"""


def test_core_and_each_of_its_modules_import_no_backend():
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # Every module of the package was imported, the registry and the range rule among them.
    assert {"batchppo.core.backends", "batchppo.core.ranges", "batchppo.core.simulation"} <= set(
        result["modules"]
    )
    assert result["loaded"] == []


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module)
    return names


def test_no_core_module_imports_a_backend_even_on_first_use():
    # Deferred imports too: a backend's spaces are converted by the backend, not the core.
    core = Path(batchppo.core.__file__).parent
    found = {
        f"{path.name}: {name}"
        for path in sorted(core.glob("*.py"))
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    }
    assert found == set()

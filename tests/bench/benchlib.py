"""What the tests of bench/ share: a bench script imported as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` as the module ``bench_<name>``, registered in ``sys.modules`` (its
    dataclasses look their module up there); ``bench/`` is on ``sys.path``, as it is for a script
    run from there, so that the scripts import each other (``from harness import spawn``).

    Args:
        name: The script's path under ``bench/`` without ``.py``: ``"gpu"``, or
            ``"investigations/host_phases"`` for a one-off investigation's script.
    """
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    module_name = "bench_" + name.replace("/", "_")
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

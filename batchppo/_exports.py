"""Public names of a package imported on first use (PEP 562 module ``__getattr__``).

Keeps ``import batchppo`` and config parsing free of JAX: a package lists where each of its
public names lives, and the module holding it is imported when the name is first read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for names imported on first use.

    Examples:
        >>> __getattr__, __dir__ = lazy_exports(__name__, {"train":
        "batchppo.experiment.run.training"})

    Args:
        package: The package's ``__name__`` (it must be executing, i.e. in ``sys.modules``).
        homes: Each public name and the module that defines it.

    Returns:
        The module-level ``__getattr__`` (imports the name's module, caches the name in the
        package) and ``__dir__``.
    """
    namespace = sys.modules[package].__dict__

    def module_getattr(name: str) -> Any:
        if name in homes:
            value = getattr(importlib.import_module(homes[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def module_dir() -> list[str]:
        return sorted({*namespace, *homes})

    return module_getattr, module_dir

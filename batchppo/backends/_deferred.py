"""Start-up time: import a package without modules it loads at import but rarely uses (for the
``gymnax`` backend, ``batchppo.backends.gymnax``, the one user).

``import gymnax`` imports every gymnax env, and a few of them (Pong, Catch, the mazes) import
seaborn and ``matplotlib.pyplot`` at module level for their ``render`` methods. That pulls in
pandas and scipy.stats too, most of the import's time, on the critical path of every fused
run's start (bench/train.py measures time to a score from process launch).

``deferred_imports`` imports such modules *deferred*: inside its block (around ``import gymnax``,
``batchppo.backends.gymnax.import_gymnax``), ``import seaborn`` binds a placeholder module that
imports the real one the first time an attribute is used (a ``render`` call). Nothing stays behind:
after the block the placeholders leave ``sys.modules``, so every later ``import seaborn`` anywhere
gets the real module as usual.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any


class DeferredModule(types.ModuleType):
    """A placeholder that imports the real module on first attribute access."""

    def __getattr__(self, name: str) -> Any:
        # Dunder lookups come from the import machinery itself while it sets the placeholder
        # up; answering them must not trigger the real import.
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        real = self.__dict__.get("_deferred_real")
        if real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
            self.__dict__["_deferred_real"] = real
        return getattr(real, name)


class _DeferringFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname in self.names:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return DeferredModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing runs now: the real module is imported on first use."""


@contextlib.contextmanager
def deferred_imports(*names: str) -> Iterator[None]:
    """Inside the block, importing one of ``names`` (not yet imported) binds a placeholder.

    The placeholder imports the real module when an attribute is first read. On exit the
    placeholders are removed from ``sys.modules`` (and from their parent package), so imports
    after the block are untouched.

    Args:
        *names: Full module names, e.g. ``"seaborn"``, ``"matplotlib.pyplot"``.
    """
    finder = _DeferringFinder(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in names:
            if isinstance(sys.modules.get(name), DeferredModule):
                del sys.modules[name]
            parent_name, _, child = name.rpartition(".")
            parent = sys.modules.get(parent_name) if parent_name else None
            if parent is not None and isinstance(getattr(parent, child, None), DeferredModule):
                delattr(parent, child)

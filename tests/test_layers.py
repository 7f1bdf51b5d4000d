"""The package's layers import one way: no module imports a module of a higher floor.

The import graph is read from the source with ``ast``, so it holds every edge the code can
take, not only those a test run happens to import: module-level imports, imports inside
functions, ``TYPE_CHECKING`` imports, and strings that name a module of the package (the
``lazy("pkg.mod:name")`` references of the registries, the tables of ``lazy_exports``), which
import it when called. Entry-point group names (``group="batchppo.torsos"``, ``..._GROUP``
constants) read as module names but import nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

import batchppo

FLOORS: dict[str, int] = {
    "_clock": 0,
    "_exports": 0,
    "core": 0,
    "envs": 1,
    "testing": 1,  # the mock envs: Gymnasium envs over the core's spaces
    "backends": 2,
    "algorithms": 3,
    "experiment": 4,
    "cli": 5,
    "__main__": 5,
    "__init__": 5,  # the package's lazy exports name the experiment's entry points
}
"""Each room of the package (a subpackage, or a module at its top) and its floor, lowest first:
a module may import its own floor and those below."""

_MODULE_STRING = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?")


@dataclasses.dataclass(frozen=True)
class Edge:
    """One import of ``target`` by the file ``source`` at ``line``."""

    source: str
    line: int
    target: str


def room_of_file(relative: Path) -> str:
    """The room of a file of the package (its path inside the package)."""
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def room_of_module(package: str, module: str) -> str:
    """The room of a dotted module name inside ``package`` (``__init__`` for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(root: Path, package: str, module: str) -> bool:
    """Whether ``module`` (dotted, inside ``package``) is a file or package under ``root``."""
    path = root.joinpath(*module.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _group_names(tree: ast.AST) -> set[int]:
    """The ids of the strings that name an entry-point group (``group="batchppo.torsos"``, or
    the value of a ``..._GROUP`` constant): names that read as modules, not imports."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "group":
            found.add(id(node.value))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id.endswith("GROUP") for t in targets):
                found.add(id(node.value))
    return found


def _targets(node: ast.AST, root: Path, package: str, here: list[str]) -> list[str]:
    """The package's modules ``node`` imports (``here``: the dotted package of its file)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parent = here[: len(here) - node.level + 1]
            base = ".".join([*parent, base] if base else parent)
        # ``from pkg import mod`` imports ``pkg.mod``; ``from pkg import name``, ``pkg``.
        return [
            f"{base}.{alias.name}" if _is_module(root, package, f"{base}.{alias.name}") else base
            for alias in node.names
        ]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value.partition(":")[0]] if _MODULE_STRING.fullmatch(node.value) else []
    return []


def import_edges(root: Path, package: str) -> list[Edge]:
    """Every edge from a file of the package under ``root`` to a module of the package."""
    edges = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        tree = ast.parse(path.read_text(), filename=str(path))
        here = [package, *relative.parts[:-1]]
        groups = _group_names(tree)
        for node in ast.walk(tree):
            if id(node) in groups:
                continue
            for target in _targets(node, root, package, here):
                if target.split(".")[0] == package:
                    edges.append(Edge(relative.as_posix(), node.lineno, target))
    return edges


def upward_edges(root: Path, package: str, floors: Mapping[str, int]) -> list[str]:
    """The edges of the package under ``root`` that climb a floor, one line each; also a line
    for each room ``floors`` does not place, so that a new room is placed on purpose."""
    found = []
    for edge in import_edges(root, package):
        source = room_of_file(Path(edge.source))
        target = room_of_module(package, edge.target)
        for room in (source, target):
            if room not in floors:
                found.append(f"{edge.source}:{edge.line}: room {room!r} has no floor in FLOORS")
        if source in floors and target in floors and floors[target] > floors[source]:
            found.append(
                f"{edge.source}:{edge.line}: {source} (floor {floors[source]}) imports "
                f"{edge.target} ({target}, floor {floors[target]})"
            )
    return sorted(set(found))


def test_no_module_of_the_package_imports_upward():
    root = Path(batchppo.__file__).parent
    assert upward_edges(root, "batchppo", FLOORS) == []
    # The graph is read, not guessed: the edges it must see are there, of every kind.
    edges = {(e.source, e.target) for e in import_edges(root, "batchppo")}
    assert ("backends/host.py", "batchppo.envs.make") in edges  # inside a function
    assert ("backends/host.py", "batchppo.backends.host_env") in edges  # a lazy string
    assert ("backends/host.py", "batchppo.core.backends") in edges  # ``from ... import name``
    assert ("__init__.py", "batchppo.experiment.run.training") in edges  # a lazy export
    assert ("core/backends.py", "batchppo.core.env") in edges  # under TYPE_CHECKING


GROUPED = ("envs", "experiment")
"""Floors whose modules are grouped by job into subfolders (workers/, stack/, run/, ...), so
that a reader finds a part by its folder's name."""


def test_grouped_floors_show_their_parts():
    root = Path(batchppo.__file__).parent
    for floor in GROUPED:
        top = sorted(p.name for p in (root / floor).glob("*.py"))
        assert len(top) <= 12, f"{floor}/ has {len(top)} modules at its top: group them"
    # A folder is named by what it holds; "common" says nothing of that.
    for tree in (root, Path(__file__).parent):
        vague = [p for p in tree.rglob("common") if p.is_dir()]
        assert vague == [], vague


def test_no_learner_reaches_into_the_host_env_adapter():
    # Env errors and host calls reach the algorithms through the env protocol
    # (batchppo.core.env: take_error, raise_env_error; HostEnv.host_call), not through
    # backends/host_env.py's internals, whatever kind of import would bring them.
    root = Path(batchppo.__file__).parent
    found = [
        f"{e.source}:{e.line}"
        for e in import_edges(root, "batchppo")
        if e.source.startswith("algorithms/") and e.target.startswith("batchppo.backends.host_env")
    ]
    assert found == []
    text = "\n".join(p.read_text() for p in (root / "algorithms").rglob("*.py"))
    assert "host_env" not in text


FAKE = {
    "__init__.py": "",
    "low/__init__.py": "",
    "low/base.py": (
        '"""Not imported: pkg.high.top, a word of prose."""\n'
        'PLUGIN_GROUP = "pkg.high"\n'
        'REGISTRY = dict(group="pkg.high.top")\n'
    ),
    "low/lazy.py": 'from pkg.low import base\nREF = lazy("pkg.high.top:function")\n',
    "low/deferred.py": "def f():\n    from pkg.high import top\n    return top\n",
    "low/typing_only.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.top import X\n"
    ),
    "low/relative.py": "from ..high import top\n",
    "high/__init__.py": "",
    "high/top.py": "from pkg.low.base import VALUE\n",
    "loose.py": "import pkg.low.base\n",
}


@pytest.fixture
def fake_tree(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    for name, text in FAKE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_checker_finds_each_kind_of_upward_edge(fake_tree):
    floors = {"low": 0, "high": 1, "loose": 1, "__init__": 2}
    assert upward_edges(fake_tree, "pkg", floors) == [
        "low/deferred.py:2: low (floor 0) imports pkg.high.top (high, floor 1)",
        "low/lazy.py:2: low (floor 0) imports pkg.high.top (high, floor 1)",
        "low/relative.py:1: low (floor 0) imports pkg.high.top (high, floor 1)",
        "low/typing_only.py:3: low (floor 0) imports pkg.high.top (high, floor 1)",
    ]


def test_the_checker_places_every_room(fake_tree):
    floors = {"low": 0, "high": 1, "__init__": 2}  # "loose" left out
    assert "loose.py:1: room 'loose' has no floor in FLOORS" in upward_edges(
        fake_tree, "pkg", floors
    )
    # With the floors turned over, the downward edges are the upward ones.
    assert upward_edges(fake_tree, "pkg", {"low": 1, "high": 0, "loose": 1, "__init__": 2}) == [
        "high/top.py:1: high (floor 0) imports pkg.low.base (low, floor 1)"
    ]

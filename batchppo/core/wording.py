"""The wording of messages, shared by every layer: lists in prose, "did you mean" hints, an
exception's first line, and the import of a user's env module with its failure in one line.

Pure Python (``difflib`` and ``importlib`` only), so any module may import it, the light ones
too (the backend registry, the algorithm registry, config parsing) without importing JAX.

Examples:
    >>> prose(["a", "b", "c"])
    'a, b and c'
    >>> did_you_mean("gymnx", ["gymnax", "brax"])
    " Did you mean 'gymnax'?"
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from types import ModuleType

__all__ = [
    "did_you_mean",
    "first_line",
    "import_env_module",
    "missing_module_fix",
    "prose",
    "unknown_id_message",
]


def prose(items: Iterable[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    items = list(items)
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" Did you mean 'x'?"`` with ``x`` the choice closest to ``name``, or ``""`` if none is
    close (``difflib``'s cutoff of 0.6).

    Args:
        name: The name asked for.
        choices: The valid names.
    """
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def unknown_id_message(what: str, env_id: str, known: Iterable[str], where: str) -> str:
    """The one-line error of an unknown env id: ``unknown <what> <id>. Did you mean ...? <where>``.

    Args:
        what: The kind of id (``"gymnax env id"``).
        env_id: The id asked for.
        known: The valid ids (for the suggestion).
        where: Where the valid ids come from, or the list itself.
    """
    return f"unknown {what} {env_id!r}.{did_you_mean(env_id, known)} {where}"


def missing_module_fix(module_name: str, missing: str | None) -> str:
    """What to do when ``module_name`` (of an ``env="module:name"``) cannot be imported because
    the module ``missing`` is not found: install the package when its top-level package is
    missing (``craftax`` of ``craftax.craftax_env``), else put the file where Python finds it.

    Examples:
        >>> missing_module_fix("craftax.craftax_env", "craftax")
        "install the package that provides 'craftax', or put it on PYTHONPATH"
        >>> missing_module_fix("myenvs", "myenvs")
        'put myenvs.py in the working directory or on PYTHONPATH'
    """
    top = module_name.split(".")[0]
    if "." in module_name and missing == top:
        return f"install the package that provides {top!r}, or put it on PYTHONPATH"
    return f"put {module_name.replace('.', '/')}.py in the working directory or on PYTHONPATH"


def first_line(error: BaseException) -> str:
    """``"TypeName: first line of the message"`` (the type alone for an empty message)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def import_env_module(env_id: str, module_name: str) -> ModuleType:
    """The module of an env id ``"module:name"``, imported.

    Raises:
        ValueError: One line: the module is not found (with where to put it, or the package
            to install: ``missing_module_fix``), or importing it raised (a module it imports
            is missing, its own code failed), with that exception's first line.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.split(".")[0] == error.name.split(".")[0]:
            fix = missing_module_fix(module_name, error.name)
            raise ValueError(
                f"env {env_id!r}: cannot import {module_name!r} ({error}): {fix}"
            ) from error
        raise ValueError(
            f"env {env_id!r}: importing {module_name!r} failed: {first_line(error)}"
        ) from error
    except Exception as error:  # the module itself raised while being imported
        raise ValueError(
            f"env {env_id!r}: importing {module_name!r} failed: {first_line(error)}"
        ) from error

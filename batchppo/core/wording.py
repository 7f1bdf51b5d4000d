"""The wording of messages, shared by every layer: lists in prose and "did you mean" hints.

Pure Python (``difflib`` only), so any module may import it, the light ones too (the backend
registry, the algorithm registry, config parsing) without importing JAX.

Examples:
    >>> prose(["a", "b", "c"])
    'a, b and c'
    >>> did_you_mean("gymnx", ["gymnax", "brax"])
    " Did you mean 'gymnax'?"
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "missing_module_fix", "prose", "unknown_id_message"]


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

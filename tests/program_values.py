"""Comparisons of the values that two compiled programs compute: pytest puts this folder on
``sys.path`` (tests/conftest.py's), where test files of every package import it from."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def assert_same_values(actual: Any, desired: Any, err_msg: str = "") -> None:
    """Assert two pytrees of the same structure equal leaf by leaf, in shape and dtype, and
    in value: integer and bool leaves (flags, counts, steps) exactly, float leaves to float32
    rounding.

    For the outputs of two programs that differ in structure or compile with other options:
    the compiler may order and fuse their float operations differently, so their floats agree
    to rounding, not to the bit, on any CPU.

    Args:
        actual: One program's outputs.
        desired: The other program's outputs, of the same tree structure.
        err_msg: Prefix of the failure message (which leaf or metric it is).
    """
    jax.tree.map(lambda a, b: _assert_same_leaf(a, b, err_msg), actual, desired)


def _assert_same_leaf(actual: Any, desired: Any, err_msg: str) -> None:
    if jnp.issubdtype(jnp.result_type(actual), jnp.floating):
        np.testing.assert_allclose(
            actual, desired, rtol=1e-6, atol=1e-7, err_msg=err_msg, strict=True
        )
    else:
        np.testing.assert_array_equal(actual, desired, err_msg=err_msg, strict=True)

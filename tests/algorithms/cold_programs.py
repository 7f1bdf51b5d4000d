"""Programs of the tests under tests/algorithms compiled as the package compiles the programs
that run once (``programs.cold_compiler_options``): the tests run them briefly.

Run eagerly, a network's ``init`` and forward passes, and a random draw, dispatch op by op, and
XLA compiles each op of each shape as a program of its own, with its default options: most of
the network tests' time. The package only ever calls these functions inside its jitted
programs, so ``compiled`` compiles them as one program each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from batchppo.algorithms.networks.networks import Network
from batchppo.algorithms.training import programs

_ARRAY_FUNCTIONS = (
    "init",
    "policy_step",
    "policy_sequence",
    "value",
    "mode",
    "policy_step_and_value",
    "policy_sequence_and_value",
    "representation",
)


def cold_jit(function: Callable[..., Any], **jit_kwargs: Any) -> Callable[..., Any]:
    """``jax.jit(function)`` compiled with ``programs.cold_compiler_options()``."""
    return jax.jit(function, compiler_options=programs.cold_compiler_options(), **jit_kwargs)


def compiled(net: Network) -> Network:
    """``net`` with each function of arrays jitted by ``cold_jit`` (``initial_carry`` with its
    batch size static); ``distribution`` and ``recurrent`` as they are. As any jitted
    function's, their dicts come back with sorted keys: a test of an order calls ``net``."""
    jitted = {
        name: cold_jit(getattr(net, name))
        for name in _ARRAY_FUNCTIONS
        if getattr(net, name) is not None
    }
    return net._replace(initial_carry=cold_jit(net.initial_carry, static_argnums=0), **jitted)


def init_and_apply(module: Any, key: jax.Array, x: Any) -> tuple[Any, Any]:
    """A Flax ``module``'s variables at ``key`` for input ``x``, and its output on ``x``."""

    @cold_jit
    def run(key: jax.Array, x: Any) -> tuple[Any, Any]:
        variables = module.init(key, x)
        return variables, module.apply(variables, x)

    return run(key, x)


_NORMAL = cold_jit(jax.random.normal, static_argnums=1)
_UNIFORM = cold_jit(jax.random.uniform, static_argnums=1)


def normal(key: jax.Array, shape: tuple[int, ...]) -> np.ndarray:
    """``jax.random.normal(key, shape)`` (float32) as a NumPy array: test inputs, drawn by one
    cold program instead of JAX's eager one, and sliced by NumPy after."""
    return np.asarray(_NORMAL(key, shape))


def uniform(key: jax.Array, shape: tuple[int, ...]) -> np.ndarray:
    """``jax.random.uniform(key, shape)`` (float32 in [0, 1)) as a NumPy array, as ``normal``."""
    return np.asarray(_UNIFORM(key, shape))

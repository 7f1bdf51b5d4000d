"""The networks and Flax modules under test, each function compiled as one XLA program.

Run eagerly, a network's ``init`` and forward passes dispatch op by op, and XLA compiles each
op of each shape as a program of its own: most of these tests' time. The package only ever
calls these functions inside its jitted programs, so the tests compile them as the package
does, as one program each, with the options of the programs that run once
(``cold_compiler_options``): they run briefly here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

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
    batch size static); ``distribution`` and ``recurrent`` as they are."""
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

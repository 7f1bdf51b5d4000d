"""The ``--set`` overrides of real training runs small enough for a test."""

from __future__ import annotations

from typing import Any

SMALL = {
    "num_agents": 8,
    "rollout_length": 32,
    "update_epochs": 1,
    "num_minibatches": 1,
    "policy_layers": "[16]",
    "value_layers": "[16]",
    "max_length": 60,
    "log_every": 256,
}
"""8 envs x 32 steps (256 env steps an iteration), one epoch of one minibatch, one layer of
16 units a network, episodes of at most 60 steps, a report every iteration."""


def tiny_run(**fields: Any) -> list[str]:
    """``SMALL`` as ``KEY=VALUE`` overrides, ``fields`` changing or adding to it."""
    return [f"{key}={value}" for key, value in {**SMALL, **fields}.items()]

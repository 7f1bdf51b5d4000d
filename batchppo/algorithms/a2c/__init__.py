"""A2C: synchronous advantage actor-critic on the shared trainer (docs/new_algorithm.md).

The names below are imported on first use: ``A2CConfig`` needs no JAX, the trainer does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchppo._exports import lazy_exports

_LAZY = {
    "A2CConfig": "batchppo.algorithms.a2c.config",
    "A2C": "batchppo.algorithms.a2c.a2c",
    "Trainer": "batchppo.algorithms.a2c.a2c",
}

__all__ = ["A2C", "A2CConfig", "Trainer"]

if TYPE_CHECKING:
    from batchppo.algorithms.a2c.a2c import A2C, Trainer
    from batchppo.algorithms.a2c.config import A2CConfig


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

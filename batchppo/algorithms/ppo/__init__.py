"""BatchPPO: the original algorithm (adaptive KL penalty) and the modern one (clipping) in JAX.

The names below are imported on first use: ``PPOConfig`` (and with it config parsing) needs
no JAX, the trainer does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "PPOConfig": "batchppo.algorithms.ppo.config",
    "PPO": "batchppo.algorithms.ppo.ppo",
    "TrainState": "batchppo.algorithms.ppo.ppo",
    "Trainer": "batchppo.algorithms.ppo.ppo",
    "make_train": "batchppo.algorithms.ppo.ppo",
}

__all__ = ["PPO", "PPOConfig", "TrainState", "Trainer", "make_train"]

if TYPE_CHECKING:
    from batchppo.algorithms.ppo.config import PPOConfig
    from batchppo.algorithms.ppo.ppo import PPO, Trainer, TrainState, make_train


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'batchppo.algorithms.ppo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

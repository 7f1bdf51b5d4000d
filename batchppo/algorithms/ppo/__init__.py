"""BatchPPO: the original algorithm (adaptive KL penalty) and the modern one (clipping) in JAX.

The names below are imported on first use: ``PPOConfig`` (and with it config parsing) needs
no JAX, the trainer does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchppo._exports import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

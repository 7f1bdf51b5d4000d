"""batchppo: batched reinforcement learning on JAX.

The public entry points are imported lazily (``import batchppo`` stays cheap):

* [`train`][batchppo.experiment.run.training.train] (``batchppo.experiment.run.training.train``):
  train, or resume, a run.
* [`load_policy`][batchppo.experiment.artifacts.loading.load_policy]: a trained run's policy as
  ``obs batch -> action batch``.
* [`PPOConfig`][batchppo.algorithms.ppo.PPOConfig]: the flat, frozen config of a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchppo import _clock  # noqa: F401 (first: the origin of a run's set-up time)
from batchppo._exports import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "train": "batchppo.experiment.run.training",
    "load_policy": "batchppo.experiment.artifacts.loading",
    "PPOConfig": "batchppo.algorithms.ppo.config",
}

__all__ = ["PPOConfig", "__version__", "load_policy", "train"]

if TYPE_CHECKING:
    from batchppo.algorithms.ppo.config import PPOConfig
    from batchppo.experiment.artifacts.loading import load_policy
    from batchppo.experiment.run.training import train


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

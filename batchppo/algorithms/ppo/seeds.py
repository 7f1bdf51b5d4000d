"""Several seeds of one PPO config trained together (``batchppo train --seeds N``).

The shared :class:`~batchppo.algorithms.common.seeds.SeedsTrainer` over :class:`PPO`: one
compiled program and one set of envs for every seed, each seed computing what a separate run
of its seed computes.
"""

from __future__ import annotations

from batchppo.algorithms.common import seeds as common
from batchppo.algorithms.common.seeds import seeds_of, stack, unstack
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.ppo import PPO

__all__ = ["SeedsTrainer", "seeds_of", "stack", "unstack"]


class SeedsTrainer(common.SeedsTrainer):
    """The PPO trainer of ``num_seeds`` seeds at once (``config.seed + i``).

    Args:
        config: The config shared by the seeds.
        num_seeds: Number of seeds (>= 1).
    """

    def __init__(self, config: PPOConfig, num_seeds: int) -> None:
        super().__init__(config, num_seeds, PPO)
        self.ppo: PPO = self.agent

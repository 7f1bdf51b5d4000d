"""BatchPPO: the original algorithm (adaptive KL penalty) and the modern one (clipping) in JAX."""

from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.ppo import PPO, Trainer, TrainState, make_train

__all__ = ["PPO", "PPOConfig", "TrainState", "Trainer", "make_train"]

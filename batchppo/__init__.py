"""batchppo: batched reinforcement learning on JAX."""

__version__ = "0.1.0"

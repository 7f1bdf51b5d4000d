"""Experiment tooling: presets, the training loop, checkpoints, logs, videos and plots.

Modules are imported on use (``batchppo.experiment.loop`` pulls in JAX and the trainer).
"""

from batchppo.experiment.errors import CheckpointError, ConfigError, RunDirError, UserError

__all__ = ["CheckpointError", "ConfigError", "RunDirError", "UserError"]

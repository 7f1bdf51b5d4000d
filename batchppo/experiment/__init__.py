"""Experiment tooling: presets, training runs, checkpoints, logs, videos and plots.

Modules are imported on use (``batchppo.experiment.run.training`` pulls in JAX and the trainer).
"""

from batchppo.experiment.errors import CheckpointError, ConfigError, RunDirError, UserError

__all__ = ["CheckpointError", "ConfigError", "RunDirError", "UserError"]

"""User-facing errors of the experiment tooling.

Every problem caused by the user's input (a config name, a ``--set`` override, a run dir, a
checkpoint, an env id) raises a :class:`UserError`. The CLI prints its message on one line and
exits with status 2, without a traceback; the Python API lets it propagate.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input, explained by the message (which names the fix)."""


class ConfigError(UserError, ValueError):
    """An unknown preset, an unknown or mistyped override, or an invalid stored config."""


class RunDirError(UserError):
    """A missing or inconsistent run directory."""


class CheckpointError(UserError):
    """A missing, unreadable or corrupt checkpoint."""

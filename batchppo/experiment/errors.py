"""User-facing errors of the experiment tooling.

Every problem caused by the user's input (a config name, a ``--set`` override, a run dir, a
checkpoint, an env id) raises a [`UserError`][batchppo.experiment.UserError]. The CLI prints its
message on one line and exits with status 2, without a traceback; the Python API lets it propagate.
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


class CorruptCheckpointError(CheckpointError):
    """A checkpoint that cannot be read or is damaged (it does not unpack, or its checksum
    does not match): an older one may still be good."""


class StorageError(UserError):
    """A run's file could not be written (a full disk, a lost mount); what was written
    before, the newest checkpoint included, is intact."""

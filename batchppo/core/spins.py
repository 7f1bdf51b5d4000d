"""How long the host batch env's waits spin before they block, by default: the defaults of
[`WorkerOptions`][batchppo.envs.WorkerOptions]' ``spin_us`` and ``worker_spin_us``, which the
``process`` backend's options (``batchppo.backends.host.ProcessOptions``) take too.

Pure Python, so that a config is parsed (and its backend options checked) without importing
Gymnasium and the batch env.
"""

from __future__ import annotations

__all__ = ["SPIN_US", "WORKER_SPIN_US"]

SPIN_US = 50.0
"""Microseconds the caller's wait for the workers spins before it blocks: a short wait is
answered without a wake-up, a long one costs no CPU."""

WORKER_SPIN_US = 1000.0
"""Microseconds a worker spins waiting for its next command before it blocks: the next step
of a caller that steps without pause starts without a wake-up."""

"""The host batch env's worker defaults that the backends' options share: the defaults of
[`WorkerOptions`][batchppo.envs.WorkerOptions]' ``max_restarts``, ``spin_us`` and
``worker_spin_us``, which the ``process`` and ``sync`` backends' options
(``batchppo.backends.host``), ``envs.make`` and SB3's ``BatchVecEnv`` take too.

Pure Python, so that a config is parsed (and its backend options checked) without importing
Gymnasium and the batch env.
"""

from __future__ import annotations

__all__ = ["MAX_RESTARTS", "SPIN_US", "WORKER_SPIN_US"]

MAX_RESTARTS = 0
"""Env restarts a batch env may make over its life: none, so an env's error fails fast."""

SPIN_US = 50.0
"""Microseconds the caller's wait for the workers spins before it blocks: a short wait is
answered without a wake-up, a long one costs no CPU."""

WORKER_SPIN_US = 1000.0
"""Microseconds a worker spins waiting for its next command before it blocks: the next step
of a caller that steps without pause starts without a wake-up."""

"""When batchppo was first imported: the origin of a run's set-up time.

``batchppo/__init__`` imports this module before anything else, so ``IMPORTED_AT`` is the moment
the package was first imported in this process. A run's ``start-up: set-up`` line counts from
it (``batchppo.experiment.run.driver.start_up_line``), not from the process's creation: a process
may live long before it imports batchppo (a notebook's kernel, a script's own work), and that
time is none of batchppo's set-up.
"""

from __future__ import annotations

import time

IMPORTED_AT: float = time.monotonic()
"""``time.monotonic()`` when batchppo was first imported in this process."""

"""A training run: ``train`` and its set-up, one run or ``--seeds``, the driver loop and each
seed's ledger, the metric window, progress, graceful stop, callbacks and env failures."""

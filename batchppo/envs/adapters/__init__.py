"""The batch env's contract beyond one process pool: SB3's ``VecEnv`` over a ``BatchEnv``
(``sb3``, with ``indexed`` for SB3's per-index calls) and Ray actors as the workers
(``ray_env``)."""

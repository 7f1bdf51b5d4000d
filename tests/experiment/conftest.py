"""Makes the experiment tests' helpers (``experiment_fakes``, ``tiny_runs``, ``crash_envs``,
``ecosystem_envs``) importable from the tests in the folders below."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

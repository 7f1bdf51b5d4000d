"""Makes the test envs importable here and shippable to worker processes (by value)."""

import os
import sys

import cloudpickle

sys.path.insert(0, os.path.dirname(__file__))

import envs_testlib

cloudpickle.register_pickle_by_value(envs_testlib)

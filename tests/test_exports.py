"""Public names of the packages imported on first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import batchppo
from batchppo import backends


def test_a_name_is_imported_on_first_use_and_cached():
    # A fresh interpreter: this test process may have read the name already.
    code = (
        "import sys, batchppo\n"
        "home = 'batchppo.experiment.artifacts.loading'\n"
        "assert 'load_policy' not in vars(batchppo) and home not in sys.modules\n"
        "load_policy = batchppo.load_policy\n"
        "assert load_policy is sys.modules[home].load_policy\n"
        "assert vars(batchppo)['load_policy'] is load_policy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert "load_policy" in dir(batchppo)
    with pytest.raises(AttributeError, match="module 'batchppo' has no attribute 'loads'"):
        batchppo.loads  # noqa: B018


def test_packages_export_their_names_without_importing_jax_first():
    code = (
        "import sys, batchppo, batchppo.core, batchppo.algorithms.ppo\n"
        "assert 'jax' not in sys.modules\n"
        "assert batchppo.PPOConfig.__name__ == 'PPOConfig' and 'jax' not in sys.modules\n"
        "assert callable(batchppo.core.simulate) and 'jax' in sys.modules\n"
        "assert batchppo.algorithms.ppo.Trainer.__name__ == 'Trainer'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert {"train", "load_policy", "PPOConfig"} <= set(dir(batchppo))


def test_the_lazy_core_and_backends_packages_keep_their_names():
    import batchppo.core.simulation  # the module's name is not the function's
    from batchppo.backends import HostEnv, host_env, make_env
    from batchppo.core import simulate

    assert callable(simulate) and simulate is batchppo.core.simulation.simulate
    assert HostEnv is host_env.HostEnv and make_env is backends.make_env
    assert "rollout" in dir(batchppo.core) and "HostLoop" in dir(backends)

"""Public names imported on first use (``batchppo._exports.lazy_exports``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import batchppo
from batchppo._exports import lazy_exports


def test_a_name_is_imported_on_first_use_and_cached(monkeypatch):
    module = type(sys)("fake_package")
    monkeypatch.setitem(sys.modules, "fake_package", module)
    getattr_, dir_ = lazy_exports("fake_package", {"dumps": "json"})
    assert "dumps" not in vars(module)
    import json

    assert getattr_("dumps") is json.dumps
    assert vars(module)["dumps"] is json.dumps
    assert "dumps" in dir_()
    with pytest.raises(AttributeError, match="module 'fake_package' has no attribute 'loads'"):
        getattr_("loads")


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

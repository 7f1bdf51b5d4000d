"""The backend registry (``batchppo.core.backends``): records, lookups, lazy references."""

from __future__ import annotations

import subprocess
import sys

import pytest

from batchppo import backends
from batchppo.backends import Backend, get_backend, lazy, register


def test_unknown_backend_is_one_line_with_a_suggestion():
    with pytest.raises(ValueError, match=r"unknown backend 'gymnx'\. Did you mean 'gymnax'\?"):
        get_backend("gymnx")


def test_register_refuses_a_taken_name_and_lazy_refs_bind_arguments():
    with pytest.raises(ValueError, match="registered already"):
        register(get_backend("sync"))
    descending = lazy("builtins:sorted", reverse=True)
    assert descending([1, 3, 2]) == [3, 2, 1]
    with pytest.raises(ValueError, match="module:name"):
        lazy("os.path.join")


def test_the_registry_and_config_parsing_import_nothing_heavy():
    code = (
        "import sys\n"
        "from batchppo import backends\n"
        "from batchppo.experiment import configs\n"
        "config = configs.apply_overrides(configs.get_preset('cartpole'), ['backend=sync'])\n"
        "assert configs.config_from_yaml(configs.config_to_yaml(config)) == config\n"
        "assert backends.get_backend(config.backend).host\n"
        "heavy = [m for m in ('jax', 'flax', 'gymnax', 'gymnasium', 'ray', 'brax', 'jumanji') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_lazy_core_and_backends_packages_keep_their_names():
    import batchppo.core.simulation  # the module's name is not the function's
    from batchppo.backends import HostEnv, host_env, make_env
    from batchppo.core import simulate

    assert callable(simulate) and simulate is batchppo.core.simulation.simulate
    assert HostEnv is host_env.HostEnv and make_env is backends.make_env
    assert "rollout" in dir(batchppo.core) and "HostLoop" in dir(backends)


def test_a_record_is_frozen_and_fills_its_defaults():
    record = Backend(
        name="x",
        make=lazy("a:b"),
        check_env_id=lambda env_id: None,
        host=False,
        description="x envs",
        requires="xpkg",
    )
    assert record.title == "x" and record.install == "pip install xpkg" and record.fused
    with pytest.raises(AttributeError):
        record.host = True  # type: ignore[misc]

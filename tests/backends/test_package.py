"""The ``batchppo.backends`` package (``backends/__init__.py``): importing it fills the registry
with the built-in records and nothing heavy, and ``make_env``, the factory by backend name,
checks ``max_restarts`` once on the way to an env."""

from __future__ import annotations

import subprocess
import sys

import pytest

from batchppo import backends
from batchppo.backends import check_restarts


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


def test_check_restarts_runs_once_on_the_way_to_an_env(monkeypatch):
    calls = []

    def counting(backend: str, max_restarts: int) -> None:
        calls.append((backend, max_restarts))
        check_restarts(backend, max_restarts)

    monkeypatch.setattr(backends, "check_restarts", counting)  # make_env's, the one check
    backends.make_env("Pendulum-v1", 2, "sync", max_restarts=1).close()
    assert calls == [("sync", 1)]
    with pytest.raises(ValueError) as info:
        backends.make_env("Pendulum-v1", 2, "ray", max_restarts=1)
    assert str(info.value) == (
        "max_restarts=1: env restarts are for the process and sync backends only; got "
        "backend='ray'."
    )

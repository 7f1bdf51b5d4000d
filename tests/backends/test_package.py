"""The ``batchppo.backends`` package (``backends/__init__.py``): importing it fills the registry
with the built-in records and nothing heavy, and ``make_env``, the factory by backend name,
checks a backend's options and hands its builder every one."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from batchppo import backends
from batchppo.backends.host import SyncOptions


def test_the_registry_and_config_parsing_import_nothing_heavy():
    code = (
        "import sys\n"
        "from batchppo import backends\n"
        "from batchppo.experiment.config import configs\n"
        "config = configs.apply_overrides(configs.get_preset('cartpole'), ['backend=sync'])\n"
        "assert configs.config_from_yaml(configs.config_to_yaml(config)) == config\n"
        "assert backends.get_backend(config.backend).host\n"
        "heavy = [m for m in ('jax', 'flax', 'gymnax', 'gymnasium', 'ray', 'brax', 'jumanji') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_make_env_checks_the_options_and_hands_the_builder_every_one(monkeypatch):
    seen = []
    record = backends.get_backend("sync")

    def recording(env_id, num_envs, **kwargs):
        seen.append({k: v for k, v in kwargs.items() if k not in ("max_length", "env_kwargs")})
        return record.make(env_id, num_envs, **kwargs)

    monkeypatch.setitem(
        backends.BACKENDS, "sync", dataclasses.replace(record, make=recording)
    )  # the registry's own dict: no new name
    backends.make_env("Pendulum-v1", 2, "sync", options={"max_restarts": 1}).close()
    # The options parsed into the backend's object, filled, and no run option given.
    assert seen == [{"normalize_ranges": True, "options": SyncOptions(max_restarts=1)}]
    backends.make_env("Pendulum-v1", 2, "sync", run_options={"wrappers": ()}).close()
    assert seen[-1] == {"normalize_ranges": True, "options": SyncOptions(), "wrappers": ()}
    with pytest.raises(ValueError) as info:
        backends.make_env("Pendulum-v1", 2, "ray", options={"max_restarts": 1})
    assert str(info.value) == (
        "backend_options.max_restarts: backend 'ray' has no option 'max_restarts'. Valid keys: "
        "num_workers, envs_per_worker, step_timeout, address, num_cpus, startup_timeout"
    )
    with pytest.raises(ValueError) as info:
        backends.make_env("Pendulum-v1", 2, "gymnax", run_options={"wrappers": ()})
    assert str(info.value) == "run_options ['wrappers']: backend 'gymnax' takes none"

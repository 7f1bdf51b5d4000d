"""A learner on every device: the sharded training iteration equals the unsharded one.

JAX fixes its devices when it initialises, and this process has one CPU device, so the sharded
runs are fresh processes (``sharding_run.py``): one with two forced CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``), and two processes of one device each
joined by ``jax.distributed.initialize`` over localhost (CPU collectives). The reference is
the unsharded run (``devices=1``) in this process.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sharding_run

from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.training.sharding import learner_devices

SCRIPT = Path(__file__).with_name("sharding_run.py")
REPO = Path(__file__).parents[3]


def _env(*xla_flags: str) -> dict[str, str]:
    """This process's environment for a run of ``sharding_run.py``: its ``XLA_FLAGS`` (the test
    session's compile flags, conftest.py) without a device count, and ``xla_flags``."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    kept = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env["XLA_FLAGS"] = " ".join([*kept, *xla_flags])
    return env


@pytest.fixture(scope="module")
def unsharded() -> dict[str, Any]:
    return sharding_run.run(devices=1)


def assert_same_run(sharded: dict[str, Any], unsharded: dict[str, Any]) -> None:
    """Every metric of every iteration, the final params and statistics, the evaluation and
    an action agree to float tolerance."""
    compared = [k for k in unsharded if k.startswith(("metric/", "params/", "obs_norm/"))]
    compared += ["eval_returns", "action"]
    for key in compared:
        np.testing.assert_allclose(sharded[key], unsharded[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_two_devices_equal_one(tmp_path: Path, unsharded: dict[str, Any]) -> None:
    out = tmp_path / "sharded.npz"
    env = _env("--xla_force_host_platform_device_count=2")
    subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "none"], env=env, check=True, timeout=300
    )
    sharded = dict(np.load(out))
    # devices=None took both devices: the env batch is split, the params replicated.
    assert int(sharded["num_devices"]) == 2
    assert int(sharded["obs_devices"]) == 2
    assert sharded["obs_shards"].tolist() == [[4, 3], [4, 3]]
    assert bool(sharded["params_replicated"])
    assert int(unsharded["num_devices"]) == 1
    assert unsharded["obs_shards"].tolist() == [[8, 3]]
    assert_same_run(sharded, unsharded)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.extended  # CI covers the sharded learner with two devices in one process
def test_two_processes_equal_one(tmp_path: Path, unsharded: dict[str, Any]) -> None:
    coordinator = f"127.0.0.1:{_free_port()}"
    outs = [tmp_path / f"process{i}.npz" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), str(out), "none", coordinator, "2", str(i)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, out in enumerate(outs)
    ]
    try:
        logs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log
    for out in outs:
        sharded = dict(np.load(out))
        # One mesh over both processes' devices; each process holds its half of the envs.
        assert int(sharded["num_devices"]) == 2
        assert int(sharded["obs_devices"]) == 2
        assert sharded["obs_shards"].tolist() == [[4, 3]]
        assert_same_run(sharded, unsharded)


def test_device_settings_are_checked() -> None:
    base = PPOConfig(backend="gymnax", num_agents=8, rollout_length=16)
    with pytest.raises(ValueError, match="set devices=1"):
        dataclasses.replace(base, backend="process", devices=2)
    with pytest.raises(ValueError, match="multiple of 3"):
        dataclasses.replace(base, devices=3)
    with pytest.raises(ValueError, match="must be >= 1"):
        dataclasses.replace(base, devices=0)
    # This process has one device.
    with pytest.raises(ValueError, match="only 1 JAX devices"):
        learner_devices(dataclasses.replace(base, devices=2))
    assert len(learner_devices(base)) == 1
    assert len(learner_devices(dataclasses.replace(base, backend="process"))) == 1

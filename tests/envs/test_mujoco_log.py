"""MuJoCo's warnings where envs are built: Gymnasium's ``settotalmass`` deprecation left out, the
others on stderr, no ``MUJOCO_LOG.TXT`` (``batchppo.envs.mujoco_log``)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from batchppo.envs import WorkerOptions, mujoco_log
from batchppo.envs.make import make

mujoco = pytest.importorskip("mujoco")

UNSTABLE = "MuJoCo warning: Nan, Inf or huge value in QVEL at DOF 0."


def unstable_cheetah() -> gymnasium.Env:
    """A HalfCheetah that MuJoCo warns about as it is built: one step from a NaN velocity."""
    env = gymnasium.make("HalfCheetah-v5")
    model, data = env.unwrapped.model, env.unwrapped.data
    data.qvel[:] = np.nan
    mujoco.mj_step(model, data)
    mujoco.mj_resetData(model, data)
    return env


@pytest.mark.timeout(120)
def test_workers_print_no_upstream_warning_and_write_no_log_file(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    for env_id in ("HalfCheetah-v5", f"{__name__}:unstable_cheetah"):
        env = make(env_id, 4, options=WorkerOptions(num_workers=2))
        try:
            env.reset(seed=0)
        finally:
            env.close()
    out, err = capfd.readouterr()
    assert "settotalmass" not in out + err
    # Every other warning still reaches stderr: once per env built, in the workers.
    assert [line[: len(UNSTABLE)] for line in err.splitlines() if "MuJoCo" in line] == [
        UNSTABLE
    ] * 4
    assert list(tmp_path.iterdir()) == []


def test_the_handler_leaves_out_the_upstream_warning_only(capsys):
    mujoco_log.mujoco_warning(
        "compiler attribute 'settotalmass' is deprecated and will be removed in a future release"
    )
    mujoco_log.mujoco_warning("Too many contacts")
    assert capsys.readouterr() == ("", "MuJoCo warning: Too many contacts\n")


def test_a_handler_already_installed_stays():
    previous = mujoco.get_mju_user_warning()
    handler = print
    mujoco.set_mju_user_warning(handler)
    try:
        assert not mujoco_log.route_mujoco_warnings()
        assert mujoco.get_mju_user_warning() is handler
        mujoco.set_mju_user_warning(None)
        assert mujoco_log.route_mujoco_warnings()
        assert mujoco.get_mju_user_warning() is mujoco_log.mujoco_warning
        assert mujoco_log.route_mujoco_warnings()  # installed once
    finally:
        mujoco.set_mju_user_warning(previous)

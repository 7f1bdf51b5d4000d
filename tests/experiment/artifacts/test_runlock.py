"""One writer per run dir (issue 24): a second process gets one line naming the holder and
exit status 2; a lock left by a process that died is taken over with a warning."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import warnings

import pytest

from batchppo import cli
from batchppo.experiment.artifacts.runlock import (
    LOCK_FILE,
    RunDirLockedError,
    StaleLockWarning,
    lock_run_dir,
)
from batchppo.experiment.config import configs
from batchppo.experiment.run import seed_runs, training

pytestmark = pytest.mark.timeout(60)

HOLD = (
    "import sys\n"
    "from batchppo.experiment.artifacts.runlock import lock_run_dir\n"
    "locks = [lock_run_dir(d) for d in sys.argv[1:]]\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()  # until the test closes our stdin\n"
    "for lock in locks:\n"
    "    lock.release()\n"
)
DIE_HOLDING = (
    "import os, sys\n"
    "from batchppo.experiment.artifacts.runlock import lock_run_dir\n"
    "lock_run_dir(sys.argv[1])\n"
    "os._exit(0)  # no release: the lock file keeps this process as its holder\n"
)

# `batchppo train` with the fake trainer (no env, no learning), in a process of its own: the
# warnings reach stderr as the command line prints them (pytest would record them instead).
FAKE_TRAIN = (
    "import sys\n"
    "from experiment_fakes import FakeTrainer\n"
    "from batchppo import cli\n"
    "from batchppo.experiment import trainers\n"
    "trainers.default_trainer_factory = FakeTrainer\n"
    "sys.exit(cli.main(sys.argv[1:]))\n"
)


@contextlib.contextmanager
def held_by_another_process(*run_dirs):
    """A second process holding the locks of ``run_dirs``; yields its holder record."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, *map(str, run_dirs)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "held\n"
        yield json.loads((run_dirs[0] / LOCK_FILE).read_text())
    finally:
        proc.stdin.close()
        proc.wait(10)


def _new_run(logdir, name, timestamp="T"):
    config = configs.get_preset(name)
    return training.prepare_run_dir(logdir, name, config, timestamp)[1]


def _argv(logdir, *more):
    return ["train", "--config", "pendulum_fast", "--logdir", str(logdir), "--timestamp", "T",
            "--progress", "none", *more]  # fmt: skip


def test_a_second_train_in_a_held_run_dir_gets_one_line_naming_the_holder_and_status_2(
    tmp_path, capsys
):
    run_dir = _new_run(tmp_path, "pendulum_fast")
    with held_by_another_process(run_dir) as holder:
        code = cli.main(_argv(tmp_path))
    out, err = capsys.readouterr()
    assert code == 2
    assert holder["host"] == socket.gethostname() and holder["pid"] != os.getpid()
    assert err == (
        f"batchppo: error: run dir {run_dir} is in use by pid {holder['pid']} on host "
        f"{holder['host']}, started {holder['started']}; wait for that run to end (or stop it), "
        "or train into another --timestamp\n"
    )
    assert not out
    assert not (run_dir / LOCK_FILE).exists()  # the holder released it when it ended


def test_a_seeds_run_locks_every_seed_dir(tmp_path, capsys):
    config = configs.get_preset("pendulum_fast")
    _, run_dirs = seed_runs.prepare_seed_dirs(tmp_path, "pendulum_fast", config, 2, "T", None)
    with held_by_another_process(run_dirs[1]) as holder:
        code = cli.main(_argv(tmp_path, "--seeds", "2"))
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith(
        f"batchppo: error: run dir {run_dirs[1]} is in use by pid {holder['pid']} on host "
    )
    assert not (run_dirs[0] / LOCK_FILE).exists()  # seed 0's lock was released on the way out


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_warning(tmp_path):
    run_dir = _new_run(tmp_path, "pendulum_fast")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", DIE_HOLDING, str(run_dir)], env=env, check=True)
    left = json.loads((run_dir / LOCK_FILE).read_text())
    with pytest.warns(StaleLockWarning) as warned:
        lock = lock_run_dir(run_dir)
    assert str(warned[0].message) == (
        f"{run_dir}: taking over the lock left by pid {left['pid']} on host {left['host']}, "
        f"started {left['started']}, which ended without releasing it"
    )
    assert json.loads((run_dir / LOCK_FILE).read_text())["pid"] == os.getpid()
    lock.release()
    assert not (run_dir / LOCK_FILE).exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean release leaves nothing to take over
        lock_run_dir(run_dir).release()


def test_train_takes_over_a_stale_lock_with_one_warning_line(tmp_path):
    config = dataclasses.replace(
        configs.get_preset("cartpole_jax"), num_agents=10, rollout_length=10, steps=500,
        eval_every=200,
    )  # fmt: skip
    run_dir = training.prepare_run_dir(tmp_path, "cartpole_jax", config, "T")[1]  # not trained yet
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", DIE_HOLDING, str(run_dir)], env=env, check=True)
    left = json.loads((run_dir / LOCK_FILE).read_text())
    argv = ["train", "--config", "cartpole_jax", "--logdir", str(tmp_path), "--timestamp", "T",
            "--progress", "none", "--set", "num_agents=10", "--set", "rollout_length=10",
            "--set", "steps=500", "--set", "eval_every=200"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", FAKE_TRAIN, *argv], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"batchppo: warning: {run_dir}: taking over the lock left by pid {left['pid']} on host "
        f"{left['host']}, started {left['started']}, which ended without releasing it\n"
    )
    assert done.stdout == (
        f"done: 500 steps, eval score 500.00 (16 episodes, mean action), run dir {run_dir}\n"
    )
    assert not (run_dir / LOCK_FILE).exists()  # released at the end


def test_this_process_cannot_lock_a_run_dir_twice(tmp_path):
    # POSIX locks would grant a process its own lock again; the in-process table refuses it.
    with lock_run_dir(tmp_path), pytest.raises(RunDirLockedError) as info:
        lock_run_dir(tmp_path)
    assert str(info.value) == (
        f"run dir {tmp_path} is in use by this process; wait for that run to end (or stop it), "
        "or train into another --timestamp"
    )
    lock_run_dir(tmp_path).release()  # released on leaving the block


def test_a_new_run_holds_its_dir_from_creation_and_releases_it(tmp_path):
    config = configs.get_preset("pendulum_fast")
    with contextlib.ExitStack() as locks:
        _, run_dir, resumed = training.prepare_run_dir(tmp_path, "p", config, "T", locks=locks)
        assert not resumed
        assert json.loads((run_dir / LOCK_FILE).read_text())["pid"] == os.getpid()
        with pytest.raises(RunDirLockedError, match="in use by this process"):
            training.prepare_run_dir(tmp_path, "p", config, "T", locks=contextlib.ExitStack())
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints", "config.yaml"]
    assert [p.name for p in tmp_path.iterdir()] == ["T-p"]  # no staging dir left

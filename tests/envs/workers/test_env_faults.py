"""BatchEnv under faults: env exceptions, dead workers, hangs, Ctrl-C and a killed parent."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from envs_testlib import (
    FaultyEnv,
    HangAfterRestartEnv,
    SlowEnv,
    WaitsForBlockedCallerEnv,
    assert_all_gone,
    running,
    wait_delivered,
    wait_until,
)

from batchppo.envs import (
    BatchEnv,
    EnvRestartWarning,
    EnvTimeoutError,
    WorkerDiedError,
    WorkerOptions,
)
from batchppo.envs.workers import channels, protocol

pytestmark = pytest.mark.timeout(30)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where envs_testlib is


def faulty_fns(n: int, bad: int, fault: str, at: int = 2):
    return [lambda i=i: FaultyEnv(i, bad, fault, at) for i in range(n)]


def worker_pids(env: BatchEnv) -> list[int]:
    return list(env.worker_pids)


# bad=1: the env is in the parent's share (``step_in_parent``, the opt-in); bad=3: in the
# worker process.
@pytest.mark.parametrize("bad", [1, 3])
def test_constructor_error_keeps_type_and_names_env(bad):
    with pytest.raises(ZeroDivisionError, match=f"env {bad}") as info:
        BatchEnv(
            faulty_fns(4, bad, "init"),
            WorkerOptions(num_workers=2, step_in_parent=bad == 1),
            autoreset_mode="SameStep",
        )
    assert "constructor of env" in str(info.value)
    if bad == 3:
        assert "Traceback" in str(info.value) and "FaultyEnv" in str(info.value)


@pytest.mark.parametrize("bad", [1, 3])
def test_reset_error_keeps_type_and_names_env(bad):
    with (
        BatchEnv(
            faulty_fns(4, bad, "reset"),
            WorkerOptions(num_workers=2, step_in_parent=bad == 1),
            autoreset_mode="SameStep",
        ) as env,
        pytest.raises(KeyError, match=f"env {bad}"),
    ):
        env.reset(seed=0)


@pytest.mark.parametrize("bad", [1, 3])
def test_step_error_keeps_type_names_env_and_carries_traceback(bad):
    with BatchEnv(
        faulty_fns(4, bad, "step"),
        WorkerOptions(num_workers=2, step_in_parent=bad == 1),
        autoreset_mode="SameStep",
    ) as env:
        env.reset(seed=0)
        action = np.zeros((4, 1), np.float32)
        env.step(action)
        with pytest.raises(ZeroDivisionError, match=f"env {bad}") as info:
            env.step(action)
        message = str(info.value)
        assert f"step of env {bad} failed on purpose" in message
        if bad == 3:
            assert "Worker traceback" in message and "in step" in message
        # The batch env stays usable for the healthy envs' callers (and for close).
        assert env.get_attr("tag") == (0, 1, 2, 3)


@pytest.mark.parametrize("fault", ["exit", "kill", "segfault"])
def test_dead_worker_is_an_error_not_a_hang(fault):
    env = BatchEnv(
        faulty_fns(4, 3, fault),
        WorkerOptions(num_workers=2, step_in_parent=True),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    action = np.zeros((4, 1), np.float32)
    env.step(action)
    with pytest.raises(WorkerDiedError, match=r"worker 0 .*envs 2\.\.3.* died"):
        env.step(action)
    with pytest.raises(WorkerDiedError):
        env.step(action)  # stays broken
    env.close()
    assert_all_gone(pids)


def test_hanging_step_times_out_and_close_terminates():
    env = BatchEnv(
        faulty_fns(4, 2, "hang", at=1), WorkerOptions(num_workers=2), autoreset_mode="SameStep"
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    env.step_async(np.zeros((4, 1), np.float32))
    with pytest.raises(mp.TimeoutError):
        env.step_wait(timeout=0.3)
    env.close(timeout=0.2)
    assert env.closed
    assert_all_gone(pids)


def test_hanging_env_close_is_escalated():
    env = BatchEnv(
        faulty_fns(4, 3, "hang_close"), WorkerOptions(num_workers=2), autoreset_mode="SameStep"
    )
    pids = worker_pids(env)
    env.close(timeout=0.2)
    assert_all_gone(pids)


def test_close_twice_and_use_after_close():
    env = BatchEnv(
        faulty_fns(2, -1, "none"), WorkerOptions(num_workers=2), autoreset_mode="SameStep"
    )
    pids = worker_pids(env)
    env.close()
    env.close()
    assert_all_gone(pids)
    with pytest.raises(Exception, match="closed"):
        env.reset()


def test_workers_leave_sigterm_to_the_parent():
    # `timeout`, Slurm and systemd stop a job by sending SIGTERM to its whole process group;
    # the parent decides (a training run finishes its iteration and saves), so the workers
    # live on until it closes them.
    with BatchEnv(
        faulty_fns(2, -1, "none"), WorkerOptions(num_workers=2), autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        for pid in worker_pids(env):
            os.kill(pid, signal.SIGTERM)
        wait_delivered(worker_pids(env), [signal.SIGTERM])
        assert all(running(pid) for pid in worker_pids(env))
        env.step(np.zeros((2, 1), np.float32))
        pids = worker_pids(env)
    assert_all_gone(pids)


PARENT_SCRIPT = textwrap.dedent(
    """
    import faulthandler, signal, sys, time
    import numpy as np
    import psutil
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks on demand, to stderr
    # A script started from a terminal turns SIGINT into KeyboardInterrupt. One started with
    # SIGINT ignored (a background job of a non-interactive shell, as CI runners start
    # pytest) inherits that, and Python then installs no handler: Ctrl-C would do nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import cloudpickle
    sys.path.insert(0, {here!r})
    import envs_testlib
    cloudpickle.register_pickle_by_value(envs_testlib)
    from batchppo.envs import BatchEnv, WorkerOptions
    fault, marker = sys.argv[1:]
    env = BatchEnv([lambda i=i: envs_testlib.FaultyEnv(i, 3, fault, 1, marker) for i in range(4)],
                   WorkerOptions(num_workers=3))
    env.reset(seed=0)
    pids = [p.pid for p in psutil.Process().children(recursive=True)]
    print(" ".join(map(str, pids)), flush=True)
    if fault == "hang":
        env.step(np.zeros((4, 1), np.float32))  # blocks: env 3 sleeps (marker); Ctrl-C lands here
    else:
        time.sleep(3600)
    """
)


def _start_parent(fault: str, marker: Path, stderr: Any = subprocess.PIPE):
    """Starts PARENT_SCRIPT with ``fault`` in env 3; returns the process and its children's
    pids, once it has reset its BatchEnv. With ``"hang"``, env 3 creates ``marker`` as it
    begins to sleep in its first step."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT.format(here=HERE), fault, str(marker)],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    line = proc.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert pids, f"parent printed no child pids; stderr: {proc.stderr and proc.stderr.read()}"
    return proc, pids


def _kill_all(proc: subprocess.Popen, pids: list[int]) -> None:
    """SIGKILLs the parent ``proc`` and its children ``pids``, and reaps the parent: a failed
    test leaves nothing behind for the next ones."""
    for pid in [proc.pid, *pids]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def _wait_until_hung(
    proc: subprocess.Popen, pids: list[int], marker: Path, err_path: Path | None = None
) -> None:
    """Waits until env 3 of the parent ``proc`` sleeps in its step (it has created ``marker``):
    the parent is then inside ``env.step``, which env 3 never lets return.

    Fails the test (after ``_kill_all``) when the parent exits first or env 3 never gets
    there; the message carries the parent's stderr (the pipe's, else ``err_path``'s).
    """
    try:
        wait_until(
            lambda: marker.exists() or proc.poll() is not None,
            f"env 3 of the parent (pid {proc.pid}) hanging in its step",
        )
        if marker.exists():
            return
        problem = f"the parent exited (code {proc.returncode}) before env 3 hung in its step"
    except TimeoutError as exc:
        problem = str(exc)
    _kill_all(proc, pids)
    err = err_path.read_text() if err_path else proc.communicate(timeout=20)[1]
    pytest.fail(f"{problem}; the parent's stderr:\n{err}")


def test_no_child_outlives_a_killed_parent(tmp_path):
    proc, pids = _start_parent("none", tmp_path / "hung")
    proc.kill()
    _, err = proc.communicate(timeout=20)
    assert_all_gone(pids)
    # The semaphores' names were removed once the workers had opened them: nothing leaks.
    assert "resource_tracker" not in err, err


def test_no_child_outlives_a_killed_parent_while_an_env_hangs_in_step(tmp_path):
    marker = tmp_path / "hung"
    proc, pids = _start_parent("hang", marker)
    _wait_until_hung(proc, pids, marker)  # the parent in step, env 3 asleep in its worker
    proc.kill()
    _, err = proc.communicate(timeout=20)
    # The hung worker never gets back to its semaphore wait, where it would see the parent's
    # death; it must end anyway (and with it the forkserver it keeps alive).
    assert_all_gone(pids)
    assert "resource_tracker" not in err, err


def test_no_child_outlives_ctrl_c(tmp_path):
    # stderr goes to a file, not a pipe: the workers and the forkserver inherit the parent's
    # stderr, so reading a pipe to its end would wait for them too, and the question here is
    # first whether the parent exits, then (assert_all_gone) whether they follow.
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err_file:
        marker = tmp_path / "hung"
        proc, pids = _start_parent("hang", marker, stderr=err_file)
        _wait_until_hung(proc, pids, marker, err_path)  # the parent in step, env 3 asleep
        proc.send_signal(signal.SIGINT)
        try:
            returncode = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            # Where the parent is stuck: faulthandler writes its threads' stacks to stderr.
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            stacks = err_path.read_text()
            _kill_all(proc, pids)
            pytest.fail(f"parent still running 20 s after SIGINT:\n{stacks}")
    proc.stdout.close()
    err = err_path.read_text()
    assert returncode != 0 and "KeyboardInterrupt" in err, err
    assert_all_gone(pids)


def test_unpicklable_info_is_an_error_not_a_dead_worker():
    from envs_testlib import LockInfoEnv

    with BatchEnv(
        [LockInfoEnv] * 2, WorkerOptions(num_workers=2), autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        env.step(np.zeros((2, 1), np.float32))
        with pytest.raises(TypeError, match="lock"):
            env.step(np.zeros((2, 1), np.float32))
        env.step(np.zeros((2, 1), np.float32))  # the worker lives on


ISOLATION_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import cloudpickle
    sys.path.insert(0, {here!r})
    import envs_testlib
    cloudpickle.register_pickle_by_value(envs_testlib)
    from batchppo.envs import BatchEnv, WorkerDiedError, WorkerOptions

    if __name__ == "__main__":
        # Every env calls os._exit(3) in its first step; default arguments.
        env = BatchEnv([lambda: envs_testlib.FaultyEnv(0, 0, "exit", 1)] * 4)
        print("in parent:", env.parent_envs, flush=True)
        env.reset(seed=0)
        try:
            env.step(np.zeros((4, 1), np.float32))
        except WorkerDiedError as exc:
            print("WorkerDiedError:", str(exc).splitlines()[0], flush=True)
        env.close()
        # An env raising, then close: nothing leaks either.
        env = BatchEnv([lambda i=i: envs_testlib.FaultyEnv(i, 2, "step", 1) for i in range(4)])
        env.reset(seed=0)
        try:
            env.step(np.zeros((4, 1), np.float32))
        except ZeroDivisionError as exc:
            print("ZeroDivisionError:", str(exc).splitlines()[0], flush=True)
        env.close()
        print("parent alive", flush=True)
    """
)


def _run_script(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=25,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def test_default_isolation_an_exiting_env_raises_instead_of_killing_the_caller():
    result = _run_script(ISOLATION_SCRIPT.format(here=HERE))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "in parent: None"
    assert re.fullmatch(
        r"WorkerDiedError: worker 0 \(pid \d+, envs 0\.\.\d\) died \(exit code 3\) during a "
        r"step\. The batch env cannot continue; close it and build a new one\.",
        lines[1],
    ), lines[1]
    assert lines[2:] == ["ZeroDivisionError: step of env 2 failed on purpose", "parent alive"]
    assert "resource_tracker" not in result.stderr, result.stderr


def test_step_in_parent_opt_in_exit_takes_the_caller_but_leaks_nothing():
    code = ISOLATION_SCRIPT.format(here=HERE).replace(
        'BatchEnv([lambda: envs_testlib.FaultyEnv(0, 0, "exit", 1)] * 4)',
        'BatchEnv([lambda: envs_testlib.FaultyEnv(0, 0, "exit", 1)] * 4, '
        "WorkerOptions(num_workers=2, step_in_parent=True))",
    )
    result = _run_script(code)
    # The opt-in gives up crash isolation: the env's os._exit(3) ends the calling process...
    assert result.returncode == 3, result.stderr
    assert "WorkerDiedError" not in result.stdout
    # ...but the workers' semaphores do not outlive it.
    assert "resource_tracker" not in result.stderr, result.stderr


def test_default_is_one_worker_process_per_available_core(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    with BatchEnv(faulty_fns(7, -1, "none"), autoreset_mode="SameStep") as env:
        assert env.parent_envs is None
        assert len(env.worker_pids) == 3
        assert env.worker_envs == [(0, 3), (3, 6), (6, 7)]
        assert repr(env) == "BatchEnv(num_envs=7, workers=3, in_parent=0)"
        env.reset(seed=0)
        assert env.get_attr("tag") == tuple(range(7))
    with BatchEnv(
        faulty_fns(4, -1, "none"),
        WorkerOptions(num_workers=2, step_in_parent=True),
        autoreset_mode="SameStep",
    ) as env:
        # The opt-in: num_workers counts the parent, which steps the first share.
        assert env.parent_envs == (0, 2) and len(env.worker_pids) == 1


def test_parent_blocks_instead_of_spinning_while_workers_step(spy):
    # Each env's step returns only once it has seen this process asleep (blocked on the
    # worker's answer); a parent that spun for it would stay runnable: the step fails as hung.
    spins = spy(channels, "spin_acquire", lambda sem, spin_s: spin_s)
    caller = os.getpid()
    with BatchEnv(
        [lambda i=i: WaitsForBlockedCallerEnv(i, caller) for i in range(2)],
        WorkerOptions(num_workers=2),
        autoreset_mode="SameStep",
    ) as env:
        env.reset(seed=0)
        for t in (1, 2, 3):
            obs, *_ = env.step(np.zeros((2, 1), np.float32))
            np.testing.assert_array_equal(obs, [[0, 1, t], [1, 1, t]])
    # Before blocking, the parent spins for the default spin_us (50 us) on each worker's answer.
    assert spins == [pytest.approx(50e-6)] * 6


class NeverReady:
    """A semaphore that is never released: the arguments of each ``acquire``."""

    def __init__(self):
        self.calls: list[tuple] = []

    def acquire(self, *args: Any) -> bool:
        self.calls.append(args)
        return False


def test_a_spin_gives_up_without_blocking_after_spin_s_of_the_clock(monkeypatch):
    # 16 tries back to back, then one a clock reading while the clock (10 us a reading) is short
    # of spin_s: 9 more tries for 95 us. None blocks: the caller blocks after the spin.
    readings = iter(range(1000))
    clock = types.SimpleNamespace(perf_counter=lambda: next(readings) * 1e-5)
    monkeypatch.setattr(protocol, "time", clock)
    sem = NeverReady()
    assert protocol.spin_acquire(sem, 95e-6) is False
    assert sem.calls == [(False,)] * 25 and next(readings) == 11
    assert protocol.spin_acquire(sem, 0.0) is False and len(sem.calls) == 25  # no spin at all


def test_idle_workers_stop_spinning_after_worker_spin_us():
    # Workers spin up to worker_spin_us for the next command, then block: a caller that
    # takes long between steps costs them no CPU.
    with BatchEnv(
        faulty_fns(2, -1, "none"),
        WorkerOptions(num_workers=2, worker_spin_us=1000.0),
        autoreset_mode="SameStep",
    ) as env:
        env.reset(seed=0)
        env.step(np.zeros((2, 1), np.float32))
        workers = [psutil.Process(pid) for pid in env.worker_pids]
        time.sleep(0.05)  # well past the spin
        before = [sum(w.cpu_times()[:2]) for w in workers]
        time.sleep(0.5)
        used = [sum(w.cpu_times()[:2]) - b for w, b in zip(workers, before, strict=True)]
    assert max(used) < 0.05, used


# --- step_timeout: a hung env is killed and named, with where it was stuck -------------------

TIMEOUT_HEAD = (
    "envs 2..3 (worker 1, pid {pid}) did not answer {what} within step_timeout=1 s, so its "
    "worker was killed and the batch env cannot continue (raise step_timeout, "
    "backend_options.step_timeout in a config, if the env is only slow)."
)
SLEEPING_FRAME = r'envs_testlib\.py", line \d+ in {}\n'


def test_a_step_that_hangs_raises_env_timeout_error_naming_the_env_and_its_stack():
    # The reproduction: env 2 of 4 sleeps in its 5th step.
    env = BatchEnv(
        faulty_fns(4, 2, "hang", at=5),
        WorkerOptions(num_workers=2, step_timeout=1.0),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    action = np.zeros((4, 1), np.float32)
    for _ in range(4):
        env.step(action)
    with pytest.raises(EnvTimeoutError) as info:
        env.step(action)
    message = str(info.value)
    lines = message.splitlines()
    assert lines[0] == TIMEOUT_HEAD.format(pid=pids[1], what="a step")
    assert lines[1] == f"Stacks of worker 1 (pid {pids[1]}, envs 2..3), where it was stuck:"
    assert re.search(SLEEPING_FRAME.format("step"), message)
    assert "_exit_when_parent_dies" not in message  # the worker's own watch thread is left out
    assert lines[-1].endswith(" in worker_main")
    assert isinstance(info.value, WorkerDiedError)  # the worker is gone
    assert not running(pids[1])
    with pytest.raises(WorkerDiedError, match="did not answer a step within step_timeout=1 s"):
        env.step(action)  # broken, as by a dead worker
    env.close()
    assert_all_gone(pids)


def test_a_hung_worker_is_restarted_under_max_restarts_and_its_episodes_truncated():
    env = BatchEnv(
        faulty_fns(4, 2, "hang", at=5),
        WorkerOptions(num_workers=2, step_timeout=1.0, max_restarts=2),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    action = np.zeros((4, 1), np.float32)
    for _ in range(4):
        env.step(action)
    with pytest.warns(EnvRestartWarning) as warned:
        obs, reward, terminated, truncated, infos = env.step(action)
    assert truncated.tolist() == [False, False, True, True]
    assert terminated.tolist() == [False, False, False, False]
    assert reward.tolist() == [5.0, 5.0, 0.0, 0.0]
    # Envs 2 and 3 were rebuilt in a new worker: a first episode at t = 0; their final obs is
    # the last obs they returned (t = 4).
    assert obs[:, 1:].tolist() == [[1, 5], [1, 5], [1, 0], [1, 0]]
    assert infos["final_obs"][:, 2].tolist() == [5, 5, 4, 4]
    assert env.restarts == 2
    assert infos["env_restarted"].tolist() == [False, False, True, True]
    text = str(warned[0].message)
    new_pid = worker_pids(env)[1]
    assert text.startswith(
        f"BatchEnv: worker 1 (pid {pids[1]}, envs 2..3) did not answer a step within "
        f"step_timeout=1 s (killed); respawned it as pid {new_pid} and reset its envs 2..3, "
        "their episodes reported as truncated (restarts 1..2 of max_restarts=2).\nIts "
        "stacks, where it was stuck:\n"
    )
    assert re.search(SLEEPING_FRAME.format("step"), text)
    assert new_pid != pids[1] and not running(pids[1])
    obs, *_ = env.step(action)
    assert obs[:, 2].tolist() == [6, 6, 1, 1]  # the run goes on
    env.close()
    assert_all_gone([*pids, new_pid])


def test_a_timeout_past_the_restart_budget_raises_env_timeout_error_naming_the_budget():
    env = BatchEnv(
        faulty_fns(4, 2, "hang", at=2),
        WorkerOptions(num_workers=2, step_timeout=1.0, max_restarts=1),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    action = np.zeros((4, 1), np.float32)
    env.step(action)
    with pytest.raises(EnvTimeoutError) as info:
        env.step(action)
    lines = str(info.value).splitlines()
    assert lines[0] == (
        f"worker 1 (pid {pids[1]}, envs 2..3) did not answer a step within step_timeout=1 s "
        "(killed). Not restarted: the restart budget is used up (max_restarts=1, 0 restarts "
        "done, this step needs 2 more; in a PPOConfig the setting is "
        "backend_options.max_restarts). The batch env cannot continue; close it and build a new "
        "one."
    )
    assert lines[1] == "Its stacks, where it was stuck:"
    assert re.search(SLEEPING_FRAME.format("step"), str(info.value))
    env.close()
    assert_all_gone(pids)


# (how env 2 fails first, where its rebuilt self hangs, what the worker did not answer, envs
# restarted, the frame it was stuck in)
RESTART_HANGS = [
    pytest.param("exit", "reset", "a restart of envs 2..3", [2, 3], "reset", id="exit-reset"),
    pytest.param(
        "exit", "init", "a respawn (building its envs again)", [2, 3], "__init__", id="exit-init"
    ),
    pytest.param("step", "reset", "a restart of env 2", [2], "reset", id="raise-reset"),
    pytest.param("step", "init", "a restart of env 2", [2], "__init__", id="raise-init"),
]


@pytest.mark.parametrize(("first", "then", "what", "envs", "frame"), RESTART_HANGS)
def test_a_restart_that_hangs_raises_env_timeout_error_and_breaks_the_batch_env(
    tmp_path, first, then, what, envs, frame
):
    marker = str(tmp_path / "failed")
    env = BatchEnv(
        [lambda i=i: HangAfterRestartEnv(i, 2, first, then, marker) for i in range(4)],
        WorkerOptions(num_workers=2, step_timeout=1.0, max_restarts=4),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    action = np.zeros((4, 1), np.float32)
    env.step(action)
    # The rebuilt env sleeps an hour: only step_timeout (1 s) can end the restart, and the
    # message below names it; a restart left unbounded runs into the file's 30 s timeout.
    with pytest.raises(EnvTimeoutError) as info:
        env.step(action)  # env 2 fails; its restart hangs
    hung_pid = worker_pids(env)[1]  # the respawned worker after an exit, else the first
    assert (hung_pid != pids[1]) == (first == "exit")
    lines = str(info.value).splitlines()
    assert lines[0] == TIMEOUT_HEAD.format(pid=hung_pid, what=what)
    assert lines[1] == f"Stacks of worker 1 (pid {hung_pid}, envs 2..3), where it was stuck:"
    assert re.search(SLEEPING_FRAME.format(frame), str(info.value))
    assert env.restarts == 0  # a failed restart is not counted
    assert not running(hung_pid)
    with pytest.raises(WorkerDiedError) as broken:
        env.step(action)
    assert str(broken.value).startswith(f"restarting envs {envs} failed (envs 2..3 (worker 1, ")
    env.close()
    assert_all_gone([*pids, hung_pid])


@pytest.mark.parametrize("call", ["reset", "call"])
def test_a_reset_or_call_that_hangs_raises_env_timeout_error(call):
    fault = "hang_reset" if call == "reset" else "none"
    env = BatchEnv(
        faulty_fns(4, 2, fault),
        WorkerOptions(num_workers=2, step_timeout=1.0),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    with pytest.raises(EnvTimeoutError) as info:
        env.reset(seed=1) if call == "reset" else env.call("stall")
    lines = str(info.value).splitlines()
    assert lines[0] == TIMEOUT_HEAD.format(pid=pids[1], what=f"a {call}")
    frame = "reset" if call == "reset" else "stall"
    assert re.search(SLEEPING_FRAME.format(frame), str(info.value))
    env.close()
    assert_all_gone(pids)


def test_a_step_wait_timeout_keeps_the_step_pending_until_step_timeout():
    env = BatchEnv(
        faulty_fns(4, 2, "hang", at=1),
        WorkerOptions(num_workers=2, step_timeout=1.0),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    env.step_async(np.zeros((4, 1), np.float32))
    with pytest.raises(mp.TimeoutError):
        env.step_wait(timeout=0.2)  # the caller's own limit: the step stays pending
    with pytest.raises(EnvTimeoutError, match=r"^envs 2\.\.3 \(worker 1, pid \d+\) did not answer"):
        env.step_wait()  # step_timeout counts from step_async
    env.close()
    assert_all_gone(pids)


def test_a_slow_step_within_the_timeout_is_not_an_error():
    env = BatchEnv(
        [lambda i=i: SlowEnv(i, 0.3) for i in range(2)],
        WorkerOptions(num_workers=2, step_timeout=1.0),
        autoreset_mode="SameStep",
    )
    env.reset(seed=0)
    obs, *_ = env.step(np.zeros((2, 1), np.float32))
    assert obs[:, 2].tolist() == [1, 1]
    env.close()


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "5", True])
def test_step_timeout_must_be_positive_seconds(bad):
    with pytest.raises(ValueError) as info:
        BatchEnv(
            faulty_fns(2, -1, "none"),
            WorkerOptions(num_workers=1, step_timeout=bad),
            autoreset_mode="SameStep",
        )
    assert str(info.value) == (
        f"step_timeout must be a number of seconds > 0, or None to wait for ever; got {bad!r}."
    )

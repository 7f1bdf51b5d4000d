"""BatchEnv restarts (``max_restarts``): envs that raise and workers that die, exactly reported."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest
from envs_testlib import BuiltOnceEnv, CountEnv, FaultyNestedEnv, assert_all_gone
from gymnasium.vector import AutoresetMode
from test_env_faults import faulty_fns, worker_pids

from batchppo.envs import BatchEnv, EnvRestartWarning, WorkerDiedError, WorkerOptions
from batchppo.envs.batch_env import restart_seed

pytestmark = pytest.mark.timeout(30)

ACTION = np.zeros((4, 1), np.float32)


def rows(default: list[float], changed: dict[int, list[float]]) -> np.ndarray:
    """4 rows ``[i, *default]``, except the rows in ``changed``."""
    return np.array([changed.get(i, [i, *default]) for i in range(4)], np.float32)


def stepper(env: BatchEnv, method: str):
    """``actions -> (obs, reward, terminated, truncated, final_obs, infos)`` by either method."""

    def step(actions):
        if method == "step_arrays":
            return (*env.step_arrays(actions), None)
        obs, reward, terminated, truncated, infos = env.step(actions)
        return obs, reward, terminated, truncated, infos["final_obs"], infos

    return step


# bad=1 with step_in_parent: the env is in the parent's share; bad=3: in worker 1.
@pytest.mark.parametrize(("bad", "method"), [(1, "step"), (3, "step"), (3, "step_arrays")], ids=str)
def test_env_that_raises_is_rebuilt_and_its_episode_truncated(bad, method):
    fns = faulty_fns(4, bad, "step", at=2)
    with BatchEnv(
        fns,
        WorkerOptions(num_workers=2, step_in_parent=bad == 1, max_restarts=3),
        autoreset_mode="SameStep",
    ) as env:
        step = stepper(env, method)
        env.reset(seed=10)
        obs, reward, terminated, truncated, final_obs, infos = step(ACTION)
        np.testing.assert_array_equal(obs, rows([1, 1], {}))
        assert infos is None or "env_restarted" not in infos

        # Step 2: env `bad` raises. It reports its last good obs (t=1) as final obs, reward 0,
        # truncated; its obs is the first obs of the rebuilt env's episode (episode 1, t=0).
        message = (
            rf"env {bad} raised builtins\.ZeroDivisionError: step of env {bad} failed on "
            r"purpose; rebuilt and reset it, its episode reported as truncated \(restart 1 of "
            r"max_restarts=3\)"
        )
        with pytest.warns(EnvRestartWarning, match=message) as record:
            obs, reward, terminated, truncated, final_obs, infos = step(ACTION)
        restart_warnings = [w for w in record if w.category is EnvRestartWarning]
        assert len(restart_warnings) == 1
        assert "raise ZeroDivisionError" in str(restart_warnings[0].message)  # traceback tail
        np.testing.assert_array_equal(obs, rows([1, 2], {bad: [bad, 1, 0]}))
        np.testing.assert_array_equal(final_obs, rows([1, 2], {bad: [bad, 1, 1]}))
        assert reward.tolist() == [0.0 if i == bad else 2.0 for i in range(4)]
        assert terminated.tolist() == [False] * 4
        assert truncated.tolist() == [i == bad for i in range(4)]
        if infos is not None:
            mask = [i == bad for i in range(4)]
            assert infos["_final_obs"].tolist() == mask
            assert infos["env_restarted"].tolist() == mask
            assert infos["_env_restarted"].tolist() == mask
            assert infos["final_info"] == {} and infos["_final_info"].tolist() == mask
        assert env.restarts == 1
        seeds = env.get_attr("last_seed")
        assert seeds == tuple(restart_seed(10 + i, 1) if i == bad else 10 + i for i in range(4))

        # Stepping goes on: the new env is at t=1, the others at t=3; nothing ends.
        obs, reward, terminated, truncated, final_obs, infos = step(ACTION)
        np.testing.assert_array_equal(obs, rows([1, 3], {bad: [bad, 1, 1]}))
        np.testing.assert_array_equal(final_obs, obs)
        assert reward.tolist() == [1.0 if i == bad else 3.0 for i in range(4)]
        assert not truncated.any() and not terminated.any()
        assert infos is None or "env_restarted" not in infos
        assert env.restarts == 1


@pytest.mark.parametrize("how", ["sigkill_between_steps", "env_kills_its_worker_in_step"])
def test_dead_worker_is_respawned_and_all_its_envs_truncated(how):
    # Worker 1 steps envs 2 and 3; env 3 (or a SIGKILL from outside) kills it. Env 2 did not
    # cause the death and is restarted too.
    fault = "kill" if how == "env_kills_its_worker_in_step" else "none"
    env = BatchEnv(
        faulty_fns(4, 3, fault, at=2),
        WorkerOptions(num_workers=2, max_restarts=4),
        autoreset_mode="SameStep",
    )
    old = worker_pids(env)
    env.reset(seed=0)
    env.step(ACTION)
    if how == "sigkill_between_steps":
        os.kill(old[1], signal.SIGKILL)
        assert_all_gone([old[1]])
    message = (
        rf"worker 1 \(pid {old[1]}, envs 2\.\.3\) died \(killed by signal SIGKILL\) during a "
        r"step; respawned it as pid \d+ and reset its envs 2\.\.3, their episodes reported as "
        r"truncated \(restarts 1\.\.2 of max_restarts=4\)"
    )
    with pytest.warns(EnvRestartWarning, match=message):
        obs, reward, terminated, truncated, infos = env.step(ACTION)
    np.testing.assert_array_equal(obs, rows([1, 2], {2: [2, 1, 0], 3: [3, 1, 0]}))
    np.testing.assert_array_equal(infos["final_obs"], rows([1, 2], {2: [2, 1, 1], 3: [3, 1, 1]}))
    assert reward.tolist() == [2.0, 2.0, 0.0, 0.0]
    assert terminated.tolist() == [False] * 4
    assert truncated.tolist() == [False, False, True, True]
    assert infos["env_restarted"].tolist() == [False, False, True, True]
    assert infos["_env_restarted"].tolist() == [False, False, True, True]
    assert env.restarts == 2
    new = worker_pids(env)
    assert new[0] == old[0] and new[1] != old[1]
    assert env.get_attr("last_seed") == (0, 1, restart_seed(2, 1), restart_seed(3, 2))

    obs, reward, terminated, truncated, infos = env.step(ACTION)
    np.testing.assert_array_equal(obs, rows([1, 3], {2: [2, 1, 1], 3: [3, 1, 1]}))
    assert not truncated.any() and "env_restarted" not in infos
    env.close()
    assert_all_gone(old + new)


def test_nested_observations_restart_leaf_by_leaf():
    fns = [lambda i=i: FaultyNestedEnv(i, 1, at=2) for i in range(2)]
    with BatchEnv(
        fns, WorkerOptions(num_workers=2, max_restarts=1), autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        actions = (np.zeros((2, 2), np.float32), np.zeros(2, np.int64))
        env.step(actions)
        with pytest.warns(EnvRestartWarning):
            obs, _, _, truncated, infos = env.step(actions)
        assert truncated.tolist() == [False, True]
        assert obs["pos"].tolist() == [[0, 1, 2], [1, 1, 0]] and obs["t"].tolist() == [2, 0]
        final = infos["final_obs"]
        assert final["pos"].tolist() == [[0, 1, 2], [1, 1, 1]] and final["t"].tolist() == [2, 1]


def test_used_up_budget_raises_the_envs_own_error_naming_the_setting():
    # Env 3 raises at its first step of every episode: restart 1 is allowed, the next is not.
    with BatchEnv(
        faulty_fns(4, 3, "step", at=1),
        WorkerOptions(num_workers=2, max_restarts=1),
        autoreset_mode="SameStep",
    ) as env:
        env.reset(seed=0)
        with pytest.warns(EnvRestartWarning):
            env.step(ACTION)
        with pytest.raises(ZeroDivisionError, match="step of env 3 failed on purpose") as info:
            env.step(ACTION)
        message = str(info.value)
        assert "raised by env 3 in worker 1" in message
        assert (
            "Not restarted: the restart budget is used up (max_restarts=1, 1 restarts done, "
            "this step needs 1 more; in a PPOConfig the setting is backend_options.max_restarts)"
        ) in message
        assert env.restarts == 1


def test_used_up_budget_on_a_dead_worker_raises_worker_died_error():
    env = BatchEnv(
        faulty_fns(4, 3, "kill", at=1),
        WorkerOptions(num_workers=2, max_restarts=1),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    # The dead worker holds 2 envs: 2 restarts, where the budget allows 1.
    with pytest.raises(
        WorkerDiedError, match=r"max_restarts=1, 0 restarts done, this step needs 2"
    ):
        env.step(ACTION)
    with pytest.raises(WorkerDiedError, match="died"):
        env.step(ACTION)  # stays broken
    assert env.restarts == 0
    env.close()
    assert_all_gone(pids)


def test_default_fails_fast_and_never_restarts():
    with warnings.catch_warnings():
        warnings.simplefilter("error", EnvRestartWarning)
        with BatchEnv(
            faulty_fns(4, 3, "step"), WorkerOptions(num_workers=2), autoreset_mode="SameStep"
        ) as env:
            assert env.max_restarts == 0
            env.reset(seed=0)
            env.step(ACTION)
            with pytest.raises(ZeroDivisionError, match="env 3") as info:
                env.step(ACTION)
            assert "restart" not in str(info.value)
            assert env.restarts == 0
        env = BatchEnv(
            faulty_fns(4, 3, "kill"), WorkerOptions(num_workers=2), autoreset_mode="SameStep"
        )
        pids = worker_pids(env)
        env.reset(seed=0)
        env.step(ACTION)
        with pytest.raises(
            WorkerDiedError,
            match=r"worker 1 .* died \(killed by signal SIGKILL\) during a step\. The",
        ):
            env.step(ACTION)
        assert env.restarts == 0
        env.close()
        assert_all_gone(pids)


def test_failed_rebuild_is_raised_and_breaks_the_batch_env():
    # Env 1 (alone in worker 1) raises in step, then cannot be built again.
    env = BatchEnv(
        [lambda i=i: BuiltOnceEnv(i, 1) for i in range(2)],
        WorkerOptions(num_workers=2, max_restarts=5),
        autoreset_mode="SameStep",
    )
    pids = worker_pids(env)
    env.reset(seed=0)
    with pytest.raises(KeyError, match="env 1 cannot be rebuilt"):
        env.step(np.zeros((2, 1), np.float32))
    with pytest.raises(WorkerDiedError, match=r"restarting envs \[1\] failed"):
        env.step(np.zeros((2, 1), np.float32))
    env.close()
    assert_all_gone(pids)


def test_bad_settings_are_refused_at_construction():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_restarts must be an int >= 0"):
            BatchEnv(
                [CountEnv],
                WorkerOptions(num_workers=1, step_in_parent=True, max_restarts=bad),
                autoreset_mode="SameStep",
            )
    with pytest.raises(ValueError, match="max_restarts=2 needs autoreset_mode=SAME_STEP"):
        BatchEnv(
            [CountEnv],
            WorkerOptions(num_workers=1, step_in_parent=True, max_restarts=2),
            autoreset_mode=AutoresetMode.NEXT_STEP,
        )


def test_restart_seed_is_a_pure_function_of_seed_and_count():
    assert restart_seed(None, 1) is None
    assert restart_seed(7, 1) == restart_seed(7, 1)
    assert len({restart_seed(7, 1), restart_seed(7, 2), restart_seed(8, 1)}) == 3
    assert 0 <= restart_seed(-3, 5) < 2**32

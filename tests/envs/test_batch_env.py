"""BatchEnv: same-step autoreset, dense final_obs, async API, fast path, forwarding, checks."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import re

import gymnasium
import numpy as np
import psutil
import pytest
from envs_testlib import (
    HUNG_S,
    BigInfoEnv,
    BoolActionEnv,
    ConstructionCountingEnv,
    CountEnv,
    FaultyEnv,
    GatedEnv,
    NestedEnv,
    OtherSpaceEnv,
    TextInDictObsEnv,
    wait_until,
)
from gymnasium.error import AlreadyPendingCallError
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit

from batchppo.envs import BatchEnv, EnvRestartWarning, WorkerOptions

pytestmark = pytest.mark.timeout(60)

TERMINATE_AT = [2, 3, None, None]
TIME_LIMIT = [10, 10, 4, 2]


def count_fns(n: int = 4, info: bool = False):
    return [
        (lambda i=i: TimeLimit(CountEnv(i, TERMINATE_AT[i % 4], info), TIME_LIMIT[i % 4]))
        for i in range(n)
    ]


def test_same_step_autoreset_exact_sequence():
    # Envs 0 and 1 are stepped by the parent (the opt-in), 2 and 3 by one worker process.
    with BatchEnv(
        count_fns(), WorkerOptions(num_workers=2, step_in_parent=True), autoreset_mode="SameStep"
    ) as env:
        assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(obs[:, 1:], [[1, 0]] * 4)
        action = np.full((4, 1), 0.5, np.float32)
        history = [env.step(action) for _ in range(4)]
    # Step 1: nothing ended; final_obs equals obs everywhere.
    obs, reward, terminated, truncated, infos = history[0]
    np.testing.assert_array_equal(obs, [[0, 1, 1], [1, 1, 1], [2, 1, 1], [3, 1, 1]])
    np.testing.assert_array_equal(reward, [1.5] * 4)
    assert reward.dtype == np.float32
    np.testing.assert_array_equal(infos["final_obs"], obs)
    assert not infos["_final_obs"].any()
    # Step 2: env 0 terminates (terminate_at 2), env 3 is truncated (time limit 2); both are
    # reset in the same step: obs is episode 2 at t=0, final_obs the last obs of episode 1.
    obs, reward, terminated, truncated, infos = history[1]
    np.testing.assert_array_equal(terminated, [True, False, False, False])
    np.testing.assert_array_equal(truncated, [False, False, False, True])
    np.testing.assert_array_equal(obs, [[0, 2, 0], [1, 1, 2], [2, 1, 2], [3, 2, 0]])
    np.testing.assert_array_equal(infos["final_obs"], [[0, 1, 2], [1, 1, 2], [2, 1, 2], [3, 1, 2]])
    np.testing.assert_array_equal(infos["_final_obs"], [True, False, False, True])
    np.testing.assert_array_equal(reward, [2.5] * 4)
    # As in Gymnasium, finished envs report their (here empty) final info.
    assert infos["final_info"] == {}
    np.testing.assert_array_equal(infos["_final_info"], [True, False, False, True])
    # Step 3: env 1 terminates; step 4: env 2 hits its limit, env 3 its second limit.
    obs, _, terminated, truncated, infos = history[2]
    np.testing.assert_array_equal(terminated, [False, True, False, False])
    np.testing.assert_array_equal(obs[1], [1, 2, 0])
    np.testing.assert_array_equal(infos["final_obs"][1], [1, 1, 3])
    obs, _, terminated, truncated, infos = history[3]
    np.testing.assert_array_equal(truncated, [False, False, True, True])
    np.testing.assert_array_equal(terminated, [True, False, False, False])  # env 0: 2nd episode
    np.testing.assert_array_equal(infos["final_obs"][2:], [[2, 1, 4], [3, 2, 2]])
    np.testing.assert_array_equal(obs[2:], [[2, 2, 0], [3, 3, 0]])


@pytest.mark.parametrize("spin_us, worker_spin_us", [(0.0, 0.0), (0.0, 1000.0), (1000.0, 0.0)])
def test_spinning_or_blocking_waits_give_the_same_steps(spin_us, worker_spin_us):
    # 0 blocks on every wait; the parent or the workers spinning only changes who waits how.
    def run(**spin):
        options = WorkerOptions(num_workers=2, **spin)
        with BatchEnv(count_fns(), options, autoreset_mode="SameStep") as env:
            env.reset(seed=0)
            action = np.full((4, 1), 0.5, np.float32)
            return [env.step_arrays(action) for _ in range(5)]

    expected = run()
    got = run(spin_us=spin_us, worker_spin_us=worker_spin_us)
    for want, have in zip(expected, got, strict=True):
        for a, b in zip(want, have, strict=True):
            np.testing.assert_array_equal(a, b)


def test_matches_gymnasium_same_step_on_pendulum():
    """Step for step equal to SyncVectorEnv(SAME_STEP), from the same seeds."""
    fns = [lambda: gymnasium.make("Pendulum-v1", max_episode_steps=3)] * 5
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    # All 5 envs in 3 worker processes (K = 2, 2, 1); the parent steps none.
    with BatchEnv(
        fns, WorkerOptions(num_workers=3, step_in_parent=False), autoreset_mode="SameStep"
    ) as env:
        obs, _ = env.reset(seed=3)
        ref_obs, _ = ref.reset(seed=3)
        np.testing.assert_array_equal(obs, ref_obs)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(7):
            action = rng.uniform(-2, 2, (5, 1)).astype(np.float32)
            obs, reward, terminated, truncated, infos = env.step(action)
            r_obs, r_reward, r_term, r_trunc, r_infos = ref.step(action)
            np.testing.assert_array_equal(obs, r_obs)
            np.testing.assert_array_equal(reward, r_reward.astype(np.float32))
            np.testing.assert_array_equal(terminated, r_term)
            np.testing.assert_array_equal(truncated, r_trunc)
            done = r_term | r_trunc
            np.testing.assert_array_equal(infos["_final_obs"], done)
            for i in range(5):
                expected = r_infos["final_obs"][i] if done[i] else r_obs[i]
                np.testing.assert_array_equal(infos["final_obs"][i], expected)
            ended += int(truncated.sum())
        assert ended == 10  # every env hit the time limit of 3 at steps 3 and 6
    ref.close()


def test_step_async_wait_equals_step_and_step_arrays():
    with (
        BatchEnv(count_fns(), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as a,
        BatchEnv(count_fns(), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as b,
    ):
        a.reset(seed=1)
        b.reset(seed=1)
        action = np.zeros((4, 1), np.float32)
        for _ in range(3):
            a.step_async(action)
            obs, reward, term, trunc, infos = a.step_wait(timeout=10)
            b_obs, b_reward, b_term, b_trunc, b_final = b.step_arrays(action)
            np.testing.assert_array_equal(obs, b_obs)
            np.testing.assert_array_equal(reward, b_reward)
            np.testing.assert_array_equal(term, b_term)
            np.testing.assert_array_equal(trunc, b_trunc)
            np.testing.assert_array_equal(infos["final_obs"], b_final)


def test_copy_false_returns_shared_views_and_copy_true_fresh_arrays():
    with BatchEnv(
        count_fns(), WorkerOptions(num_workers=2), copy=False, autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        action = np.zeros((4, 1), np.float32)
        first = env.step_arrays(action)
        first_values = [x.copy() for x in first]
        second = env.step_arrays(action)
        for x, y in zip(first, second, strict=True):
            assert np.shares_memory(x, y)
        assert not np.array_equal(first_values[0], second[0])  # t moved on: views updated
        assert second[0].dtype == np.float32 and second[1].dtype == np.float32
        assert second[2].dtype == np.bool_ and second[3].dtype == np.bool_
    with BatchEnv(count_fns(), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        first = env.step_arrays(action)
        second = env.step_arrays(action)
        for x, y in zip(first, second, strict=True):
            assert not np.shares_memory(x, y)


def test_infos_are_batched_with_final_info():
    fns = [lambda i=i: CountEnv(i, terminate_at=2 + i, info=True) for i in range(3)]
    with BatchEnv(
        fns, WorkerOptions(num_workers=2, envs_per_worker=1), autoreset_mode="SameStep"
    ) as env:
        _, infos = env.reset(seed=0)
        np.testing.assert_array_equal(infos["t"], [0, 0, 0])
        np.testing.assert_array_equal(infos["_reset"], [True, True, True])
        action = np.zeros((3, 1), np.float32)
        _, _, _, _, infos = env.step(action)
        np.testing.assert_array_equal(infos["t"], [1, 1, 1])
        assert "final_info" not in infos
        _, _, terminated, _, infos = env.step(action)
        np.testing.assert_array_equal(terminated, [True, False, False])
        # Env 0 ended and was reset: its info is the reset info plus final_info.
        np.testing.assert_array_equal(infos["_final_info"], [True, False, False])
        assert infos["final_info"]["t"][0] == 2
        np.testing.assert_array_equal(infos["_reset"], [True, False, False])
        np.testing.assert_array_equal(infos["t"], [0, 2, 2])


def test_seeds_are_seed_plus_index():
    with BatchEnv(count_fns(5), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=10)
        assert env.get_attr("last_seed") == (10, 11, 12, 13, 14)
        env.reset(seed=[1, None, 2, None, 3])
        assert env.get_attr("last_seed") == (1, None, 2, None, 3)
        with pytest.raises(ValueError, match="list of 5 seeds"):
            env.reset(seed=[1, 2])


def test_call_get_attr_set_attr_render():
    fns = [lambda i=i: CountEnv(i, render_mode="rgb_array") for i in range(5)]
    with BatchEnv(fns, WorkerOptions(num_workers=3), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        assert env.call("double", 3) == (6, 7, 8, 9, 10)
        assert env.get_attr("tag") == (0, 1, 2, 3, 4)
        env.set_attr("tag", [5, 6, 7, 8, 9])
        assert env.get_attr("tag") == (5, 6, 7, 8, 9)
        env.set_attr("tag", 1)
        assert env.get_attr("tag") == (1,) * 5
        frames = env.render()
        assert len(frames) == 5 and frames[0].shape == (2, 2, 3)
        assert env.render_mode == "rgb_array"


def test_envs_get_their_own_action_arrays():
    """An env that keeps the action it got must not see it change on later steps."""
    with BatchEnv(count_fns(4), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        for k in range(3):
            env.step(np.full((4, 1), k / 10, np.float32))
        for seen in env.get_attr("seen_actions"):
            np.testing.assert_array_equal(np.concatenate(seen), np.array([0, 0.1, 0.2], "f4"))


def test_wrong_action_shape_or_dtype_is_a_value_error():
    with BatchEnv(count_fns(4), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        with pytest.raises(ValueError, match=r"\(4, 1\)"):
            env.step(np.zeros((3, 1), np.float32))
        with pytest.raises(ValueError, match=r"\(4, 1\)"):
            env.step(np.zeros((4,), np.float32))
        with pytest.raises(ValueError, match="dtype"):
            env.step(np.full((4, 1), "a"))
        env.step(np.zeros((4, 1), np.float64))  # float64 casts to the float32 space
    fns = [lambda: gymnasium.make("CartPole-v1")] * 3
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        env.step(np.array([0, 1, 0], np.int32))
        env.step(np.array([1, 1, 0], np.int64))
        with pytest.raises(ValueError, match="integer dtype"):
            env.step(np.array([0.0, 1.0, 0.0]))


@pytest.mark.parametrize("bad_index", [1, 3])  # in the parent's share / in a worker
def test_differing_spaces_fail_at_construction(bad_index):
    fns = [lambda: CountEnv()] * 4
    fns[bad_index] = lambda: OtherSpaceEnv()
    with pytest.raises(ValueError, match=f"env {bad_index} has observation space"):
        BatchEnv(
            fns,
            WorkerOptions(num_workers=2, step_in_parent=bad_index == 1),
            autoreset_mode="SameStep",
        )


def test_unsupported_space_is_a_value_error_naming_where_it_is():
    expected = r"The observation space is not supported\. .* found Text\(.*\) at \['name'\]\."
    with pytest.raises(ValueError, match=expected):
        BatchEnv([TextInDictObsEnv] * 2, WorkerOptions(num_workers=1), autoreset_mode="SameStep")


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least one env"):
        BatchEnv([], autoreset_mode="SameStep")
    with pytest.raises(ValueError, match="num_workers"):
        BatchEnv(count_fns(2), WorkerOptions(num_workers=0), autoreset_mode="SameStep")
    with pytest.raises(ValueError, match="fork"):
        BatchEnv(count_fns(2), context="fork", autoreset_mode="SameStep")


def test_one_worker_in_parent_steps_everything_in_process():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with BatchEnv(
        count_fns(4), WorkerOptions(num_workers=1, step_in_parent=True), autoreset_mode="SameStep"
    ) as env:
        after = {p.pid for p in psutil.Process().children(recursive=True)}
        assert after <= before  # no process was started
        env.reset(seed=0)
        _, _, terminated, _, _ = env.step(np.zeros((4, 1), np.float32))
        _, _, terminated, _, _ = env.step(np.zeros((4, 1), np.float32))
        np.testing.assert_array_equal(terminated, [True, False, False, False])


def test_importing_the_envs_layer_does_not_import_jax():
    """Workers fork from a server that imports batchppo.envs: JAX's threads must not be there."""
    import subprocess
    import sys

    code = "import sys, batchppo.envs; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_infos_larger_than_a_pipe_buffer_do_not_deadlock():
    with BatchEnv(
        [lambda: BigInfoEnv()] * 4, WorkerOptions(num_workers=2), autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        for t in (1, 2):
            *_, infos = env.step(np.zeros((4, 1), np.float32))
            assert infos["big"].shape == (4, 50_000)
            assert (infos["big"] == t).all()


def test_np_random_seed_is_one_seed_per_env_as_in_gymnasium():
    """As AsyncVectorEnv: a tuple of each env's ``np_random_seed`` (ints), before and after."""
    fns = [lambda: gymnasium.make("Pendulum-v1")] * 4
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        before = env.np_random_seed
        # Before any seeded reset every env draws its own seed from entropy, as in Gymnasium.
        assert type(before) is tuple and len(before) == 4
        assert all(type(s) is int and s >= 0 for s in before) and len(set(before)) == 4
        env.reset(seed=42)
        assert env.np_random_seed == (42, 43, 44, 45)
        assert type(env.np_random_seed) is tuple
        assert all(type(s) is int for s in env.np_random_seed)
        generators = env.np_random
        assert len(generators) == 4 and all(isinstance(g, np.random.Generator) for g in generators)
        env.reset(seed=[7, None, 9, None])  # None keeps an env's generator and its seed
        assert env.np_random_seed == (7, 43, 9, 45)


def test_bool_box_actions_step_with_bool_actions():
    fns = [lambda: BoolActionEnv()] * 3
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        assert env.single_action_space.dtype == np.bool_
        env.reset(seed=0)
        actions = np.array([[True, False], [False, False], [True, True]])
        obs, *_ = env.step(actions)
        np.testing.assert_array_equal(obs, [[1, 0], [0, 0], [1, 1]])
        seen = env.get_attr("last_action")
        assert all(a.dtype == np.bool_ for a in seen)
        np.testing.assert_array_equal(np.stack(seen), actions)
        expected = r"actions must have a bool dtype, shape \(3, 2\); got dtype float32\.$"
        with pytest.raises(ValueError, match=expected):
            env.step(actions.astype(np.float32))


def test_final_info_is_present_when_an_episode_ends_without_infos():
    """Gymnasium's SAME_STEP contract: ``final_info`` ({} here) with its mask, as AsyncVectorEnv."""
    fns = [lambda i=i: CountEnv(i, terminate_at=1 + i) for i in range(3)]
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        action = np.zeros((3, 1), np.float32)
        *_, infos = env.step(action)  # env 0 ends
        assert set(infos) == {"final_info", "_final_info", "final_obs", "_final_obs"}
        assert infos["final_info"] == {}
        np.testing.assert_array_equal(infos["_final_info"], [True, False, False])
        *_, infos = env.step(action)  # env 0 (its second episode) and env 1 end
        assert infos["final_info"] == {}
        np.testing.assert_array_equal(infos["_final_info"], [True, True, False])
        _, _, terminated, _, _ = env.step_arrays(action)  # the fast path stays info-free
        np.testing.assert_array_equal(terminated, [True, False, True])


@pytest.mark.parametrize("step_in_parent", [True, False])
def test_differing_spaces_name_the_env_and_what_differs(step_in_parent):
    fns = [lambda: CountEnv()] * 4
    fns[1] = lambda: OtherSpaceEnv()
    with pytest.raises(ValueError) as info:
        BatchEnv(
            fns,
            WorkerOptions(num_workers=2, step_in_parent=step_in_parent),
            autoreset_mode="SameStep",
        )
    message = str(info.value)
    assert message.startswith(
        "env 1 has observation space Box(-inf, inf, (4,), float32), but env 0 has "
        "Box(-inf, inf, (3,), float32) (the shapes differ: (4,) vs (3,)): BatchEnv(..., "
        "observation_mode='same') however the sub-environments observation spaces are not "
        "equivalent. All envs of a batch need equal spaces. If this is intentional, use "
        "`observation_mode='different'` instead (spaces of one shape and dtype)."
    )
    if step_in_parent:
        assert message.endswith("\n[batchppo] raised while building env 1 in the parent process.")
    else:
        assert (
            "\n[batchppo] batchppo.envs.errors.SpaceMismatchError raised by env 1 in worker 0 (pid "
            in message
        )


def test_step_arrays_with_nested_spaces_returns_the_obs_structure_and_dense_final_obs():
    fns = [lambda i=i: NestedEnv(i, terminate_at=2 + i) for i in range(3)]
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        obs, _ = env.reset(seed=0)
        assert set(obs) == {"pos", "t"} and obs["t"].dtype == np.int64
        actions = (np.full((3, 2), 0.25, np.float32), np.array([0, 1, 2]))
        env.step_arrays(actions)
        obs, reward, terminated, _, final_obs = env.step_arrays(actions)
        np.testing.assert_array_equal(reward, [0.5, 1.5, 2.5])
        np.testing.assert_array_equal(terminated, [True, False, False])
        np.testing.assert_array_equal(obs["pos"], [[0, 2, 0], [1, 1, 2], [2, 1, 2]])
        np.testing.assert_array_equal(obs["t"], [0, 2, 2])
        np.testing.assert_array_equal(final_obs["pos"], [[0, 1, 2], [1, 1, 2], [2, 1, 2]])
        np.testing.assert_array_equal(final_obs["t"], [2, 2, 2])
        seen = env.get_attr("last_action")
        assert all(isinstance(a, tuple) and a[0].dtype == np.float32 for a in seen)
        assert [int(a[1]) for a in seen] == [0, 1, 2]
        # Fresh arrays: the envs' actions do not change with the next step's.
        env.step_arrays((np.zeros((3, 2), np.float32), np.zeros(3, np.int64)))
        np.testing.assert_array_equal(seen[0][0], [0.25, 0.25])
    with BatchEnv(fns, WorkerOptions(num_workers=1), copy=False, autoreset_mode="SameStep") as env:
        obs, _ = env.reset(seed=0)
        first = env.step_arrays(actions)
        second = env.step_arrays(actions)
        assert np.shares_memory(first[0]["pos"], second[0]["pos"])
        assert np.shares_memory(first[4]["t"], second[4]["t"])


def test_nested_actions_of_the_wrong_structure_shape_or_dtype_name_the_leaf():
    with BatchEnv(
        [lambda: NestedEnv()] * 2, WorkerOptions(num_workers=1), autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        good = (np.zeros((2, 2), np.float32), np.zeros(2, np.int64))
        with pytest.raises(ValueError, match=r"actions\[0\]: actions must have shape \(2, 2\)"):
            env.step((np.zeros((2, 3), np.float32), good[1]))
        with pytest.raises(ValueError, match=r"actions\[1\]: actions must have an integer dtype"):
            env.step((good[0], np.zeros(2)))
        with pytest.raises(ValueError, match="must have the structure of the batched space"):
            env.step((good[0],))
        env.step(good)  # nothing was left pending by the failed calls


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED, "NextStep"])
def test_step_arrays_needs_same_step_mode(mode):
    with BatchEnv(count_fns(2), WorkerOptions(num_workers=1), autoreset_mode=mode) as env:
        assert env.metadata["autoreset_mode"] == AutoresetMode(mode)
        env.reset(seed=0)
        with pytest.raises(RuntimeError, match="step_arrays needs autoreset_mode=SAME_STEP"):
            env.step_arrays(np.zeros((2, 1), np.float32))
        env.step(np.zeros((2, 1), np.float32))  # nothing was left pending
    with pytest.raises(ValueError, match="AutoresetMode"):
        BatchEnv(count_fns(2), WorkerOptions(num_workers=1), autoreset_mode="sometimes")


def test_reset_wait_times_out_and_the_reset_stays_pending():
    """Unlike AsyncVectorEnv, which abandons a call that timed out: call the wait again."""
    fns = [lambda i=i: NestedEnv(i, reset_delay=0.3 if i == 1 else 0.0) for i in range(2)]
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset_async(seed=0)
        with pytest.raises(mp.TimeoutError):
            env.reset_wait(timeout=0.05)
        with pytest.raises(AlreadyPendingCallError):
            env.step_async((np.zeros((2, 2), np.float32), np.zeros(2, np.int64)))
        obs, _ = env.reset_wait()
        np.testing.assert_array_equal(obs["pos"], [[0, 1, 0], [1, 1, 0]])
        env.call_async("tag")
        assert env.call_wait(timeout=5) == (0, 1)


def times_out_waiting_for(env: BatchEnv, worker: int) -> bool:
    """Whether a short ``step_wait`` times out waiting for ``worker`` (the slots before it in
    the wait's order have answered)."""
    with pytest.raises(mp.TimeoutError) as info:  # Gymnasium's type, as AsyncVectorEnv's
        env.step_wait(timeout=0.05)
    return f"waiting for worker {worker} " in str(info.value)


def test_step_wait_after_a_timeout_returns_that_step(tmp_path):
    """Workers that answered before a ``step_wait`` timed out are not waited on again.

    Issue 10: the second wait used to wait on the fast worker a second time and time out
    again, although the slow one had finished. Envs 0 (the parent's share) and 1 (worker 0)
    answer at once, env 2 (worker 1) when the test opens its gate; env 1 reports infos,
    which must survive the timeout.
    """
    gate = tmp_path / "step"
    fns = [
        lambda: CountEnv(0),
        lambda: CountEnv(1, info=True),
        lambda: GatedEnv(2, str(gate)),
    ]
    with BatchEnv(
        fns,
        WorkerOptions(num_workers=2, envs_per_worker=1, step_in_parent=True),
        autoreset_mode="SameStep",
    ) as env:
        env.reset(seed=0)
        for t in (1, 2):
            env.step_async(np.array([[0.5], [0.25], [0.0]], np.float32))
            wait_until(lambda: times_out_waiting_for(env, 1), "the answer of worker 0")
            (tmp_path / f"step.{t}").touch()  # worker 1 answers now
            obs, reward, terminated, truncated, infos = env.step_wait(timeout=HUNG_S)
            np.testing.assert_array_equal(obs, [[0, 1, t], [1, 1, t], [2, 1, t]])
            np.testing.assert_array_equal(reward, [t + 0.5, t + 0.25, t])
            assert not terminated.any() and not truncated.any()
            np.testing.assert_array_equal(infos["t"], [0, t, 0])
            np.testing.assert_array_equal(infos["_t"], [False, True, False])


def test_step_wait_after_a_timeout_still_raises_an_earlier_workers_error(tmp_path):
    gate = tmp_path / "step"
    fns = [lambda: FaultyEnv(0, 0, "step", at=1), lambda: GatedEnv(1, str(gate))]
    with BatchEnv(fns, WorkerOptions(num_workers=2), autoreset_mode="SameStep") as env:
        env.reset(seed=0)
        env.step_async(np.zeros((2, 1), np.float32))
        wait_until(lambda: times_out_waiting_for(env, 1), "worker 0's report of its error")
        for step in (1, 2):
            (tmp_path / f"step.{step}").touch()  # worker 1 answers this step and the next
        with pytest.raises(ZeroDivisionError, match="step of env 0 failed on purpose"):
            env.step_wait(timeout=HUNG_S)
        obs, _, _, _, _ = env.step(np.zeros((2, 1), np.float32))  # nothing left pending
        assert obs[1].tolist() == [1, 1, 2]


def test_step_wait_after_a_timeout_restarts_a_worker_that_died_before_it(tmp_path):
    """A worker found dead by a ``step_wait`` that then timed out is not forgotten: the next
    wait respawns it and reports its env's episode as truncated, as an uninterrupted one."""
    gate = tmp_path / "step"
    fns = [lambda: FaultyEnv(0, 0, "exit", at=1), lambda: GatedEnv(1, str(gate))]
    with BatchEnv(
        fns, WorkerOptions(num_workers=2, max_restarts=1), autoreset_mode="SameStep"
    ) as env:
        env.reset(seed=0)
        env.step_async(np.zeros((2, 1), np.float32))
        # A wait that times out on worker 1 has found worker 0 dead.
        wait_until(lambda: times_out_waiting_for(env, 1), "worker 0's death")
        (tmp_path / "step.1").touch()  # worker 1 answers now
        with pytest.warns(EnvRestartWarning) as warned:
            obs, reward, terminated, truncated, infos = env.step_wait(timeout=HUNG_S)
        assert re.match(
            r"BatchEnv: worker 0 \(pid \d+, envs 0\.\.0\) died \(exit code 3\) during a step; "
            r"respawned it",
            str(warned[0].message),
        ), str(warned[0].message)
        assert env.restarts == 1
        assert truncated.tolist() == [True, False] and not terminated.any()
        assert infos["env_restarted"].tolist() == [True, False]
        np.testing.assert_array_equal(obs, [[0, 1, 0], [1, 1, 1]])
        np.testing.assert_array_equal(reward, [0.0, 1.0])
        obs, _ = env.reset(seed=1)  # nothing left pending
        np.testing.assert_array_equal(obs, [[0, 2, 0], [1, 2, 0]])


def builders(path) -> list[int]:
    """The id of the process that built each env, from a ConstructionCountingEnv's file."""
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("observation_mode", ["same", "different"])
@pytest.mark.parametrize("step_in_parent", [False, True])
def test_each_env_is_built_once_and_in_the_parent_only_when_asked(
    tmp_path, step_in_parent, observation_mode
):
    path = tmp_path / "builds"
    fns = [functools.partial(ConstructionCountingEnv, str(path), i) for i in range(4)]
    with BatchEnv(
        fns,
        WorkerOptions(num_workers=2, step_in_parent=step_in_parent),
        observation_mode=observation_mode,
        autoreset_mode="SameStep",
    ) as env:
        assert env.single_observation_space == CountEnv().observation_space
        assert env.metadata["render_modes"] == ["rgb_array"]  # env 0's, read in its worker
        obs, _ = env.reset(seed=0)
        obs, *_ = env.step(np.zeros((4, 1), np.float32))
        np.testing.assert_array_equal(obs[:, 0], [0, 1, 2, 3])
        built = builders(path)
    assert len(built) == 4, built
    # By default no env is built in the calling process; step_in_parent builds its share.
    assert built.count(os.getpid()) == (2 if step_in_parent else 0)

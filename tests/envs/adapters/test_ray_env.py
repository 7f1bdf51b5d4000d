"""RayBatchEnv: the BatchEnv contract with Ray actors (a small local Ray)."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from envs_testlib import CountEnv, FaultyEnv, NestedEnv, OtherSpaceEnv
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import TimeLimit

ray = pytest.importorskip("ray")

from batchppo.backends.ray import ray_batch_env  # noqa: E402
from batchppo.envs import BatchEnv, RayWorkerOptions, WorkerOptions, make, make_env_fn  # noqa: E402
from batchppo.envs.adapters.ray_env import RayBatchEnv, RayResourcesError  # noqa: E402
from batchppo.envs.errors import (  # noqa: E402
    EnvTimeoutError,
    SpaceMismatchError,
    WorkerDiedError,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def local_ray(ray_processes_left):
    assert not ray.is_initialized(), "an earlier test left Ray running"
    # address="local": a new Ray of this process's own. Without an address ray.init joins the
    # newest cluster `ray start` left on this machine, such as test_ray_cluster's head while
    # the other test process runs it.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    assert not ray_processes_left(), "Ray processes outlived ray.shutdown()"


def fns():
    return [
        (lambda i=i: TimeLimit(CountEnv(i, [2, 3, None][i], info=True), [10, 10, 2][i]))
        for i in range(3)
    ]


def test_ray_matches_batch_env(local_ray):
    with (
        RayBatchEnv(fns(), RayWorkerOptions(num_workers=2)) as renv,
        BatchEnv(fns(), WorkerOptions(num_workers=2), autoreset_mode="SameStep") as benv,
    ):
        assert renv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        r_obs, _ = renv.reset(seed=4)
        b_obs, _ = benv.reset(seed=4)
        np.testing.assert_array_equal(r_obs, b_obs)
        assert renv.get_attr("last_seed") == (4, 5, 6)
        assert renv.np_random_seed == benv.np_random_seed == (4, 5, 6)
        action = np.full((3, 1), 0.25, np.float32)
        for _ in range(4):
            r = renv.step(action)
            b = benv.step(action)
            for x, y in zip(r[:4], b[:4], strict=True):
                np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(r[4]["final_obs"], b[4]["final_obs"])
            np.testing.assert_array_equal(r[4]["_final_obs"], b[4]["_final_obs"])
            np.testing.assert_array_equal(r[4]["t"], b[4]["t"])
        arrays = renv.step_arrays(action)
        assert len(arrays) == 5 and arrays[1].dtype == np.float32
        assert renv.call("double", 1) == (2, 3, 4)
        with pytest.raises(ValueError, match=r"\(3, 1\)"):
            renv.step(np.zeros((2, 1), np.float32))


def test_ray_step_error_keeps_type_and_names_env(local_ray):
    env = RayBatchEnv(
        [lambda i=i: FaultyEnv(i, 2, "step") for i in range(3)], RayWorkerOptions(num_workers=2)
    )
    env.reset(seed=0)
    env.step(np.zeros((3, 1), np.float32))
    with pytest.raises(ZeroDivisionError, match="env 2"):
        env.step(np.zeros((3, 1), np.float32))
    env.close()


def test_env_constructor_error_keeps_type_and_names_env(local_ray):
    # The actor's creation fails; the env's own error comes back, not a bare "actor died".
    with pytest.raises(ZeroDivisionError, match=r"(?s)constructor of env 1 .*env 1 in a Ray actor"):
        RayBatchEnv(
            [lambda i=i: FaultyEnv(i, 1, "init") for i in range(2)], RayWorkerOptions(num_workers=2)
        )


def test_a_step_that_hangs_raises_env_timeout_error_with_the_actors_stack(local_ray):
    env = RayBatchEnv(
        [lambda i=i: FaultyEnv(i, 2, "hang", 5) for i in range(4)],
        RayWorkerOptions(num_workers=2, step_timeout=2.0),
    )
    env.reset(seed=0)
    action = np.zeros((4, 1), np.float32)
    for _ in range(4):
        env.step(action)
    with pytest.raises(EnvTimeoutError) as info:
        env.step(action)
    lines = str(info.value).splitlines()
    assert lines[0] == (
        "envs 2..3 (Ray env actor 1) did not answer a step within step_timeout=2 s, so its "
        "actor was killed and the batch env cannot continue (raise step_timeout, "
        "backend_options.step_timeout in a config, if the env is only slow)."
    )
    assert lines[1] == "Stacks of envs 2..3 (Ray env actor 1), where it was stuck:"
    assert lines[-2].endswith(", in step") and "envs_testlib.py" in lines[-2]
    assert lines[-1].strip() == "time.sleep(3600)"
    with pytest.raises(WorkerDiedError, match=r"Ray env actor 1 \(envs 2\.\.3\) died"):
        env.step(action)
    env.close()


@pytest.mark.parametrize(("call", "frame"), [("reset", "reset"), ("call", "stall")])
def test_a_reset_or_call_that_hangs_raises_env_timeout_error_with_the_actors_stack(
    local_ray, call, frame
):
    fault = "hang_reset" if call == "reset" else "none"  # hang_reset: resets after the first
    env = RayBatchEnv(
        [lambda i=i: FaultyEnv(i, 2, fault) for i in range(4)],
        RayWorkerOptions(num_workers=2, step_timeout=2.0),
    )
    env.reset(seed=0)
    with pytest.raises(EnvTimeoutError) as info:
        env.reset(seed=1) if call == "reset" else env.call("stall")
    lines = str(info.value).splitlines()
    assert lines[0] == (
        f"envs 2..3 (Ray env actor 1) did not answer a {call} within step_timeout=2 s, so its "
        "actor was killed and the batch env cannot continue (raise step_timeout, "
        "backend_options.step_timeout in a config, if the env is only slow)."
    )
    assert lines[1] == "Stacks of envs 2..3 (Ray env actor 1), where it was stuck:"
    assert lines[-2].endswith(f", in {frame}") and "envs_testlib.py" in lines[-2]
    assert lines[-1].strip() == "time.sleep(3600)"
    with pytest.raises(WorkerDiedError, match=r"Ray env actor 1 \(envs 2\.\.3\) died"):
        env.reset(seed=2)
    env.close()


def test_make_ray_backend(local_ray):
    from batchppo.envs import make

    options = RayWorkerOptions(num_workers=2)
    with make(
        "Pendulum-v1", 3, seed=0, backend=ray_batch_env, options=options, max_length=2
    ) as env:
        assert isinstance(env, RayBatchEnv) and env.options is options
        obs, *_ = env.step_arrays(np.zeros((3, 1)))
        assert obs.dtype == np.float32 and obs.shape == (3, 3)
        obs, _, _, truncated, final_obs = env.step_arrays(np.zeros((3, 1)))
        np.testing.assert_array_equal(truncated, [True] * 3)
        assert not np.array_equal(obs, final_obs)


def test_train_and_eval_envs_fit_side_by_side(local_ray):
    # Issue 12: a trainer's training and eval envs each take one actor per CPU by default;
    # at a whole CPU per actor the second env's actors could never be placed and it hung.
    with RayBatchEnv(fns()) as train_env, RayBatchEnv(fns()[:2]) as eval_env:
        assert len(train_env.actor_handles) == len(eval_env.actor_handles) == 2
        assert train_env.reset(seed=0)[0].shape[0] == 3
        assert eval_env.reset(seed=0)[0].shape[0] == 2


def test_unplaceable_actors_raise_a_typed_error_within_the_timeout(local_ray, spy):
    # The actors close() finds, which it gives 5 s to close their envs.
    closing = spy(RayBatchEnv, "close_extras", lambda env, **kwargs: len(env.actor_handles))
    with pytest.raises(RayResourcesError, match=r"need \{CPU: 3\}.*did not start within 1 s"):
        RayBatchEnv(fns(), RayWorkerOptions(num_workers=1, num_cpus=3, startup_timeout=1.0))
    assert closing == [0]  # the actor that never started was killed at the timeout
    # The queued actor was killed, not left to grab the CPUs later: a full-size env fits.
    with RayBatchEnv(fns(), RayWorkerOptions(num_workers=2, num_cpus=1, startup_timeout=30)) as env:
        env.reset(seed=0)


def test_options_of_the_other_batch_env_are_a_type_error_before_any_actor_starts():
    # The settings themselves are checked where the options are made (test_worker_options).
    with pytest.raises(TypeError, match=r"^options must be a batchppo.envs.RayWorkerOptions"):
        RayBatchEnv(fns(), WorkerOptions(num_workers=2))
    with pytest.raises(
        TypeError,
        match=r"RayWorkerOptions are RayBatchEnv's; give BatchEnv a batchppo.envs.WorkerOptions\.$",
    ):
        make("Pendulum-v1", 2, backend="process", options=RayWorkerOptions(address="auto"))


def _count_remote_calls(monkeypatch, handles, log: list[str]) -> None:
    """Records the name of every remote call made through the actor handles ``handles``
    (Ray resolves an actor's methods in ``ActorHandle.__getattr__``)."""
    resolve = ray.actor.ActorHandle.__getattr__

    def counting(handle, name: str):
        method = resolve(handle, name)
        if not hasattr(method, "remote") or not any(handle is h for h in handles):
            return method

        class _Method:
            @staticmethod
            def remote(*args, **kwargs):
                log.append(name)
                return method.remote(*args, **kwargs)

        return _Method()

    monkeypatch.setattr(ray.actor.ActorHandle, "__getattr__", counting)


def test_a_step_is_one_round_trip_per_actor(local_ray, monkeypatch):
    # 12 envs on 3 actors: every step, with infos or without, sends 3 remote calls (each
    # actor steps its 4 envs), never 12.
    env_fns = [lambda i=i: CountEnv(i, info=True) for i in range(12)]
    with RayBatchEnv(env_fns, RayWorkerOptions(num_workers=3, num_cpus=0.25)) as env:
        env.reset(seed=0)
        log: list[str] = []
        _count_remote_calls(monkeypatch, env.actor_handles, log)
        before = env.remote_calls
        actions = np.arange(12, dtype=np.float32).reshape(12, 1)
        for k in range(1, 4):
            obs, reward, *_ = env.step(actions)
            assert log == ["step"] * 3 * (2 * k - 1), log
            obs, reward, *_ = env.step_arrays(actions)
            assert log == ["step"] * 3 * (2 * k), log
            # Every env stepped once per call, with its own action.
            np.testing.assert_array_equal(obs[:, 0], np.arange(12))
            np.testing.assert_array_equal(obs[:, 2], 2 * k)
            np.testing.assert_array_equal(reward, 2 * k + np.arange(12))
        assert env.remote_calls - before == len(log) == 18


def builders(path) -> list[int]:
    """The id of the process that built each env, from a ConstructionCountingEnv's file."""
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def test_each_env_is_built_once_in_its_actor(local_ray, tmp_path):
    """Issue 10: the spaces are those the actors report; no env is built in this process
    (make(backend=ray_batch_env) built 5 envs for 4, env 0 once more here to read the spaces)."""
    path = tmp_path / "builds"
    env_id = "envs_testlib:ConstructionCounting-v0"
    # The actors import envs_testlib (make() builds the env by its id): put it on their path.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    actor_options = {"runtime_env": {"env_vars": {"PYTHONPATH": here}}}
    with make(
        env_id,
        4,
        seed=0,
        backend=functools.partial(ray_batch_env, actor_options=actor_options),
        options=RayWorkerOptions(num_workers=2),
        path=str(path),
    ) as env:
        assert isinstance(env, RayBatchEnv)
        built = builders(path)
        assert len(built) == 4, built
        assert os.getpid() not in built
        assert len(set(built)) == 2  # one process per actor
        # The spaces and metadata of make()'s per-env stack over env 0, read in its actor.
        expected = make_env_fn(env_id, path=os.devnull)()
        assert env.single_observation_space == expected.observation_space
        assert env.single_action_space == expected.action_space
        assert env.metadata["render_modes"] == ["rgb_array"]
        obs, *_ = env.step_arrays(np.zeros((4, 1), np.float32))
        np.testing.assert_array_equal(obs, [[0, 1, 1]] * 4)  # [tag, episode, t]
    assert len(builders(path)) == 4


def test_spaces_are_checked_against_env_0s(local_ray):
    # Env 2 is in the second actor: the actors' reports are checked across actors.
    fns = [CountEnv, CountEnv, OtherSpaceEnv]
    with pytest.raises(SpaceMismatchError, match=r"env 2 has observation space .*\(4,\)"):
        RayBatchEnv(fns, RayWorkerOptions(num_workers=2))
    with pytest.raises(ValueError, match=r"the observation space is Dict.*Use BatchEnv"):
        RayBatchEnv([NestedEnv], RayWorkerOptions(num_workers=1))

"""RayBatchEnv on a two-node Ray cluster on this machine (issue 12: Ray on a real cluster).

One ``ray.cluster_utils.Cluster`` (a head node and a second node, one CPU each) serves the
whole module: starting one takes seconds. Each test joins it through ``RayBatchEnv``'s own
connection path (``address``, ``RAY_ADDRESS``, ``backend_options.address`` in a training
config) and leaves it again.
"""

from __future__ import annotations

import math
import os
import signal

import numpy as np
import pytest
from envs_testlib import CountEnv, SlowEnv, assert_all_gone

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

import batchppo  # noqa: E402
from batchppo.envs import RayWorkerOptions, WorkerDiedError  # noqa: E402
from batchppo.envs.adapters import ray_env  # noqa: E402
from batchppo.envs.adapters.ray_env import RayBatchEnv, RayConnectionError, RayResourcesError  # noqa: E402

pytestmark = [
    pytest.mark.timeout(120),
    # The cluster's nodes start through subprocess (fork + exec), which JAX, imported by the
    # training test's modules, warns about; nothing runs between the fork and the exec.
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
]

# Nothing listens on port 1: the connection is refused at once.
DEAD_ADDRESS = "127.0.0.1:1"
# A short training run: 4 envs x 32 steps an iteration, tiny networks, one evaluation.
TINY = [
    "steps=1024",
    "num_agents=4",
    "rollout_length=32",
    "update_epochs=1",
    "num_minibatches=1",
    "policy_layers=[16]",
    "value_layers=[16]",
    "max_length=50",
    "eval_episodes=4",
    "eval_every=1024",
    "log_every=1024",
]


@pytest.fixture(scope="module")
def cluster(ray_processes_left):
    """A head node and one more node, one CPU each; shut down even when a test fails."""
    assert not ray.is_initialized(), "an earlier test left Ray running"
    nodes = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        nodes.add_node(num_cpus=1)
        nodes.wait_for_nodes()
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()
    assert not ray_processes_left(), "Ray processes outlived the cluster's shutdown"


@pytest.fixture
def joined(cluster, monkeypatch):
    """The cluster, which the test joins itself; this process leaves it afterwards."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray.is_initialized()
    yield cluster
    ray.shutdown()


def fns(n: int, env=CountEnv):
    return [lambda i=i: env(i) for i in range(n)]


def test_actors_span_both_nodes_and_a_killed_actor_fails_the_step_fast(joined, spy):
    options = RayWorkerOptions(num_workers=2, num_cpus=1, address=joined.address)
    env = RayBatchEnv(fns(4, SlowEnv), options)
    try:
        assert ray.get_runtime_context().gcs_address == joined.address
        assert joined.address not in ray_env._OWN_CLUSTERS  # joined, not started here
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        locations = env.actor_locations()
        assert len(alive) == 2 and {node for node, _ in locations} == alive
        # It steps as one batch across the nodes: obs = [tag, episode, t].
        obs, _ = env.reset(seed=0)
        actions = np.zeros((4, 1), np.float32)
        for t in (1, 2):
            obs, *_ = env.step_arrays(actions)
            np.testing.assert_array_equal(obs, [[i, 1, t] for i in range(4)])
        # Killed mid-step (a SlowEnv step takes 0.2 s): the step raises a typed error.
        env.step_async(actions, want_info=False)
        ray.kill(env.actor_handles[1])
        waits = spy(ray, "get", lambda refs, timeout=None: timeout)  # each wait's timeout
        with pytest.raises(WorkerDiedError, match=r"Ray env actor 1 \(envs 2\.\.3\) died"):
            env.step_wait()
        # One wait, without a deadline, ended by Ray's report of the death: no timeout is involved.
        assert waits == [None]
    finally:
        env.close()
    assert_all_gone([pid for _, pid in locations])  # the actors do not outlive close()


def test_an_actor_process_that_dies_fails_the_next_step_fast(joined, spy):
    env = RayBatchEnv(fns(4), RayWorkerOptions(num_workers=2, num_cpus=1, address=joined.address))
    try:
        env.reset(seed=0)
        (_, pid), *_ = env.actor_locations()
        os.kill(pid, signal.SIGKILL)  # a crash, not a Ray kill
        waits = spy(ray, "get", lambda refs, timeout=None: timeout)  # each wait's timeout
        with pytest.raises(WorkerDiedError, match=r"Ray env actor 0 \(envs 0\.\.1\) died"):
            env.step_arrays(np.zeros((4, 1), np.float32))
        assert waits == [None]  # one wait, without a deadline, ended by Ray's report
    finally:
        env.close()


def test_ray_address_is_honoured_and_a_running_ray_is_reused(joined, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", joined.address)
    with RayBatchEnv(fns(2), RayWorkerOptions(num_workers=2)) as env:
        assert ray.get_runtime_context().gcs_address == joined.address
        assert env.reset(seed=0)[0].shape == (2, 3)
        # Ray is initialised now: another env uses it, and says so when given another address.
        joined_not = r"backend_options\.address '127\.0\.0\.1:1' is not joined"
        with pytest.warns(UserWarning, match=joined_not):
            other = RayBatchEnv(fns(2), RayWorkerOptions(num_workers=1, address=DEAD_ADDRESS))
        with other:
            assert other.reset(seed=0)[0].shape == (2, 3)


def test_an_address_that_does_not_answer_raises_at_once(monkeypatch, ray_init_calls):
    source = r"'127\.0\.0\.1:1' \(from backend_options\.address\)"
    with pytest.raises(RayConnectionError, match=source):
        RayBatchEnv(fns(2), RayWorkerOptions(address=DEAD_ADDRESS))
    monkeypatch.setenv("RAY_ADDRESS", DEAD_ADDRESS)
    with pytest.raises(RayConnectionError, match=r"\(from RAY_ADDRESS\).*correct RAY_ADDRESS"):
        RayBatchEnv(fns(2))
    assert ray_init_calls == []  # it retries an address that does not answer for minutes
    assert not ray.is_initialized()


# A second path: CI covers a training run on Ray with its training and eval envs in
# tests/experiment/run/test_train_ray.py, backend_options.address taking batchppo.train to this
# cluster in test_num_cpus_and_startup_timeout_options_reach_the_actors (below), and actors on
# both nodes in test_actors_span_both_nodes_and_a_killed_actor_fails_the_step_fast (above).
@pytest.mark.extended
def test_train_on_the_cluster_through_the_address_option(joined):
    # The trainer's training and eval envs (2 actors each at half a CPU) fill both nodes.
    overrides = ["backend=ray", f"backend_options={{address: '{joined.address}'}}", *TINY]
    result = batchppo.train("pendulum_fast", overrides=overrides, progress="none")
    assert result.step == 1024
    assert result.score is not None and math.isfinite(result.score)
    assert ray.get_runtime_context().gcs_address == joined.address


def test_num_cpus_and_startup_timeout_options_reach_the_actors(joined, spy):
    # 2 actors at 2 CPUs each cannot be placed on 2 CPUs; on a cluster this process did not
    # start, other clients could free CPUs, so the start-up timeout decides.
    options = f"backend_options={{address: '{joined.address}', num_cpus: 2, startup_timeout: 1}}"
    overrides = ["backend=ray", options, *TINY, "backend_options.num_workers=2"]
    waits = spy(RayBatchEnv, "_await_start", lambda env, demand, timeout: timeout)
    with pytest.raises(RayResourcesError, match=r"need \{CPU: 4\}.*did not start within 1 s"):
        batchppo.train("pendulum_fast", overrides=overrides, progress="none")
    assert waits == [1.0]  # the run ends at its first start-up wait, of the option's 1 s

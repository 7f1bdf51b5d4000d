"""Training on the Ray backend end to end, on a local Ray the run starts itself (issue 12)."""

from __future__ import annotations

import math
import time

import psutil
import pytest

ray = pytest.importorskip("ray")

import batchppo  # noqa: E402
from batchppo import cli  # noqa: E402

pytestmark = pytest.mark.timeout(120)

# 4 envs x 32 steps = 128 env steps per iteration, tiny networks, one epoch; two evals of one
# short episode per env.
TINY_RAY = [
    "backend=ray",
    "steps=2048",
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
def own_ray(ray_processes_left):
    """No Ray at the start (the run starts its own, as the CLI does); none left at the end."""
    assert not ray.is_initialized(), "an earlier test left Ray running"
    yield
    ray.shutdown()
    assert not ray_processes_left(), "Ray processes outlived ray.shutdown()"


def test_train_on_ray_with_train_and_eval_envs(own_ray):
    # The trainer holds a training env and an eval env of Ray actors at once; before issue
    # 12's fix the eval env's actors could never be placed and precompile hung.
    result = batchppo.train("pendulum_fast", overrides=TINY_RAY, progress="none")
    assert result.step == 2048
    assert result.score is not None and math.isfinite(result.score) and result.score < 0
    assert ray.is_initialized()


def test_cli_names_the_missing_cpus_in_one_line_at_once(own_ray, capsys, tmp_path):
    # 8 actors at half a CPU ask for 4 CPUs of a local Ray that has fewer: no waiting for
    # the start-up timeout, since no other process or autoscaler could free or add any.
    cpus = ray.cluster_resources()["CPU"] if ray.is_initialized() else psutil.cpu_count()
    workers = int(2 * cpus + 2)
    argv = ["train", "--config", "pendulum_fast", "--logdir", str(tmp_path), "--progress",
            "none", *(a for o in TINY_RAY for a in ("--set", o)),
            "--set", f"num_agents={workers}", "--set", f"num_workers={workers}"]  # fmt: skip
    start = time.monotonic()
    code = cli.main(argv)
    elapsed = time.monotonic() - start
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("batchppo: error: RayBatchEnv:") and err.count("\n") == 1, err
    assert f"need {{CPU: {workers / 2:g}}}" in err and "lower num_workers" in err, err
    assert elapsed < 30  # seconds, where the start-up timeout is 60

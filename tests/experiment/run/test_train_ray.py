"""Training on the Ray backend end to end, on a local Ray the run starts itself (issue 12)."""

from __future__ import annotations

import re

import psutil
import pytest

ray = pytest.importorskip("ray")

import batchppo  # noqa: E402
from batchppo import cli  # noqa: E402
from batchppo.backends import get_backend  # noqa: E402
from batchppo.backends.ray import RayOptions  # noqa: E402
from batchppo.experiment.config import configs, resume  # noqa: E402
from batchppo.experiment.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.timeout(120)

# 4 envs x 32 steps = 128 env steps per iteration, tiny networks, one epoch; four iterations
# and two evals of one short episode per env.
TINY_RAY = [
    "backend=ray",
    "steps=512",
    "num_agents=4",
    "rollout_length=32",
    "update_epochs=1",
    "num_minibatches=1",
    "policy_layers=[16]",
    "value_layers=[16]",
    "max_length=50",
    "eval_episodes=4",
    "eval_every=256",
    "log_every=256",
]


@pytest.fixture(scope="module")
def own_ray(ray_processes_left):
    """No Ray at the start (the run starts its own, as the CLI does); none left at the end."""
    assert not ray.is_initialized(), "an earlier test left Ray running"
    yield
    ray.shutdown()
    assert not ray_processes_left(), "Ray processes outlived ray.shutdown()"


# Its runs are a few iterations each; both compile with the same options.
@pytest.mark.usefixtures("cold_training_programs")
def test_train_on_ray_with_train_and_eval_envs(own_ray):
    # The trainer holds a training env and an eval env of Ray actors at once; before issue
    # 12's fix the eval env's actors could never be placed and precompile hung.
    result = batchppo.train("pendulum_fast", overrides=TINY_RAY, progress="none")
    assert result.step == 512
    assert ray.is_initialized()
    # The same run with the envs in worker processes: the same seeded episodes, the same
    # learning, the same eval score to the last bit.
    process = [o for o in TINY_RAY if o != "backend=ray"]
    assert batchppo.train("pendulum_fast", overrides=process, progress="none").score == result.score


def test_cli_names_the_missing_cpus_in_one_line_at_once(own_ray, capsys, tmp_path):
    # 8 actors at half a CPU ask for 4 CPUs of a local Ray that has fewer: no waiting for
    # the start-up timeout, since no other process or autoscaler could free or add any.
    cpus = ray.cluster_resources()["CPU"] if ray.is_initialized() else psutil.cpu_count()
    workers = int(2 * cpus + 2)
    argv = ["train", "--config", "pendulum_fast", "--logdir", str(tmp_path), "--progress",
            "none", *(a for o in TINY_RAY for a in ("--set", o)),
            "--set", f"num_agents={workers}",
            "--set", f"backend_options.num_workers={workers}"]  # fmt: skip
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("batchppo: error: RayBatchEnv:") and err.count("\n") == 1, err
    assert f"need {{CPU: {workers / 2:g}}}" in err and "lower num_workers" in err, err
    # The check of the local Ray's CPUs, before any actor starts, not the 60 s start-up wait.
    assert "but the local Ray started by batchppo has" in err and "did not start" not in err, err


def test_cli_names_an_address_that_does_not_answer_in_one_line(
    own_ray, capsys, tmp_path, ray_init_calls
):
    ray.shutdown()  # joining happens only where this process has no Ray yet
    argv = ["train", "--config", "pendulum_fast", "--logdir", str(tmp_path), "--progress",
            "none", *(a for o in TINY_RAY for a in ("--set", o)),
            "--set", "backend_options={address: '127.0.0.1:1'}"]  # fmt: skip
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code == 2
    head = "batchppo: error: RayBatchEnv: cannot join the Ray cluster at '127.0.0.1:1'"
    assert err.startswith(f"{head} (from backend_options.address)") and err.count("\n") == 1, err
    assert ray_init_calls == []  # it retries an address that does not answer for minutes
    assert not ray.is_initialized()


def test_ray_options_are_checked_and_mutable_on_resume():
    config = configs.apply_overrides(configs.get_preset("pendulum_fast"), ["backend=ray"])
    assert config.backend_options == {}
    assert config.parsed_backend_options == RayOptions(
        num_workers=None, step_timeout=60.0, address=None, num_cpus=0.5, startup_timeout=60.0
    )
    assert get_backend("ray").run_settings(config) == {"wrappers": ()}
    bad = {
        "backend_options={address: ''}": "backend_options.address='': give host:port or auto",
        "backend_options={num_cpus: -1}": "backend_options.num_cpus=-1.0: must be >= 0",
        "backend_options={startup_timeout: 0}": (
            "backend_options.startup_timeout=0.0: must be > 0 (seconds)"
        ),
    }
    for override, message in bad.items():
        with pytest.raises(ConfigError, match=f"^invalid config: {re.escape(message)}"):
            configs.apply_overrides(config, [override])
    # Where the cluster is and how long its actors may take to start do not change what a
    # run learns: a resumed run may change them.
    changes = {"backend_options": {"address": "auto", "num_cpus": 1.0, "startup_timeout": 5.0}}
    resumed = resume.check_resume_overrides(config, changes)
    assert resumed.backend_options == changes["backend_options"]

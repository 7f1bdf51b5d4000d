"""Envs shaped like the ecosystem's through ``batchppo train`` (issue 42): start-up mistakes
in one line with exit 2, and the recipes their spaces pick."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import ecosystem_envs
import numpy as np
import pytest
from crash_envs import train_argv

from batchppo import cli
from batchppo.experiment.artifacts.logging import read_metrics

HERE = Path(__file__).parent


@pytest.fixture
def ecosystem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``ecosystem_envs`` importable, the working directory a fresh one; yields a logdir."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "logs"


def train(capsys, logdir: Path, *argv: str) -> tuple[int, str]:
    code = cli.main(["train", "--logdir", str(logdir), "--progress", "none", *argv])
    return code, capsys.readouterr().err


def test_a_network_that_does_not_fit_the_spaces_is_one_line(capsys, ecosystem):
    """The cartpole preset's network on a MultiDiscrete action: exit 2, no run dir."""
    code, err = train(
        capsys, ecosystem, "--config", "cartpole", "--env", "ecosystem_envs:make_pick_many"
    )
    assert code == 2
    assert err == (
        "batchppo: error: env 'ecosystem_envs:make_pick_many': the config's network does not "
        "fit the env's spaces: network='feed_forward_categorical' needs a discrete action "
        "space; use feed_forward_gaussian or recurrent_gaussian for continuous actions, or "
        "feed_forward for MultiDiscrete([2, 3]); change it with --set KEY=VALUE (--debug "
        "shows the traceback)\n"
    )
    assert not ecosystem.exists() or list(ecosystem.iterdir()) == []


def test_a_failed_assertion_in_a_constructor_names_its_file_line_and_expression(capsys, ecosystem):
    code, err = train(capsys, ecosystem, "--env", "ecosystem_envs:make_asserting")
    lines = (HERE / "ecosystem_envs.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "assert model.nq == 3" in text)
    assert code == 2
    assert err == (
        "batchppo: error: env 'ecosystem_envs:make_asserting': its constructor raised "
        f"AssertionError at {HERE / 'ecosystem_envs.py'}:{line} (`assert model.nq == 3  # as "
        "gymnasium-robotics asserts on MuJoCo's model`); fix the env (or env_kwargs) (--debug "
        "shows the traceback)\n"
    )


def _sigterm_after_reports(
    argv: list[str], metrics: Path, reports: int, timeout: float, **popen
) -> tuple[int, str, str]:
    """Runs ``python -m batchppo *argv`` in a session of its own, sends SIGTERM to the whole
    process group once ``metrics`` holds ``reports`` train reports (as ``timeout`` does), and
    returns its exit status, stdout and stderr; SIGKILL leaves nothing behind either way."""
    process = subprocess.Popen(
        [sys.executable, "-m", "batchppo", *argv], text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True, **popen,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while not (metrics.exists() and metrics.read_text().count('"train"') >= reports):
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, out, err


@pytest.mark.timeout(180)
def test_a_group_sigterm_stops_a_run_of_a_pygame_env_with_its_checkpoint(tmp_path):
    """``timeout`` sends SIGTERM to the whole process group: the workers (whose env brought
    pygame and handlers of its own) and multiprocessing's fork server outlive it, and the
    run stops as on Pendulum: a checkpoint, the resume line, exit status 143."""
    argv = train_argv(tmp_path, "T", "ecosystem_envs:make_handler_env", "steps=10000000")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    metrics = tmp_path / "T-pendulum_fast" / "metrics.jsonl"
    code, out, err = _sigterm_after_reports(argv, metrics, 2, 120.0, cwd=HERE, env=env)
    assert code == 143, err
    assert "WorkerDiedError" not in err
    assert re.search(r"stopped at step [\d,]+; checkpoint saved at step", err), err
    assert out.startswith("resume with: batchppo train --config pendulum_fast ")


@pytest.mark.extended  # a learning test beyond the small tasks CI trains
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_minigrid_empty_learns_from_its_recipe_as_a_grid_of_codes(capsys, ecosystem):
    """MiniGrid-Empty-5x5 under ImgObsWrapper (7x7x3 uint8 ids): the grid-of-codes recipe
    reaches a mean-action return of 0.9 within 32,768 steps (seeds 0-2 at 100,000 steps:
    docs/benchmarks-journal.md, 12)."""
    pytest.importorskip("minigrid")
    env = "minigrid:MiniGrid-Empty-5x5-v0"
    wrappers = "env_wrappers=[minigrid.wrappers.ImgObsWrapper]"
    argv = ["--env", env, "--set", wrappers, "--set", "steps=32768"]
    argv += ["--set", "backend_options.num_workers=1"]
    code = cli.main(["train", "--logdir", str(ecosystem), "--progress", "none", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.splitlines()[:2] == [
        f"batchppo: no --config: {env} has a grid of codes (an integer image of ids, not "
        "pixels: each cell embedded), so the run starts from the cartpole_jax recipe with "
        "network=feed_forward (an encoder per observation leaf, a head per action leaf) "
        "(100,000 steps); the env declares no time limit (no max_episode_steps): "
        "max_length=500 bounds its episodes (--set max_length=N)",
        "batchppo: observations: the (7, 7, 3) uint8 image is a grid of codes (each cell's "
        "codes embedded, no CNN) (image_encoding=auto; --set image_encoding=pixels or codes "
        "decides)",
    ]
    score = float(re.search(r"eval score (-?[\d.]+)", out).group(1))
    assert score >= 0.9, out  # an episode of 5 steps scores 1 - 0.9 * 5 / 100 = 0.955


HIGHWAY = "highway_env:highway-fast-v0"


@pytest.mark.extended  # CI covers a group SIGTERM with the pygame env (below)
@pytest.mark.timeout(240)
def test_a_group_sigterm_stops_a_highway_env_run_with_its_checkpoint(tmp_path):
    """highway-env through its real package: its kinematics observation, a Box(5, 5) of
    floats, is a vector for the MLPs (the cartpole_jax recipe, in worker processes); it imports
    pygame in every worker, and a SIGTERM to the process group stops the run as on Pendulum
    (a checkpoint, the resume line, 143), no worker death reported."""
    import highway_env  # noqa: F401  (the test extra installs it; a missing package fails)

    argv = ["train", "--env", HIGHWAY, "--logdir", str(tmp_path), "--timestamp", "T"]
    # A train report after each iteration of 16 x 16 steps (highway's steps take about 10 ms).
    argv += ["--progress", "none", "--set", "backend_options.num_workers=2"]
    argv += ["--set", "rollout_length=16"]
    argv += ["--set", "log_every=256"]
    metrics = tmp_path / "T-highway-fast-v0" / "metrics.jsonl"
    code, out, err = _sigterm_after_reports(argv, metrics, 1, 180.0, cwd=tmp_path)
    assert code == 143, err
    assert err.splitlines()[0] == (
        f"batchppo: no --config: {HIGHWAY} has discrete actions (vector observations, Discrete "
        "actions), so the run starts from the cartpole_jax recipe (300,000 steps); the env "
        "declares no time limit (no max_episode_steps): max_length=500 bounds its episodes "
        "(--set max_length=N)"
    )
    assert "WorkerDiedError" not in err
    assert re.search(r"stopped at step [\d,]+; checkpoint saved at step", err), err
    assert out.startswith(f"resume with: batchppo train --env {HIGHWAY} ")


@pytest.mark.timeout(240)
@pytest.mark.usefixtures("cold_training_programs")  # its run is a few iterations
def test_an_action_mask_in_the_observation_keeps_every_action_legal(capsys, ecosystem):
    """``make_one_legal_move`` ends an episode at the first illegal action: with its
    ``action_mask`` leaf picked (``action_mask: auto``), every episode, sampled in training
    and with the mean action in evaluation, takes the 20 legal steps."""
    argv = ["--env", "ecosystem_envs:make_one_legal_move", "--set", "steps=1024"]
    code, err = train(capsys, ecosystem, *argv)
    assert code == 0, err
    assert (
        "batchppo: actions: the observation's ['action_mask'] leaf masks the disallowed ones "
        "(never taken; action_mask=auto; --set action_mask=none turns it off)"
    ) in err.splitlines()
    (run_dir,) = ecosystem.glob("*-make_one_legal_move")
    records = read_metrics(run_dir)
    train_scores = [r["score"] for r in records if r["phase"] == "train" and "score" in r]
    evals = [r["score"] for r in records if r["phase"] == "eval"]
    assert train_scores and set(train_scores) == {20.0}
    assert evals and set(evals) == {20.0}
    # The env does punish an illegal move: it ends the episode, with no reward.
    env = ecosystem_envs.make_one_legal_move()
    obs, _ = env.reset(seed=0)
    illegal = (int(np.argmax(obs["action_mask"])) + 1) % 4
    assert env.step(illegal)[1:4] == (0.0, True, False)

"""A new user's first half hour, at small sizes on a CPU: the commands as a user types them, in a
folder of their own, and what they see.

Each test is one stretch of that walk, whole in itself (pytest-xdist may run them in separate
processes): a fused run scored, evaluated and plotted; a MuJoCo run without upstream warnings;
and, as ``extended`` tests (not in ``pytest -q``), a run extended past its budget, an Atari
video of whole games and the batch env as Gymnasium's drop-in. An env class from the user's own
script, trained with and without a logdir, recorded, resumed and evaluated, is
tests/experiment/test_script_env.py's walk.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium
import matplotlib.pyplot as plt
import numpy as np
import pytest

from batchppo.envs import BatchEnv
from batchppo.experiment.analysis.plot import learning_curves
from batchppo.experiment.artifacts.eval_protocol import EvalProtocol
from batchppo.experiment.config import configs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BATCHPPO = str(Path(sys.executable).parent / "batchppo")


def _type(cwd: Path, *args: str, code: int = 0) -> tuple[str, str]:
    """Runs a command as a user types it in ``cwd``; returns its stdout and stderr."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=500)
    assert result.returncode == code, f"{args}: exit {result.returncode}\n{result.stderr[-3000:]}"
    return result.stdout, result.stderr


def _protocol(run_dir: Path) -> str:
    """How the run's config says its evaluations score a policy, in the words output uses."""
    config = configs.load_config(run_dir / "config.yaml")
    return str(EvalProtocol(config.eval_actions, config.eval_episodes))


def test_a_fused_run_names_its_protocol_evaluates_by_it_and_plots_it(tmp_path):
    train = [BATCHPPO, "train", "--config", "pendulum_jax", "--logdir", "logdir"]
    out, _ = _type(tmp_path, *train, "--timestamp", "T", "--set", "steps=4096")
    run = tmp_path / "logdir" / "T-pendulum_jax"
    protocol = _protocol(run)
    assert re.fullmatch(
        rf"done: 4,096 steps, eval score -?\d+\.\d\d \({protocol}\), run dir logdir/T-pendulum_jax",
        out.splitlines()[-1],
    ), out

    out, _ = _type(tmp_path, BATCHPPO, "evaluate", "logdir/T-pendulum_jax")
    config = configs.load_config(run / "config.yaml")
    words = "the mean action" if config.eval_actions == "mean" else "sampled actions"
    assert f"over {config.eval_episodes} episodes with {words} (the run's own protocol)" in out
    out, _ = _type(
        tmp_path, BATCHPPO, "evaluate", "logdir/T-pendulum_jax", "--sample", "--episodes", "3"
    )
    assert "over 3 episodes with sampled actions, mean length" in out, out

    out, _ = _type(tmp_path, BATCHPPO, "plot", "logdir/T-pendulum_jax", "--out", "curve.png")
    assert out.splitlines()[-1] == "wrote curve.png"
    figure = learning_curves([run], phases=["eval"])
    try:
        (axes,) = [ax for ax in figure.axes if ax.lines]
        (line,) = axes.lines
        assert line.get_label() == f"pendulum_jax: eval ({protocol}), 1 run"
        assert len(line.get_xdata()) == 2  # an evaluation every 2,048 steps and one at the end
    finally:
        plt.close(figure)

    # The preset anneals its rate to 0 over 4,096 steps: a larger budget is refused in one
    # line that names anneal_lr and the command that trains it.
    resume = [BATCHPPO, "train", "--logdir", "logdir", "--resume", "--timestamp", "T"]
    _, err = _type(tmp_path, *resume, "--set", "steps=8192", code=2)
    assert err.count("\n") == 1 and "anneal_lr" in err, err
    assert err.rstrip().endswith(
        "batchppo train --config pendulum_jax --logdir logdir --set steps=8192"
    ), err


# A second path: CI covers a run extended at its rate's floor from the command line (the same
# lines; a fake trainer) in test_cli.py's
# test_resume_by_timestamp_extends_a_run_whose_anneal_ends_above_0, and the extension's training
# in test_resume.py's
# test_an_extended_run_learns_what_it_learned_up_to_its_budget_then_holds_the_end_rate.
@pytest.mark.extended
def test_a_run_whose_rate_anneals_to_a_floor_extends_past_its_budget(tmp_path):
    # A rate that anneals to a floor above 0 holds it past the stored budget.
    train = [BATCHPPO, "train", "--config", "pendulum_jax", "--logdir", "logdir"]
    _type(tmp_path, *train, "--timestamp", "U", "--set", "steps=2048", "--set", "anneal_lr_end=0.1")
    resume = [BATCHPPO, "train", "--logdir", "logdir", "--resume", "--timestamp", "U"]
    out, _ = _type(tmp_path, *resume, "--set", "steps=4096")
    assert "and holds" in out.splitlines()[1] and "to steps=4,096" in out.splitlines()[1], out
    assert out.splitlines()[-1].startswith("done: 4,096 steps, eval score"), out
    stored = configs.load_config(tmp_path / "logdir" / "U-pendulum_jax" / "config.yaml")
    assert (stored.steps, stored.anneal_lr_steps) == (4096, 2048)


def test_a_mujoco_run_prints_no_upstream_warning_and_writes_nothing_beside_the_user(tmp_path):
    sets = ["steps=1024", "num_agents=2", "eval_every=0", "eval_episodes=1", "max_length=64"]
    out, err = _type(
        tmp_path, BATCHPPO, "train", "--config", "cheetah_fast", "--logdir", "logdir",
        *[word for s in sets for word in ("--set", s)], "--progress", "lines",
    )  # fmt: skip
    assert "warning" not in (out + err).lower(), out + err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["logdir"]
    assert out.splitlines()[0].startswith("start-up: set-up ")


@pytest.mark.extended
def test_an_atari_video_plays_whole_games_as_evaluate_does(tmp_path):
    # One iteration (2 envs x 128 steps, lives of about 24 steps each) of one epoch: the video
    # and the episode records are what this stretch shows, not what the CNN learns, and on a
    # CPU the update compiles its epochs unrolled (unroll_update).
    sets = ["steps=256", "num_agents=2", "eval_every=0", "eval_episodes=1", "update_epochs=1"]
    _type(
        tmp_path, BATCHPPO, "train", "--config", "breakout_atari", "--logdir", "logdir",
        "--timestamp", "A", *[word for s in sets for word in ("--set", s)],
    )  # fmt: skip
    run = tmp_path / "logdir" / "A-breakout_atari"
    out, _ = _type(tmp_path, BATCHPPO, "visualize", str(run), "--outdir", "videos")
    lengths = [int(n) for n in re.findall(r"^videos/episode-\d+\.mp4: .*length (\d+)$", out, re.M)]
    stats = json.loads((tmp_path / "videos" / "stats.json").read_text())
    assert lengths == stats["lengths"] and lengths, out
    # Training ends an episode at each lost life; a video is a whole game of five lives.
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    episodes = [record for record in records if "length" in record]  # not the game records
    assert episodes and all(e["terminated"] for e in episodes)
    lives = [e["length"] for e in episodes]
    assert min(lengths) > max(lives), (lengths, lives)


# A second path: CI covers the drop-in against Gymnasium's make_vec, over more envs and steps
# and with infos, in tests/envs/test_async_vector_env_dropin.py.
@pytest.mark.extended
@pytest.mark.parametrize(("env_id", "steps"), [("CartPole-v1", 120), ("Pendulum-v1", 420)])
def test_the_drop_in_steps_as_gymnasiums_make_vec(env_id, steps):
    """Same seeds, same actions, across episode ends: the same spaces, observations, rewards
    and done flags as Gymnasium's own async vector env."""
    theirs = gymnasium.make_vec(env_id, 2, vectorization_mode="async")
    ours = BatchEnv([lambda: gymnasium.make(env_id)] * 2)
    try:
        assert ours.single_observation_space == theirs.single_observation_space
        assert ours.single_action_space == theirs.single_action_space
        np.testing.assert_array_equal(ours.reset(seed=7)[0], theirs.reset(seed=7)[0])
        theirs.action_space.seed(3)
        ends = 0
        for _ in range(steps):
            action = theirs.action_space.sample()
            mine, expected = ours.step(action), theirs.step(action)
            for a, b in zip(mine[:4], expected[:4], strict=True):
                np.testing.assert_array_equal(a, np.asarray(b, dtype=np.asarray(a).dtype))
            ends += int(np.sum(expected[2] | expected[3]))
        assert ends >= 2  # the walk crossed episode ends, and so autoresets
    finally:
        ours.close()
        theirs.close()

"""episodes.jsonl: its records, its file, and a resumed run's file holding each episode once.

The runs train PPO over the mock envs (``batchppo.testing.MockEnv``), whose episodes do not
depend on the actions: env 0 ends every step, env 1 every 2 steps (truncated), env 2 every 3,
with returns 1, 3 and 6. Rollouts of 6 steps end every env's episode at each iteration's end,
so a run resumed at any iteration continues exactly the episodes of a run straight through.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import numpy as np
import pytest

from batchppo.algorithms.ppo import Trainer as PPOTrainer
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.training.episodes import EndedEpisodes
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts.episode_log import (
    EPISODES_FILE,
    EpisodeFile,
    episode_lines,
    read_episodes,
)
from batchppo.experiment.run import training
from batchppo.testing import MockEnv

DURATIONS, TERMINATE = (1, 2, 3), (True, False, True)
# 3 envs x 6 steps = 18 env steps an iteration, 10 iterations; a train report every 2
# iterations, a checkpoint every 3.
CONFIG = PPOConfig(
    env="Pendulum-v1", backend="gymnax", num_agents=3, rollout_length=6, steps=180,
    log_every=36, checkpoint_every=54, keep_checkpoints=10, eval_every=0, update_epochs=1,
    num_minibatches=1, policy_layers=(8,), value_layers=(8,),
)  # fmt: skip


def ended(steps, scores, end_step, games=()) -> EndedEpisodes:
    """Episodes of 1 step each, terminated."""
    n = len(steps)
    return EndedEpisodes(
        step=np.array(steps, np.int64), score=np.array(scores, np.float32),
        length=np.ones(n, np.int64), terminated=np.ones(n, bool), truncated=np.zeros(n, bool),
        end_step=end_step, games=np.array(games, np.float64),
    )  # fmt: skip


def test_lines_keep_each_float32_return_exactly_and_the_games_after_the_episodes():
    one = EndedEpisodes(
        step=np.array([3, 12]), score=np.array([-1234.5679, np.nan], np.float32),
        length=np.array([1, 2]), terminated=np.array([True, False]),
        truncated=np.array([False, True]), end_step=12, games=np.array([7.0]),
    )  # fmt: skip
    text = episode_lines(one)
    assert text.splitlines()[0] == (
        '{"step":3,"return":-1234.56787,"length":1,"terminated":true,"truncated":false}'
    )
    assert [json.loads(line) for line in text.splitlines()] == [
        {"step": 3, "return": -1234.56787, "length": 1, "terminated": True, "truncated": False},
        {"step": 12, "return": None, "length": 2, "terminated": False, "truncated": True},
        {"step": 12, "game_score": 7.0},
    ]
    # Nine digits read back as the very float32 the rollout summed, for any float32.
    returns = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 1e4
    many = dataclasses.replace(
        one, step=np.arange(1000), score=returns, length=np.ones(1000, np.int64),
        terminated=np.ones(1000, bool), truncated=np.zeros(1000, bool), games=np.zeros(0),
    )  # fmt: skip
    read = [json.loads(line)["return"] for line in episode_lines(many).splitlines()]
    np.testing.assert_array_equal(np.array(read, np.float32), returns)


def test_the_file_is_made_by_the_first_iteration_and_cut_back_on_resume(tmp_path):
    file = EpisodeFile(tmp_path, resume_step=None)
    assert file.enabled
    file.write([])  # a trainer that lists no episodes makes no file
    assert not (tmp_path / EPISODES_FILE).exists()
    file.write([ended([], [], 6)])  # one that lists them does, even before any ended
    file.write([ended([9, 12], [1.0, 2.0], 12)])
    file.write([ended([15, 18], [3.0, 4.0], 18, [5.0])])
    file.close()
    assert [r["step"] for r in read_episodes(tmp_path)] == [9, 12, 15, 18, 18]
    with (tmp_path / EPISODES_FILE).open("a") as f:
        f.write('{"step": 21, "ret')  # a torn last line: skipped
    resumed = EpisodeFile(tmp_path, resume_step=15)
    assert resumed.enabled
    resumed.close()
    assert [r["step"] for r in read_episodes(tmp_path)] == [9, 12, 15]


def test_a_run_resumed_without_a_file_predates_it_and_gets_none(tmp_path):
    predates = EpisodeFile(tmp_path, resume_step=300)
    predates.write([ended([303], [1.0], 306)])
    predates.close()
    assert not predates.enabled and not (tmp_path / EPISODES_FILE).exists()
    assert EpisodeFile(tmp_path, resume_step=0).enabled  # stopped before its first iteration
    assert not EpisodeFile(None, resume_step=None).enabled


def mock_trainer(config: PPOConfig) -> PPOTrainer:
    return PPOTrainer(config, env=MockEnv(DURATIONS, TERMINATE))


class StoppedTrainer(PPOTrainer):
    """The mock run's trainer, sent SIGTERM during its fifth iteration (at step 90: neither a
    report's nor a checkpoint's step)."""

    def __init__(self, config: PPOConfig) -> None:
        super().__init__(config, env=MockEnv(DURATIONS, TERMINATE))
        self.calls = 0

    def iteration(self, train_state, sim_state):
        self.calls += 1
        if self.calls == 5:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().iteration(train_state, sim_state)


def train(tmp_path, timestamp, factory=mock_trainer, progress="none"):
    return training.train(
        CONFIG, tmp_path, name="mock", timestamp=timestamp, progress=progress,
        trainer_factory=factory,
    )  # fmt: skip


def keep_checkpoints_to(run_dir, step: int) -> None:
    """Deletes the checkpoints after ``step``: as if the run had been killed after it."""
    for saved, path in ckpt.list_checkpoints(run_dir / "checkpoints"):
        if saved > step:
            path.unlink()


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("cold_training_programs")  # its runs are a few iterations each
def test_a_stopped_or_crashed_run_resumed_has_the_episodes_file_of_a_run_straight_through(
    tmp_path, capsys
):
    straight = train(tmp_path, "straight").run_dir / EPISODES_FILE
    text = straight.read_text()
    records = read_episodes(straight.parent)
    # Per iteration: env 0 ends 6 episodes, env 1 three, env 2 two.
    assert len(records) == 11 * 10
    assert records[:4] == [
        {"step": 3, "return": 1.0, "length": 1, "terminated": True, "truncated": False},
        {"step": 6, "return": 1.0, "length": 1, "terminated": True, "truncated": False},
        {"step": 6, "return": 3.0, "length": 2, "terminated": False, "truncated": True},
        {"step": 9, "return": 1.0, "length": 1, "terminated": True, "truncated": False},
    ]
    assert records[-1] == {
        "step": 180, "return": 6.0, "length": 3, "terminated": True, "truncated": False
    }  # fmt: skip

    # Stopped by SIGTERM at step 90: its last window's episodes are written before its report
    # and its checkpoint, and the resumed run continues from there.
    stopped = train(tmp_path, "stopped", factory=StoppedTrainer)
    assert stopped.interrupted and stopped.step == 90
    assert read_episodes(stopped.run_dir)[-1]["step"] == 90
    train(tmp_path, "stopped")
    assert (stopped.run_dir / EPISODES_FILE).read_text() == text

    # Killed after step 180's episodes but with no checkpoint after step 54: the resume drops
    # the episodes after step 54 and runs them again.
    crashed = train(tmp_path, "crashed").run_dir
    keep_checkpoints_to(crashed, 54)
    assert train(tmp_path, "crashed").step == 180
    assert (crashed / EPISODES_FILE).read_text() == text

    # A run dir from before episodes.jsonl, resumed, says so and gets none.
    (crashed / EPISODES_FILE).unlink()
    keep_checkpoints_to(crashed, 54)
    capsys.readouterr()
    train(tmp_path, "crashed", progress="lines")
    assert "has no episodes.jsonl (the run predates it, or its trainer" in capsys.readouterr().out
    assert not (crashed / EPISODES_FILE).exists()

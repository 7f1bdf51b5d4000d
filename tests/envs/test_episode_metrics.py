"""EpisodeInfoRecorder: per-episode info summaries of same-step vector envs, exact values."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from envs_testlib import WalkEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from batchppo.envs import BatchEnv, WorkerOptions
from batchppo.envs.episode_metrics import (
    TASK_METRICS,
    EpisodeInfoRecorder,
    GameScores,
    episode_task_metrics,
)


def walk_fns(n: int) -> list:
    return [lambda tag=tag: WalkEnv(tag) for tag in range(n)]


def expected_walk(tag: int, length: int | None = None) -> dict:
    """WalkEnv's summary of an episode of ``length`` steps (by default its whole episode)."""
    n = 3 + tag if length is None else length
    return {
        "x_position": {
            "mean": tag + 0.5 * (n + 1) / 2,
            "first": float(tag),
            "last": tag + 0.5 * n,
        },
        "x_velocity": {"mean": (n + 1) / 2, "first": float("nan"), "last": float(n)},
    }


def assert_summary(actual: dict, expected: dict) -> None:
    assert set(actual) == set(expected)  # "note" is text: no summary
    for key, values in expected.items():
        assert actual[key] == pytest.approx(values, nan_ok=True, abs=1e-12), key


@pytest.mark.parametrize("backend", ["gymnasium", "batchppo"])
def test_recorder_summarises_each_episode(backend):
    if backend == "gymnasium":
        env = SyncVectorEnv(walk_fns(2), autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        env = BatchEnv(walk_fns(2), WorkerOptions(num_workers=1), autoreset_mode="SameStep")
    recorder = EpisodeInfoRecorder(2)
    try:
        _, infos = env.reset(seed=0)
        recorder.reset(infos)
        for _ in range(7):  # env 0: episodes of 3 steps, 2 + 1 of 3; env 1: 4 steps, 1 + 3 of 4
            _, _, terminated, truncated, infos = env.step(np.zeros((2, 1), np.float32))
            recorder.step(infos, terminated, truncated)
    finally:
        env.close()
    assert len(recorder.episodes[0]) == 2 and len(recorder.episodes[1]) == 1
    for summary in [*recorder.episodes[0], *recorder.episodes[1]]:
        tag = 0 if summary["x_position"]["first"] == 0.0 else 1
        assert_summary(summary, expected_walk(tag))
    running = recorder.running()
    assert_summary(running[0], expected_walk(0, 1))
    assert_summary(running[1], expected_walk(1, 3))


def test_task_metrics_read_their_keys():
    assert [(m.name, m.key, m.reduce) for m in TASK_METRICS] == [
        ("forward_velocity", "x_velocity", "mean"),
        ("distance", "x_position", "delta"),
    ]
    assert episode_task_metrics(expected_walk(1)) == {"forward_velocity": 2.5, "distance": 2.0}
    # No reset value: no distance; no keys: no metrics.
    no_start = {"x_position": {"mean": 1.0, "first": float("nan"), "last": 2.0}}
    assert episode_task_metrics(no_start) == {}
    assert episode_task_metrics({}) == {}


def test_recorder_on_hopper_distance_is_the_x_position_difference():
    env = SyncVectorEnv(
        [lambda: gymnasium.make("Hopper-v5")] * 2, autoreset_mode=AutoresetMode.SAME_STEP
    )
    recorder = EpisodeInfoRecorder(2)
    positions: list[list[float]] = [[], []]  # each env's x at reset and after each step
    ended: list[list[float]] = [[], []]  # each ended episode's distance, by hand
    try:
        _, infos = env.reset(seed=3)
        recorder.reset(infos)
        for i in range(2):
            positions[i].append(float(infos["x_position"][i]))
        action = np.full((2, 3), 0.4, np.float32)
        action[1] = -0.4
        for _ in range(300):
            _, _, terminated, truncated, infos = env.step(action)
            recorder.step(infos, terminated, truncated)
            for i in range(2):
                if terminated[i] or truncated[i]:
                    last = float(infos["final_info"]["x_position"][i])
                    ended[i].append(last - positions[i][0])
                    positions[i] = [float(infos["x_position"][i])]
                else:
                    positions[i].append(float(infos["x_position"][i]))
    finally:
        env.close()
    assert sum(len(e) for e in ended) > 0  # a constant action falls within 300 steps
    for i in range(2):
        assert len(recorder.episodes[i]) == len(ended[i])
        for summary, distance in zip(recorder.episodes[i], ended[i], strict=True):
            assert {"x_position", "x_velocity", "reward_forward"} <= set(summary)
            assert episode_task_metrics(summary)["distance"] == distance
        running = episode_task_metrics(recorder.running()[i])
        assert running["distance"] == positions[i][-1] - positions[i][0]


def test_game_scores_are_kept_in_order_until_taken():
    games = GameScores()
    assert games.take().tolist() == []
    games.add([3.0, 1])
    games.add(np.array([[7.5]]))
    taken = games.take()
    assert taken.dtype == np.float64 and taken.tolist() == [3.0, 1.0, 7.5]
    assert games.take().tolist() == []

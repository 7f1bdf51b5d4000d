"""The shared Trainer over a counting agent: its life cycle, counts, evaluation and helpers.

The agent (``counting_agent.py``) learns nothing, so every number the trainer reports is
known exactly. CartPole (gymnax) pays a reward of 1 per step and, within the time limit of
5 steps used here, no episode falls: every episode is truncated at step 5 with a return of 5.
"""

from __future__ import annotations

import dataclasses
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from counting_agent import Counter, CountState

from batchppo.algorithms.run_config import RunConfig
from batchppo.algorithms.training.episodes import ENDED, EndedEpisodes
from batchppo.algorithms.training.trainer import (
    Trainer,
    episode_metrics,
    host_metrics,
    mean_where,
    strong,
)
from batchppo.backends.host_env import HostEnv
from batchppo.core import EpisodeStats, SimState
from batchppo.core.keys import host_key
from batchppo.experiment.artifacts.checkpoint import restore_checkpoint, save_checkpoint, to_host
from batchppo.testing import MockEnv, make_mock_vector_env

CONFIG = RunConfig(env="CartPole-v1", backend="gymnax", num_agents=3, max_length=5, steps=36)


def start(trainer: Trainer) -> tuple[CountState, SimState]:
    ts = trainer.init(host_key(0, 0))
    return ts, trainer.init_sim(ts, host_key(0, 1))


@pytest.mark.timeout(120)
def test_iterations_count_steps_updates_and_the_episodes_that_ended():
    trainer = Trainer(CONFIG, Counter)
    assert (trainer.steps_per_iteration, trainer.num_iterations, trainer.num_devices) == (12, 3, 1)
    assert trainer.env_restarts is None  # pure-JAX envs cannot restart
    ts, ss = start(trainer)
    ts, ss, first = trainer.iteration(ts, ss)
    # Steps 1-4 of episodes of 5: none ended; nan means, no env_restarts entry.
    assert first.keys() == {"reward_sum", "episodes", "score", "length", ENDED}
    assert first["reward_sum"] == 12.0 and first["episodes"] == 0.0
    assert np.isnan(first["score"]) and np.isnan(first["length"])
    assert len(first.pop(ENDED)) == 0
    ts, ss, more = trainer.iterations(ts, ss, 2)
    # Steps 5-8 and 9-12: each env's episode ends at step 5 and at step 10.
    assert [len(m.pop(ENDED)) for m in more] == [3, 3]
    assert more == [{"reward_sum": 12.0, "episodes": 3.0, "score": 5.0, "length": 5.0}] * 2
    assert (int(ts.step), int(ts.updates), float(ts.reward_sum)) == (36, 3, 36.0)
    assert [name for name in trainer.programs if name.startswith("iterations")] == [
        "iterations(1)",
        "iterations(2)",
    ]
    with pytest.raises(ValueError, match="iterations: n=0 must be >= 1"):
        trainer.iterations(ts, ss, 0)
    trainer.close()


@pytest.mark.timeout(120)
def test_one_scan_of_n_iterations_equals_n_single_iterations():
    states = []
    for scanned in (True, False):
        trainer = Trainer(CONFIG, Counter)
        ts, ss = start(trainer)
        if scanned:
            ts, ss, metrics = trainer.iterations(ts, ss, 3)
        else:
            metrics = []
            for _ in range(3):
                ts, ss, m = trainer.iteration(ts, ss)
                metrics.append(m)
        states.append((to_host(ts), to_host(ss), metrics))
        trainer.close()
    (ts_a, ss_a, m_a), (ts_b, ss_b, m_b) = states
    jax.tree.map(np.testing.assert_array_equal, (ts_a, ss_a), (ts_b, ss_b))
    np.testing.assert_equal(m_a, m_b)


@pytest.mark.timeout(120)
def test_iterations_donate_their_input_states():
    trainer = Trainer(CONFIG, Counter)
    ts, ss = start(trainer)
    new_ts, _, _ = trainer.iteration(ts, ss)
    assert ts.step.is_deleted() and ss.obs.is_deleted()
    assert not new_ts.step.is_deleted() and int(new_ts.step) == 12
    trainer.close()


@pytest.mark.timeout(120)
def test_over_host_envs_iterations_keep_the_train_state_and_count_env_restarts():
    # Gymnasium's CartPole stepped in this process: an env error mid-rollout must leave the
    # train state passed in valid, so only the sim state is donated.
    config = dataclasses.replace(CONFIG, backend="sync", backend_options={"max_restarts": 2})
    trainer = Trainer(config, Counter)
    ts, ss = start(trainer)
    new_ts, _, metrics = trainer.iteration(ts, ss)
    assert not ts.step.is_deleted() and int(ts.step) == 0
    assert ss.obs.is_deleted() and int(new_ts.step) == 12
    assert metrics["reward_sum"] == 12.0 and metrics["env_restarts"] == 0.0
    assert trainer.env_restarts == 0
    trainer.close()


@pytest.mark.timeout(120)
def test_a_checkpointed_state_restores_and_trains_on_exactly_as_the_original(tmp_path):
    trainer = Trainer(CONFIG, Counter)
    ts, ss = start(trainer)
    ts, ss, _ = trainer.iteration(ts, ss)
    path = save_checkpoint(tmp_path, ts, int(ts.step), meta={"note": "one iteration"})
    restored, meta = restore_checkpoint(path, trainer.init(host_key(0, 9)))
    assert meta["step"] == 12 and meta["note"] == "one iteration"
    jax.tree.map(np.testing.assert_array_equal, to_host(restored), to_host(ts))
    # Resumed runs start fresh episodes: both states continue from the same new sim state.
    results = []
    for state in (ts, restored):
        state, _, metrics = trainer.iteration(state, trainer.init_sim(state, host_key(0, 5)))
        results.append((to_host(state), metrics))
    jax.tree.map(np.testing.assert_array_equal, results[0][0], results[1][0])
    np.testing.assert_equal(results[1][1], results[0][1])  # nan equals nan here
    assert (results[1][1]["reward_sum"], results[1][1]["episodes"]) == (12.0, 0.0)
    assert int(results[1][0].step) == 24 and int(results[1][0].updates) == 2
    trainer.close()


@pytest.mark.timeout(120)
def test_precompile_compiles_the_eval_programs_after_the_training_iteration(monkeypatch):
    # The first iteration waits on its own compilation only. XLA's modules are named after
    # the functions compiled: the evaluator's are `start` and `more`.
    log = []
    compile_ = jax.stages.Lowered.compile

    def recorded(lowered, *args, **kwargs):
        name = re.search(r"module @jit_(\w+)", lowered.as_text()).group(1)
        log.append(f"{name} starts")
        compiled = compile_(lowered, *args, **kwargs)
        log.append(f"{name} ends")
        return compiled

    monkeypatch.setattr(jax.stages.Lowered, "compile", recorded)
    trainer = Trainer(CONFIG, Counter)
    trainer.precompile(iterations=(1,), eval_episodes=6)
    ts, ss = start(trainer)
    trainer.iteration(ts, ss)
    assert trainer.evaluate(ts, 6, host_key(0, 2))["score"] == 5.0  # two calls: start, more
    trainer.close()
    names = ("init", "_lambda", "iteration", "start", "more")  # `_lambda`: init_sim
    assert sorted(log) == sorted(f"{name} {when}" for name in names for when in ("starts", "ends"))
    first_eval = min(log.index("start starts"), log.index("more starts"))
    assert {"init ends", "_lambda ends", "iteration ends"} <= set(log[:first_eval])


@pytest.mark.timeout(120)
def test_evaluate_runs_the_deterministic_policy_in_an_eval_env_of_its_own():
    trainer = Trainer(CONFIG, Counter)
    ts, _ = start(trainer)
    assert trainer.eval_env is None
    ev = trainer.evaluate(ts, 4, host_key(0, 2))
    # 4 episodes over min(4, num_agents) = 3 envs: each env's first, then env 0's second.
    assert trainer.eval_env.num_envs == 3 and trainer.eval_env is not trainer.env
    assert ev["returns"].tolist() == [5.0] * 4 and ev["lengths"].tolist() == [5] * 4
    assert ev["terminated"].tolist() == [False] * 4 and ev["cut"] == 0
    assert (ev["score"], ev["length"]) == (5.0, 5.0)
    trainer.close()


@pytest.mark.timeout(120)
def test_policy_acts_deterministically_or_samples_from_the_configs_seed():
    trainer = Trainer(CONFIG, Counter)
    ts, _ = start(trainer)
    obs = np.zeros((64, 4), np.float32)
    mode = trainer.policy(ts)
    np.testing.assert_array_equal(mode(obs), np.zeros(64, np.int32))
    sampled = [trainer.policy(ts, deterministic=False) for _ in range(2)]
    first = sampled[0](obs)
    assert set(first.tolist()) == {0, 1}  # p is in [0.25, 0.75]: both actions among 64
    np.testing.assert_array_equal(sampled[1](obs), first)  # same seed, same draws
    assert not np.array_equal(sampled[0](obs), first)  # the key moves on between calls
    trainer.close()


@pytest.mark.timeout(120)
def test_close_closes_the_eval_env_and_drops_its_programs():
    trainer = Trainer(CONFIG, Counter)
    ts, _ = start(trainer)
    trainer.evaluate(ts, 3, host_key(0, 2))
    assert sorted(trainer.programs) == ["eval_start(3, 5)", "init", "init_sim", "learn"]
    trainer.close()
    assert trainer.eval_env is None
    assert sorted(trainer.programs) == ["init", "init_sim", "learn"]
    trainer.close()  # a second close is harmless


@pytest.mark.timeout(120)
def test_the_host_loop_is_there_where_the_config_asks_for_it():
    assert Trainer(CONFIG, Counter).host_loop is None  # fused: no loop
    host = dataclasses.replace(CONFIG, backend="sync")
    for host_loop in (False, True):
        trainer = Trainer(dataclasses.replace(host, host_loop=host_loop), Counter)
        assert (trainer.host_loop is not None) is host_loop
        if host_loop:
            assert trainer.host_loop.env is trainer.env
        trainer.close()


def test_host_loop_is_refused_for_pure_jax_backends():
    with pytest.raises(ValueError, match="host_loop=True drives host envs"):
        dataclasses.replace(CONFIG, host_loop=True)


def test_mean_where_and_episode_metrics_weigh_only_the_episodes_that_ended():
    x = jnp.asarray([1.0, 2.0, 3.0, 10.0])
    assert float(mean_where(x, jnp.asarray([1.0, 0.0, 1.0, 0.0]))) == 2.0
    assert np.isnan(float(mean_where(x, jnp.zeros(4))))
    stats = EpisodeStats(
        done=jnp.asarray([[True, False], [False, True]]),
        score=jnp.asarray([[4.0, 9.0], [9.0, 2.0]]),
        length=jnp.asarray([[7, 1], [1, 3]], jnp.int32),
        terminated=jnp.asarray([[False, False], [False, True]]),
        truncated=jnp.asarray([[True, False], [False, True]]),
    )
    metrics = host_metrics(jax.device_get(episode_metrics(stats)), None, end_step=10)
    ended = metrics.pop(ENDED)
    assert metrics == {"episodes": 2.0, "score": 3.0, "length": 5.0}
    # Two envs, two steps from step 6: env 0 ended at step 8, env 1 at step 10 (both ways).
    assert ended == EndedEpisodes(
        step=np.array([8, 10]), score=np.array([4.0, 2.0], np.float32), length=np.array([7, 3]),
        terminated=np.array([False, True]), truncated=np.array([True, True]), end_step=10,
    )  # fmt: skip


def test_strong_gives_weakly_typed_arrays_their_dtype_for_good():
    weak = jnp.asarray(1.0)  # a Python scalar: weakly typed
    assert weak.weak_type
    made = strong(weak)
    assert not made.weak_type and made.dtype == weak.dtype and float(made) == 1.0
    already = jnp.zeros(2, jnp.int32)
    assert strong(already) is already
    assert strong(3) == 3


def test_the_games_an_env_reports_are_the_last_iterations_of_a_call():
    from batchppo.algorithms.training.trainer import Trainer as CommonTrainer

    scores = [np.array([3.0, 5.0]), np.array([])]
    seen = []
    env = types.SimpleNamespace(
        reports_games=True, take_games=lambda state: seen.append(state) or scores.pop(0)
    )
    owner = types.SimpleNamespace(env=env, env_restarts=None)
    sim = types.SimpleNamespace(env_state="first")
    first = CommonTrainer._with_env_metrics(owner, [{"a": 1.0}, {"a": 2.0}], sim)
    assert first[0]["games"] == 0.0 and np.isnan(first[0]["game_score"])
    assert (first[1]["games"], first[1]["game_score"]) == (2.0, 4.0)
    sim = types.SimpleNamespace(env_state="second")
    (second,) = CommonTrainer._with_env_metrics(owner, [{"a": 3.0}], sim)
    assert second["games"] == 0.0 and np.isnan(second["game_score"])
    assert seen == ["first", "second"]  # the env state of the call's end
    silent = types.SimpleNamespace(env=object(), env_restarts=None)
    assert CommonTrainer._with_env_metrics(silent, [{"a": 1.0}], sim) == [{"a": 1.0}]
    # The games also go to the last iteration's ended episodes, at its end step.
    none = np.zeros(0)
    ended = EndedEpisodes(none, none, none, none, none, end_step=24)
    scores.append(np.array([7.0]))
    (third,) = CommonTrainer._with_env_metrics(owner, [{"a": 4.0, ENDED: ended}], sim)
    assert third[ENDED].games.tolist() == [7.0] and third[ENDED].end_step == 24


# Three envs of the mock: env 0 ends every step, env 1 every 2 steps (truncated), env 2 every 3;
# an episode of d steps returns 1 + ... + d. The counting agent's rollouts are 4 steps: each
# iteration is 12 env steps, and a vector step t of the run ends at env step 3 * (t + 1).
DURATIONS, TERMINATE = (1, 2, 3), (True, False, True)
ENDINGS = [
    # (env step, return, length, terminated) of each episode, by step, then env.
    [(3, 1, 1, True), (6, 1, 1, True), (6, 3, 2, False), (9, 1, 1, True), (9, 6, 3, True),
     (12, 1, 1, True), (12, 3, 2, False)],
    [(15, 1, 1, True), (18, 1, 1, True), (18, 3, 2, False), (18, 6, 3, True), (21, 1, 1, True),
     (24, 1, 1, True), (24, 3, 2, False)],
    [(27, 1, 1, True), (27, 6, 3, True), (30, 1, 1, True), (30, 3, 2, False), (33, 1, 1, True),
     (36, 1, 1, True), (36, 3, 2, False), (36, 6, 3, True)],
]  # fmt: skip


def mock_trainer(kind: str) -> Trainer:
    """The counting agent's trainer over the mock envs: pure JAX (``fused``), a host env
    stepped in the compiled iteration (``host``) or from a Python loop (``host_loop``)."""
    if kind == "fused":
        return Trainer(CONFIG, Counter, env=MockEnv(DURATIONS, TERMINATE, discrete=True))
    config = dataclasses.replace(CONFIG, backend="sync", host_loop=kind == "host_loop")
    env = HostEnv(make_mock_vector_env(DURATIONS, TERMINATE, discrete=True, num_actions=2))
    return Trainer(config, Counter, env=env)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fused", "host", "host_loop"])
def test_every_episode_that_ended_is_listed_with_its_step_return_length_and_ending(kind):
    trainer = mock_trainer(kind)
    ts, ss = start(trainer)
    ts, ss, first = trainer.iteration(ts, ss)
    ts, ss, more = trainer.iterations(ts, ss, 2)
    trainer.close()
    for metrics, endings in zip([first, *more], ENDINGS, strict=True):
        ended = metrics[ENDED]
        got = list(zip(ended.step.tolist(), ended.score.tolist(), ended.length.tolist(),
                       ended.terminated.tolist(), strict=True))  # fmt: skip
        assert got == endings
        assert ended.truncated.tolist() == [not t for *_, t in endings]
        assert ended.score.dtype == np.float32 and ended.games.size == 0
        assert metrics["episodes"] == len(endings)
    assert [m[ENDED].end_step for m in [first, *more]] == [12, 24, 36]

"""Evaluator: terminated flags and task metrics of eval episodes, aligned with their returns."""

from __future__ import annotations

import warnings

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from batchppo.algorithms.training.evaluation import Evaluator
from batchppo.algorithms.training.programs import Compiler
from batchppo.backends.host_env import HostEnv
from batchppo.core.simulation import init_sim_state


class Walk(gymnasium.Env):
    """Env ``tag``: x starts at ``10 * tag`` (reset info) and grows by ``tag + 1`` per step,
    ``x_velocity`` is the step's number; reward 1; ends after ``3 + tag`` steps, terminated
    for odd tags, truncated for even ones."""

    def __init__(self, tag: int):
        self.tag, self.t = tag, 0
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"x_position": 10.0 * self.tag}

    def step(self, action):
        self.t += 1
        end = self.t >= 3 + self.tag
        x = 10.0 * self.tag + (self.tag + 1) * self.t
        info = {"x_position": x, "x_velocity": float(self.t)}
        return np.ones(1, np.float32), 1.0, end and self.tag % 2, end and not self.tag % 2, info


def act(params, carry, obs, first, key):
    return jnp.zeros((obs.shape[0], 1)), {}, carry


def evaluator(max_steps: int) -> Evaluator:
    def make_env(n: int) -> HostEnv:
        fns = [lambda tag=tag: Walk(tag) for tag in range(n)]
        return HostEnv(SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP))

    return Evaluator(
        make_env=make_env,
        init_sim=lambda key, env: init_sim_state(env, (), key),
        act=act,
        max_envs=2,
        max_length=5,  # compiled calls of 5 steps: episodes span calls
        max_steps=max_steps,
        compiler=Compiler(),
    )


def test_evaluate_reports_terminated_and_each_episodes_infos():
    ev = evaluator(max_steps=100)
    try:
        result = ev.evaluate((), 5, np.zeros(2, np.uint32), task_metrics=True)
        plain = ev.evaluate((), 5, np.zeros(2, np.uint32))
    finally:
        ev.close()
    # Env 0 and env 1 in turn: 3-step truncated and 4-step terminated episodes.
    assert result["returns"].tolist() == [3.0, 4.0, 3.0, 4.0, 3.0]
    assert result["lengths"].tolist() == [3, 4, 3, 4, 3]
    assert result["terminated"].tolist() == [False, True, False, True, False]
    env0 = {
        "x_position": {"mean": 2.0, "first": 0.0, "last": 3.0},
        "x_velocity": {"mean": 2.0, "first": np.nan, "last": 3.0},
    }
    env1 = {
        "x_position": {"mean": 15.0, "first": 10.0, "last": 18.0},
        "x_velocity": {"mean": 2.5, "first": np.nan, "last": 4.0},
    }
    assert len(result["infos"]) == 5
    for info, expected in zip(result["infos"], [env0, env1] * 2 + [env0], strict=True):
        assert set(info) == set(expected)
        for key in expected:
            assert info[key] == pytest.approx(expected[key], nan_ok=True)
    # Without task metrics: the same episodes, no infos.
    assert "infos" not in plain
    assert plain["returns"].tolist() == result["returns"].tolist()
    assert plain["terminated"].tolist() == result["terminated"].tolist()


def test_cut_episodes_report_their_infos_so_far():
    ev = evaluator(max_steps=7)
    try:
        with pytest.warns(RuntimeWarning, match="2 of 5 eval episodes were cut"):
            result = ev.evaluate((), 5, np.zeros(2, np.uint32), task_metrics=True)
    finally:
        ev.close()
    # Env 0: 3, 3 and 1 step cut; env 1: 4 and 3 steps cut.
    assert result["lengths"].tolist() == [3, 4, 3, 3, 1]
    assert result["terminated"].tolist() == [False, True, False, False, False]
    assert result["cut"] == 2
    assert result["infos"][3]["x_position"] == pytest.approx(
        {"mean": 14.0, "first": 10.0, "last": 16.0}
    )
    assert result["infos"][4]["x_velocity"] == pytest.approx(
        {"mean": 1.0, "first": np.nan, "last": 1.0}, nan_ok=True
    )


@pytest.mark.parametrize(
    ("max_steps", "episodes", "programs", "lengths"),
    [
        (100, 2, ["eval_start(2, 5)"], [3, 4]),  # one episode an env: within the first call
        (5, 4, ["eval_start(2, 5)"], [3, 4, 2, 1]),  # the first call reaches max_steps
        (100, 4, ["eval_more(2, 5)", "eval_start(2, 5)"], [3, 4, 3, 4]),  # a second episode
    ],
)
def test_precompile_compiles_the_continuation_only_where_an_evaluation_calls_it(
    max_steps, episodes, programs, lengths
):
    """Calls of 5 steps, the time limit: the programs precompiled are the ones the evaluation
    runs (it compiles no other)."""
    ev = evaluator(max_steps)
    key = np.zeros(2, np.uint32)
    try:
        ev.precompile(episodes, (), key)
        precompiled = sorted(ev.programs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the cut episodes' warning
            result = ev.evaluate((), episodes, key)
        used = sorted(ev.programs)
    finally:
        ev.close()
    assert precompiled == used == programs
    assert result["lengths"].tolist() == lengths


class Echo(gymnasium.Env):
    """Rewards the action it is given; episodes of 3 steps (truncated)."""

    def __init__(self):
        self.t = 0
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), float(action[0]), False, self.t >= 3, {}


def noisy_act(params, carry, obs, first, key):
    return jax.random.normal(key, (obs.shape[0], 1)), {}, carry


def test_sampled_evaluation_acts_with_the_sampling_policy_from_the_key():
    def make_env(n: int) -> HostEnv:
        return HostEnv(SyncVectorEnv([Echo] * n, autoreset_mode=AutoresetMode.SAME_STEP))

    ev = Evaluator(
        make_env=make_env, init_sim=lambda key, env: init_sim_state(env, (), key), act=act,
        sample_act=noisy_act, max_envs=2, max_length=3, max_steps=100, compiler=Compiler(),
    )  # fmt: skip
    key, other = np.zeros(2, np.uint32), np.array([0, 1], np.uint32)
    try:
        mean = ev.evaluate((), 4, key)
        sampled = ev.evaluate((), 4, key, sample=True)
        again = ev.evaluate((), 4, key, sample=True)
        elsewhere = ev.evaluate((), 4, other, sample=True)
        names = sorted(ev.programs)
    finally:
        ev.close()
    assert mean["returns"].tolist() == [0.0] * 4  # the mean action: zero reward
    assert np.all(sampled["returns"] != 0.0) and len(set(sampled["returns"].tolist())) == 4
    assert again["returns"].tolist() == sampled["returns"].tolist()  # the key decides
    assert elsewhere["returns"].tolist() != sampled["returns"].tolist()
    assert names == ["eval_more(2, 3)", "eval_more_sampled(2, 3)", "eval_start(2, 3)",
                     "eval_start_sampled(2, 3)"]  # fmt: skip


def test_sampled_evaluation_needs_a_sampling_policy():
    ev = evaluator(max_steps=100)
    try:
        with pytest.raises(ValueError, match="sampled actions need the evaluator's sample_act"):
            ev.evaluate((), 2, np.zeros(2, np.uint32), sample=True)
    finally:
        ev.close()

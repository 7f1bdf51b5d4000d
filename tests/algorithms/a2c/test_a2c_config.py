"""A2CConfig: SB3's defaults, one-line validation, the run-level fields of RunConfig."""

import dataclasses

import pytest

from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.a2c.presets import PRESETS
from batchppo.algorithms.run_config import RunConfig


def test_defaults_are_sb3s_a2c():
    config = A2CConfig()
    assert (config.rollout_length, config.learning_rate, config.optimizer) == (5, 7e-4, "rmsprop")
    assert (config.value_coef, config.max_grad_norm, config.gae_lambda) == (0.5, 0.5, 1.0)
    assert config.entropy_coef == 0.0 and not config.normalize_advantages
    assert isinstance(config, RunConfig) and config.eval_interval == config.steps // 20


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"optimizer": "sgd"}, "optimizer='sgd': choose one of ('rmsprop', 'adam')"),
        ({"network": "recurrent_gaussian"}, "network='recurrent_gaussian': choose one of"),
        ({"rollout_length": 0}, "rollout_length=0: must be >= 1"),
        ({"reward_factor": 0.0}, "reward_factor=0.0: must be > 0"),
        ({"num_agents": 0}, "num_agents=0: must be >= 1"),  # a run-level check
    ],
)
def test_bad_values_are_one_line_errors(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        A2CConfig(**changes)


def test_raising_steps_on_resume_depends_on_the_learning_rate_schedule():
    assert not A2CConfig().schedule_spans_steps
    assert A2CConfig(anneal_lr=True).schedule_spans_steps


def test_presets():
    assert set(PRESETS) == {"cartpole_a2c", "pendulum_a2c"}
    assert all(type(c) is A2CConfig and c.backend == "gymnax" for c in PRESETS.values())
    assert PRESETS["cartpole_a2c"].network == "feed_forward_categorical"
    assert dataclasses.replace(PRESETS["pendulum_a2c"], steps=10).steps == 10

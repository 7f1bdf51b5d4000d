"""Learning tests (CPU, a few minutes in total): CartPole and Pendulum with the fused gymnax
driver, Pendulum with Gymnasium envs in worker processes."""

import dataclasses

import jax
import pytest

from batchppo.algorithms.ppo import PPOConfig, Trainer

CARTPOLE = PPOConfig(
    env="CartPole-v1",
    backend="gymnax",
    network="feed_forward_categorical",
    normalize_ranges=False,
    max_length=500,
    num_agents=16,
    rollout_length=64,
    update_epochs=4,
    num_minibatches=4,
    objective="clip",
    learning_rate=1e-3,
    max_grad_norm=0.5,
    discount=0.99,
    gae_lambda=0.95,
    policy_layers=(64, 64),
    value_layers=(64, 64),
    activation="tanh",
    init_mean_factor=0.01,
    steps=300_000,
)

PENDULUM = PPOConfig(
    env="Pendulum-v1",
    backend="gymnax",
    max_length=200,
    num_agents=64,
    rollout_length=32,
    update_epochs=10,
    num_minibatches=4,
    objective="clip",
    learning_rate=1e-3,
    max_grad_norm=0.5,
    discount=0.9,
    gae_lambda=0.95,
    policy_layers=(64, 64),
    value_layers=(64, 64),
    activation="tanh",
    init_std=1.0,
    steps=300_000,
)


def _train_until(config: PPOConfig, target: float, eval_every: int, episodes: int = 10) -> list:
    """Trains, evaluating the mean action every ``eval_every`` steps; stops at ``target``."""
    trainer = Trainer(config)
    try:
        ts = trainer.init(jax.random.key(config.seed))
        ss = trainer.init_sim(ts, jax.random.key(config.seed + 1))
        n = max(1, eval_every // trainer.steps_per_iteration)
        history = [trainer.evaluate(ts, episodes, jax.random.key(99))["score"]]
        while int(ts.step) < config.steps and history[-1] < target:
            ts, ss, _ = trainer.iterations(ts, ss, n)
            history.append(trainer.evaluate(ts, episodes, jax.random.key(int(ts.step)))["score"])
        return history
    finally:
        trainer.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_gymnax_cartpole_reaches_475():
    history = _train_until(CARTPOLE, 475.0, eval_every=16_384)
    assert history[-1] >= 475.0, history


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_gymnax_pendulum_reaches_minus_250():
    history = _train_until(PENDULUM, -250.0, eval_every=8_192)
    assert history[-1] >= -250.0, history


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_gymnasium_pendulum_in_processes_improves():
    config = dataclasses.replace(
        PENDULUM, backend="process", num_agents=8, rollout_length=128, num_workers=2, steps=40_960
    )
    history = _train_until(config, -250.0, eval_every=10_240, episodes=8)
    # Untrained policies score about -1200 on Pendulum; demand a clear improvement.
    assert history[-1] >= history[0] + 300.0, history

"""Learning tests (CPU, a few minutes in total): CartPole and Pendulum with the fused gymnax
driver, Pendulum and HalfCheetah with Gymnasium envs in worker processes."""

import dataclasses

import jax
import pytest

from batchppo.algorithms.ppo import PPOConfig, Trainer
from batchppo.experiment.configs import get_preset

# The shipped presets: these tests guard what `batchppo train --config NAME` runs.
CARTPOLE = get_preset("cartpole_jax")
PENDULUM = get_preset("pendulum_jax")


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
        get_preset("pendulum_fast"), num_agents=8, rollout_length=128, num_workers=2, steps=40_960
    )
    history = _train_until(config, -250.0, eval_every=10_240, episodes=8)
    # Untrained policies score about -1200 on Pendulum; demand a clear improvement.
    assert history[-1] >= history[0] + 300.0, history


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cheetah_fast_learns_halfcheetah_in_150k_steps():
    # The shipped MuJoCo preset cut to 75 iterations (the learning rate anneals over the cut
    # budget). Untrained policies score about -300 and CleanRL's PPO about 1450 after 1M steps;
    # seeds 0-4 end at 1498, 2599, 1201, 2048 and 1439 here (docs/benchmarks.md).
    config = dataclasses.replace(get_preset("cheetah_fast"), steps=153_600, num_workers=2)
    history = _train_until(config, float("inf"), eval_every=config.steps, episodes=8)
    assert history[-1] >= 1000.0, history

"""The A2C presets: gymnax CartPole and Pendulum, env and learner in one compiled program."""

from __future__ import annotations

from batchppo.algorithms.a2c.config import A2CConfig

PRESETS: dict[str, A2CConfig] = {
    # SB3's A2C on CartPole (rl-zoo: 8 envs x 5 steps, RMSprop 7e-4, entropy 0) with 16 envs.
    "cartpole_a2c": A2CConfig(
        env="CartPole-v1",
        backend="gymnax",
        max_length=500,
        normalize_ranges=False,
        network="feed_forward_categorical",
        num_agents=16,
        rollout_length=5,
        steps=300_000,
        eval_episodes=16,
    ),
    # rl-zoo's Pendulum A2C settings without gSDE: 8-step rollouts, GAE 0.9, normalised
    # observations, rewards scaled down by 10.
    "pendulum_a2c": A2CConfig(
        env="Pendulum-v1",
        backend="gymnax",
        max_length=200,
        num_agents=16,
        rollout_length=8,
        gae_lambda=0.9,
        discount=0.9,
        normalize_observations=True,
        reward_factor=0.1,
        anneal_lr=True,
        steps=1_000_000,
        eval_episodes=16,
    ),
}

"""The PPO presets: ``PRESETS``, by name (``batchppo list`` shows them all).

The tasks of the original Batch PPO keep its hyperparameters (see the fact sheet of the
original); the ``*_jax`` presets run gymnax envs fused with the learner and are tuned for
speed; the ``*_brax`` presets need the optional ``brax`` package.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from batchppo.algorithms.ppo.config import PPOConfig

_BASE = PPOConfig()

# The minibatch permutations of batchppo before `minibatch_shuffle` existed (it then became
# `index` by default; PPOConfig.FIELDS_ADDED). A preset whose published figures were measured
# with them keeps them, so that the preset as it ships is the recipe behind its figures; it
# moves to `index` when its figures are rerun with it. tests/bench/test_results.py checks every
# preset behind a README table against its runs' configs. The Pendulum and CartPole presets keep
# `index`: their recipes were measured with both on ten seeds and learn alike; the Brax presets'
# figures (speed) were measured with `index`.
_SORT: dict[str, Any] = dict(minibatch_shuffle="sort")


def _preset(**changes: Any) -> PPOConfig:
    return dataclasses.replace(_BASE, **changes)


def _mujoco(env: str, steps: int, **changes: Any) -> PPOConfig:
    # The original's MuJoCo tasks: 1000-step episodes, its defaults otherwise; their published
    # figures were measured with the sort permutations (_SORT).
    return _preset(**_SORT, env=env, max_length=1000, steps=steps, **changes)


def _brax(env: str, steps: int, **changes: Any) -> PPOConfig:
    # Massively parallel on-device simulation: thousands of envs, short rollouts, clipped PPO.
    return _preset(
        env=env,
        backend="brax",
        max_length=1000,
        num_agents=2048,
        rollout_length=16,
        update_epochs=4,
        num_minibatches=32,
        objective="clip",
        learning_rate=3e-4,
        max_grad_norm=1.0,
        discount=0.97,
        gae_lambda=0.95,
        entropy_coef=1e-3,
        policy_layers=(128, 128, 128, 128),
        value_layers=(256, 256, 256, 256, 256),
        activation="tanh",
        init_std=1.0,
        init_mean_factor=0.01,
        steps=steps,
        eval_episodes=128,
        **changes,
    )


# What the modern (clipped) presets share: small tanh networks, GAE 0.95, gradient clipping.
_CLIP: dict[str, Any] = dict(
    objective="clip",
    max_grad_norm=0.5,
    gae_lambda=0.95,
    policy_layers=(64, 64),
    value_layers=(64, 64),
    activation="tanh",
)

# Clipped PPO tuned for Pendulum: 64 envs x 32 steps, 10 epochs x 16 minibatches of 128, lr 1e-3
# annealed to 0 over the budget. An update stops early once a minibatch's KL passes 1.5 x 0.02:
# without that, the policy's std shrinks until each update moves it by a KL far above the
# target and the evals swing widely, the more the longer the budget. Rewards are scaled by the
# spread of the discounted return.
_PENDULUM_CLIP = _preset(
    **_CLIP,
    env="Pendulum-v1",
    backend="gymnax",
    max_length=200,
    num_agents=64,
    rollout_length=32,
    update_epochs=10,
    num_minibatches=16,
    learning_rate=1e-3,
    anneal_lr=True,
    target_kl=0.02,
    reward_scale="return",
    discount=0.9,
    init_std=1.0,
    steps=100_000,
    eval_episodes=16,
)


# Clipped PPO for the MuJoCo locomotion tasks at a 1M-step budget: the settings of Tianshou's
# MuJoCo PPO benchmark (many small updates per sample: 10 epochs of minibatches of 64 over each
# 2048-step batch; 64x64 tanh networks; initial std 0.6; value loss weight 0.25), over 16 envs
# in worker processes. Rewards are scaled by the spread of the
# discounted return, which keeps value targets near unit scale; the learning rate anneals over
# the budget. Their published figures were measured with the sort permutations (_SORT).
_LOCOMOTION: dict[str, Any] = dict(
    _CLIP,
    **_SORT,
    max_length=1000,
    steps=1_000_000,
    num_agents=16,
    rollout_length=128,
    update_epochs=10,
    num_minibatches=32,
    learning_rate=3e-4,
    anneal_lr=True,
    # The schedule anneals over the budget, so a larger budget keeps the learning rate high
    # for longer; the cap keeps each update's KL where the 1M-step runs have it.
    lr_kl_cap=0.03,
    discount=0.99,
    init_std=0.6,
    reward_scale="return",
    value_coef=0.25,
    # Tianshou's evaluation protocol (10 episodes with sampled actions every 30k steps), so
    # that the maximum over training of the mean over seeds is its published statistic. It
    # changes only the periodic evaluations, never what a run learns.
    eval_every=30_000,
    eval_episodes=10,
    eval_actions="sampled",
)


def _locomotion(env: str, **changes: Any) -> PPOConfig:
    return _preset(**{**_LOCOMOTION, "env": env, **changes})


# Recomputing GAE before each epoch under the value network the earlier epochs trained gives
# the later epochs better advantage estimates, for one value pass over the batch per epoch; on
# tuning seeds 0-9 it raised the IQM, the mean and the weakest seed of HalfCheetah, Hopper and
# Walker2d (docs/results/*_fast-recompute-vs-before-stats.json). Humanoid does without it: on
# its tuning seeds it left as many below 70 % of the target (docs/failure-modes.md). Ant keeps
# the recipe its ten seeds were measured with until they are run with it.
_RECOMPUTE: dict[str, Any] = dict(recompute_advantages=True)

_LOCOMOTION_PRESETS: dict[str, PPOConfig] = {
    # Initial std 0.3 (Andrychowicz et al. 2021 recommend a low one): on tuning seeds 0-9 it
    # lifted the weakest seed above 70 % of the target and raised the IQM
    # (docs/results/cheetah_fast-std03-1M-seeds0-9.json). LayerNorm lowered HalfCheetah
    # (docs/results/cheetah_fast-ln-1M-seeds0-9.json).
    "cheetah_fast": _locomotion("HalfCheetah-v5", **_RECOMPUTE, init_std=0.3),
    # LayerNorm in both networks' hidden layers (Tanaka and Mahmood 2026 report it narrows
    # PPO's spread): on tuning seeds 0-9 no seed fell below 70 % of the target (some did
    # without it) and the IQM rose (docs/results/hopper_fast-ln-1M-seeds0-9.json).
    "hopper_fast": _locomotion("Hopper-v5", **_RECOMPUTE, mlp="layernorm"),
    "walker_fast": _locomotion("Walker2d-v5", **_RECOMPUTE),
    # Ant-v5 observes 78 contact-force terms by default; Ant-v4 did not, and under MuJoCo >= 2
    # the v2/v3 ones were all zero (openai/gym#1541), so the peers' Ant figures were learned
    # without them. Without them Ant learns faster: with them most seeds stalled early, falling
    # often, with a large share of each update's samples clipped.
    "ant_fast": _locomotion("Ant-v5", env_kwargs={"include_cfrc_ext_in_observation": False}),
    # Adam's two moment averages decaying alike (Dohare et al. 2023 trace PPO's collapses on
    # MuJoCo to their unequal decays): on tuning seeds 0-9 three walked that did not, and the
    # IQM rose (docs/results/humanoid_fast-adam99-1M-seeds0-9.json); fresh seeds 30-39 still
    # miss the targets (docs/failure-modes.md).
    "humanoid_fast": _locomotion("Humanoid-v5", adam_b1=0.99, adam_b2=0.99),
    "reacher_fast": _locomotion("Reacher-v5", max_length=50),
}


# Clipped PPO on gymnax's MinAtar games (10x10xC 0/1 grids, fused with the learner): the
# MinAtar paper's network (one 3x3 conv of 16 channels, a dense layer of 128) shared by policy
# and value, then one tanh layer of 64 each; PureJaxRL's / Pgx's MinAtar PPO settings otherwise
# (gamma 0.99, GAE 0.95, clip 0.2, entropy 0.01, 4 epochs, 128-step rollouts), over 128 envs.
# The learning rate starts at 2e-3 and anneals to 0: at 5e-4 Breakout's paddle learns to stay
# near the centre and the score plateaus for millions of steps (a discount of 0.999 or
# separate torsos do not move it), while 1e-3 to 3e-3 leave that plateau early
# (docs/learning-minatar-breakout-lr.png).
# The grid stays 0/1 (no range normalisation); rewards are unscaled. Their published figures
# were measured with the sort permutations (_SORT).
_MINATAR: dict[str, Any] = dict(
    _CLIP,
    **_SORT,
    backend="gymnax",
    max_length=None,
    normalize_ranges=False,
    network="feed_forward",
    cnn="minatar",
    cnn_dense=128,
    shared_torso=True,
    policy_layers=(64,),
    value_layers=(64,),
    num_agents=128,
    rollout_length=128,
    update_epochs=4,
    num_minibatches=8,
    learning_rate=2e-3,
    anneal_lr=True,
    discount=0.99,
    entropy_coef=0.01,
    init_mean_factor=0.01,
    normalize_rewards=False,
    steps=10_000_000,
    eval_episodes=32,
)


def _minatar(game: str, **changes: Any) -> PPOConfig:
    return _preset(**{**_MINATAR, "env": f"{game}-MinAtar", **changes})


# CleanRL's PPO Atari settings (ppo_atari.py; Huang et al. 2022, "The 37 implementation
# details of PPO"): 8 envs x 128 steps, 4 epochs of 4 minibatches, clip 0.1 (value clip too),
# lr 2.5e-4 annealed, entropy 0.01, the Nature CNN shared by policy and value with linear heads.
# Training sees the standard preprocessing (lives as episodes, clipped rewards:
# envs/stack/atari.py); evaluations play whole games with raw rewards (preprocess atari_game), the
# score papers report. steps counts agent steps (4 frames each), as CleanRL's total_timesteps does.
# The published Breakout and Pong figures were measured with the sort permutations (_SORT).
_ATARI: dict[str, Any] = dict(
    _CLIP,
    **_SORT,
    backend="process",
    max_length=None,
    normalize_ranges=False,
    env_kwargs={"preprocess": "atari"},
    eval_env_kwargs={"preprocess": "atari_game"},
    network="feed_forward",
    cnn="nature",
    shared_torso=True,
    policy_layers=(),
    value_layers=(),
    num_agents=8,
    rollout_length=128,
    update_epochs=4,
    num_minibatches=4,
    clip_epsilon=0.1,
    value_clip=0.1,
    learning_rate=2.5e-4,
    anneal_lr=True,
    discount=0.99,
    entropy_coef=0.01,
    value_coef=0.5,
    init_mean_factor=0.01,
    normalize_observations=False,
    normalize_rewards=False,
    steps=10_000_000,
    eval_episodes=8,
)


def _atari(game: str, **changes: Any) -> PPOConfig:
    return _preset(**{**_ATARI, "env": f"ALE/{game}-v5", **changes})


# Craftax-Classic with symbolic observations (Matthews et al. 2024), at the settings of the
# Craftax baselines' ppo.py (github.com/MichaelTMatthews/Craftax_Baselines, its defaults):
# 1024 envs x 64 steps, 4 epochs of 8 minibatches, lr 2e-4 annealed, GAE 0.8, clip 0.2 (value
# clip too), entropy 0.01, separate 3x512 tanh MLPs, and its optimistic resets (16 envs per
# fresh world: drawing a world costs more than a step). Craftax ends an episode at its own
# 10,000-step limit as a termination, which batchppo cannot tell from a death. Its README
# figures (return and speed) were measured with the sort permutations (_SORT).
_CRAFTAX: dict[str, Any] = dict(
    _CLIP,
    **_SORT,
    env="craftax.craftax_env:make_craftax_env_from_name",
    backend="gymnax",
    env_kwargs={"name": "Craftax-Classic-Symbolic-v1", "auto_reset": False},
    backend_options={"autoreset": "optimistic", "reset_ratio": 16},
    max_length=10_000,
    normalize_ranges=False,
    network="feed_forward_categorical",
    num_agents=1024,
    rollout_length=64,
    update_epochs=4,
    num_minibatches=8,
    learning_rate=2e-4,
    anneal_lr=True,
    discount=0.99,
    gae_lambda=0.8,
    clip_epsilon=0.2,
    value_clip=0.2,
    entropy_coef=0.01,
    value_coef=0.5,
    max_grad_norm=1.0,
    policy_layers=(512, 512, 512),
    value_layers=(512, 512, 512),
    init_mean_factor=0.01,
    normalize_observations=False,
    normalize_rewards=False,
    steps=1_000_000_000,
    eval_episodes=16,
)

PRESETS: dict[str, PPOConfig] = {
    # --- Pure JAX (gymnax): env and learner in one compiled program. ------------------------
    "pendulum_jax": _PENDULUM_CLIP,
    "cartpole_jax": _preset(
        **_CLIP,
        env="CartPole-v1",
        backend="gymnax",
        max_length=500,
        normalize_ranges=False,
        network="feed_forward_categorical",
        num_agents=16,
        rollout_length=64,
        update_epochs=4,
        num_minibatches=4,
        learning_rate=1e-3,
        discount=0.99,
        # Without an entropy bonus some seeds settle on policies that balance far short of
        # the 500-step limit and stay there; with 0.01 (CleanRL's and PureJaxRL's) the seeds
        # tried all reach CartPole's solved return of 475 within the budget.
        entropy_coef=0.01,
        init_mean_factor=0.01,
        steps=300_000,
        eval_episodes=16,
    ),
    "breakout_minatar": _minatar("Breakout"),
    "asterix_minatar": _minatar("Asterix"),
    "freeway_minatar": _minatar("Freeway"),
    "space_invaders_minatar": _minatar("SpaceInvaders"),
    # Needs the craftax package, installed with `pip install craftax --no-deps`: it requires
    # pygame, which clashes with the pygame-ce that minigrid and highway-env install.
    "craftax_symbolic": _preset(**_CRAFTAX),
    # --- Atari (ALE envs in worker processes, uint8 frames in shared memory). ---------------
    "breakout_atari": _atari("Breakout"),
    "pong_atari": _atari("Pong"),
    # --- The original's tasks (Gymnasium envs in worker processes). -------------------------
    # batch_size 20 sequences of chunk_length 50 out of 30 episodes x 200 steps: 6 minibatches.
    "pendulum": _preset(
        env="Pendulum-v1", max_length=200, steps=1_000_000, chunk_length=50, num_minibatches=6
    ),
    "cartpole": _preset(
        env="CartPole-v1",
        max_length=500,
        steps=200_000,
        network="feed_forward_categorical",
        normalize_ranges=False,
    ),
    # --- Clipped PPO on Gymnasium envs in processes: the fastest host presets. ---------------
    "pendulum_fast": dataclasses.replace(_PENDULUM_CLIP, backend="process"),
    **_LOCOMOTION_PRESETS,
    "reacher": _mujoco("Reacher-v5", 5_000_000, discount=0.985, update_every=60),
    "cheetah": _mujoco("HalfCheetah-v5", 10_000_000, discount=0.99),
    "walker": _mujoco("Walker2d-v5", 10_000_000),
    "hopper": _mujoco("Hopper-v5", 10_000_000, update_every=60),
    "ant": _mujoco("Ant-v5", 20_000_000),
    "humanoid": _mujoco("Humanoid-v5", 50_000_000, update_every=60),
    # --- Brax (optional extra): locomotion simulated on the accelerator. --------------------
    "ant_brax": _brax("ant", 50_000_000),
    "cheetah_brax": _brax("halfcheetah", 50_000_000),
    "humanoid_brax": _brax("humanoid", 50_000_000),
}

"""Per-member hyperparameters in PPO's training state (``batchppo.algorithms.ppo.hparams``):
members that differ in them train in one vmapped program, each computing what a run of its
own config computes.

The members share one seed, so that their values alone set them apart: a program that ignored
the values would train equal members, and one that swapped them would match the wrong
runs. The tolerance (``RTOL``, ``ATOL``) covers float rounding only: a member's values are traced
float32 arrays where a run's are constants folded in double precision, and the vmapped program
is compiled on its own.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from cold_programs import cold_jit

from batchppo.algorithms.ppo import PPOConfig
from batchppo.algorithms.ppo.hparams import MEMBER_FIELDS, HParams, Members
from batchppo.algorithms.ppo.ppo import PPO
from batchppo.algorithms.training.episodes import ENDED
from batchppo.algorithms.training.stacked_seeds import stack, unstack
from batchppo.algorithms.training.trainer import make_run_env
from batchppo.core.keys import host_key
from batchppo.experiment.artifacts import checkpoint as ckpt

RTOL, ATOL = 1e-4, 1e-5

BASE = PPOConfig(
    env="Pendulum-v1",
    backend="gymnax",
    num_agents=4,
    rollout_length=8,
    update_epochs=2,
    num_minibatches=2,
    policy_layers=(8,),
    value_layers=(8,),
    steps=96,
    max_length=200,
    anneal_lr=True,
    reward_scale="return",
)

CLIP = dataclasses.replace(BASE, objective="clip", max_grad_norm=0.5, target_kl=1.0)
CLIP_VALUES = {
    "learning_rate": (1e-3, 1e-2),
    "anneal_lr_end": (0.0, 0.5),
    "clip_epsilon": (0.1, 0.3),
    "discount": (0.9, 0.99),
    "gae_lambda": (0.8, 1.0),
    "entropy_coef": (0.0, 0.05),
    "value_coef": (0.25, 1.0),
    "max_grad_norm": (0.3, 2.0),
    "target_kl": (1.0, 0.002),
    "adam_b1": (0.9, 0.8),
    "adam_b2": (0.999, 0.99),
}
KL = dataclasses.replace(BASE, objective="kl_penalty", lr_kl_cap=0.05, value_clip=0.2)
KL_VALUES = {
    "learning_rate": (1e-3, 2e-2),
    "kl_target": (0.01, 0.001),
    "kl_cutoff_factor": (2.0, 1.5),
    "kl_cutoff_coef": (1000.0, 100.0),
    "kl_init_penalty": (1.0, 0.1),
    "lr_kl_cap": (0.05, 0.001),
    "value_clip": (0.2, 0.05),
    "discount": (0.995, 0.9),
}


def member_configs(base: PPOConfig, values: dict[str, tuple[float, ...]]) -> list[PPOConfig]:
    """One config per column of ``values``."""
    n = len(next(iter(values.values())))
    return [
        dataclasses.replace(base, **{key: column[i] for key, column in values.items()})
        for i in range(n)
    ]


def train(ppo: PPO, ts, ss, iterations: int, vmapped: bool):
    """``iterations`` iterations of ``ppo`` (vmapped over members); the state and the
    metrics of each iteration."""
    step = cold_jit(jax.vmap(ppo.iteration) if vmapped else ppo.iteration)
    metrics = []
    for _ in range(iterations):
        ts, ss, m = step(ts, ss)
        metrics.append({k: np.asarray(v) for k, v in m.items() if k != ENDED})
    return ts, metrics


@pytest.mark.parametrize("base, values", [(CLIP, CLIP_VALUES), (KL, KL_VALUES)], ids=["clip", "kl"])
def test_members_in_one_program_compute_what_their_own_configs_compute(base, values):
    configs = member_configs(base, values)
    init_key, sim_key = host_key(base.seed, 0), host_key(base.seed, 1)
    env = make_run_env(base, base.num_agents)
    ppo = PPO(configs[0], env)  # the program's constants: member 0's config
    members = Members(configs)
    ts = members.attach(stack([cold_jit(ppo.init)(init_key)] * len(configs)), fresh=True)
    sim = cold_jit(ppo.init_sim)(sim_key)  # the env's: the same for every member
    together, together_metrics = train(ppo, ts, stack([sim] * len(configs)), 2, vmapped=True)
    finals = []
    for i, config in enumerate(configs):
        alone_ppo = PPO(config, env)
        alone, alone_metrics = train(alone_ppo, cold_jit(alone_ppo.init)(init_key), sim, 2, False)
        member = Members.detach(unstack(together, i))
        close = lambda a, b: np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)  # noqa: E731
        jax.tree.map(close, ckpt.to_host(member), ckpt.to_host(alone))
        for got, want in zip(together_metrics, alone_metrics, strict=True):
            jax.tree.map(close, {k: v[i] for k, v in got.items()}, want)
        assert float(member.beta) != 0.0
        finals.append(np.concatenate([np.ravel(x) for x in jax.tree.leaves(member.params)]))
    # The members differ by far more than the tolerance: their values reached them.
    assert np.max(np.abs(finals[0] - finals[1])) > 1e-3


def test_the_state_carries_the_values_over_members_and_a_member_part_is_a_runs_state():
    configs = member_configs(CLIP, {"learning_rate": (1e-3, 2e-3), "clip_epsilon": (0.1, 0.3)})
    configs[1] = dataclasses.replace(configs[1], seed=7)  # the seed may differ too
    ppo = PPO(CLIP, make_run_env(CLIP, CLIP.num_agents))
    fresh = stack([ppo.init(host_key(c.seed, 0)) for c in configs])
    assert fresh.hparams is None and ppo.hparams(unstack(fresh, 0)) == HParams.of(CLIP)
    members = Members(configs)
    ts = members.attach(fresh, fresh=True)
    assert ts.hparams.learning_rate.dtype == np.float32
    np.testing.assert_array_equal(ts.hparams.learning_rate, np.float32([1e-3, 2e-3]))
    np.testing.assert_array_equal(ts.hparams.clip_epsilon, np.float32([0.1, 0.3]))
    assert ts.hparams.value_clip is None and ts.hparams.lr_kl_cap is None  # None in both
    part = Members.detach(unstack(ts, 1))
    assert part.hparams is None and float(part.beta) == CLIP.kl_init_penalty
    assert ts.hparams.learning_rate is not members.attach(fresh).hparams.learning_rate
    assert set(MEMBER_FIELDS) == {f.name for f in dataclasses.fields(HParams)}


def test_members_of_one_program_differ_only_in_their_values_and_seeds():
    with pytest.raises(ValueError, match="differ in more than their per-member values"):
        Members([CLIP, dataclasses.replace(CLIP, update_epochs=3)])
    with pytest.raises(ValueError, match="differ in more than their per-member values"):
        Members([CLIP, dataclasses.replace(CLIP, target_kl=None)])  # another code path


def test_a_checkpoint_written_before_hparams_existed_restores_a_runs_state(tmp_path):
    from flax import serialization

    ppo = PPO(CLIP, make_run_env(CLIP, CLIP.num_agents))
    ts = ppo.init(host_key(0, 0))
    old = serialization.to_state_dict(ckpt.to_host(ts))
    del old["hparams"]
    restored, _ = ckpt.restore_checkpoint(ckpt.save_checkpoint(tmp_path, old, 0), ts)
    assert restored.hparams is None
    jax.tree.map(np.testing.assert_array_equal, ckpt.to_host(restored), ckpt.to_host(ts))

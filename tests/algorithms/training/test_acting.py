"""ActorCriticActing: observation statistics, normalisation, fresh episodes and the mean policy.

The policy network is set by hand so that its actions are known: the logits of the three
actions are ``(0, k * relu(z), k * relu(-z))`` of the first normalised observation entry
``z``, so the deterministic action says the sign of ``z`` (0 where it is 0, ties going to
the first action).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.networks.networks import make_network
from batchppo.algorithms.ppo import PPOConfig
from batchppo.algorithms.ppo.ppo import PPO
from batchppo.algorithms.training.acting import ActorCriticActing
from batchppo.core import Env, normalize
from batchppo.testing import DictCueEnv, ImageCueEnv, MockEnv

CONFIG = PPOConfig(
    backend="gymnax",
    network="feed_forward_categorical",
    activation="relu",
    policy_layers=(4,),
    value_layers=(4,),
    num_agents=4,
    rollout_length=8,
    obs_clip=3.0,
)


class Acting(ActorCriticActing):
    """The acting half of an agent, and nothing else."""

    def __init__(self, config: PPOConfig, env: Env, network: bool = True) -> None:
        self.config, self.env, self.spec = config, env, env.spec
        if network:
            self.network = make_network(config, env.spec)


def sign_params(network, k: float) -> dict:
    """Parameters whose logits are ``(0, k * relu(z), k * relu(-z))`` (see module docs)."""
    params = jax.tree.map(jnp.zeros_like, network.init(jax.random.key(0)))
    hidden = jnp.zeros((2, 4)).at[0, 0].set(1.0).at[0, 1].set(-1.0)  # relu(z), relu(-z)
    head = jnp.zeros((4, 3)).at[0, 1].set(k).at[1, 2].set(k)
    params["policy"]["MLP_0"]["Dense_0"]["kernel"] = hidden
    params["policy"]["head"]["Dense_0"]["kernel"] = head
    return params


def stats(*rows: list[float]) -> normalize.NormState:
    return normalize.update(normalize.init((2,)), jnp.asarray(rows, jnp.float32))


def test_the_mean_policy_acts_on_observations_normalised_with_the_statistics_given():
    acting = Acting(CONFIG, MockEnv((3, 3, 3), discrete=True))
    params = sign_params(acting.network, k=1.0)
    obs_norm = stats([4.0, 0.0], [6.0, 2.0])  # mean (5, 1), std sqrt(2 + 1e-4)
    obs = jnp.asarray([[4.0, 9.0], [6.0, 9.0], [5.0, 9.0]])
    first = jnp.ones(3, bool)
    action, extras, carry = acting.mode_fn((params, obs_norm), (), obs, first, None)
    # z = obs[0] - 5: negative, positive, zero.
    assert action.tolist() == [2, 1, 0] and action.dtype == jnp.int32
    assert extras == {} and carry == ()
    # Without normalisation the raw values act: all positive.
    raw = Acting(
        dataclasses.replace(CONFIG, normalize_observations=False), MockEnv((3, 3, 3), discrete=True)
    )
    action, _, _ = raw.mode_fn((params, obs_norm), (), obs, first, None)
    assert action.tolist() == [1, 1, 1]


def test_sampled_actions_follow_the_key_where_the_mean_action_cannot():
    # PPO's sampling policy over the same hand-set network: a large k makes it certain where
    # z != 0; at z = 0 the logits tie and the samples spread over all three actions.
    ppo = PPO(CONFIG, MockEnv(tuple([3] * 300), discrete=True))
    ts = ppo.init(jax.random.key(0))
    ts = ts.replace(params=sign_params(ppo.network, k=100.0), obs_norm=stats([-1, 0], [1, 0]))
    params = ppo.acting_params(ts)
    assert params[0] is ts.params and params[1] is ts.obs_norm
    z = jnp.repeat(jnp.asarray([-1.0, 1.0, 0.0]), 100)
    obs = jnp.stack([z, jnp.zeros_like(z)], axis=-1)
    first = jnp.ones(300, bool)
    mode, _, _ = ppo.mode_fn(params, (), obs, first, None)
    np.testing.assert_array_equal(mode, np.repeat([2, 1, 0], 100))
    key = jax.random.key(7)
    sampled, _, _ = ppo.policy_fn(params, (), obs, first, key)
    again, _, _ = ppo.policy_fn(params, (), obs, first, key)
    other, _, _ = ppo.policy_fn(params, (), obs, first, jax.random.key(8))
    np.testing.assert_array_equal(sampled[:200], mode[:200])
    assert set(np.asarray(sampled[200:]).tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(again, sampled)
    assert not np.array_equal(other[200:], sampled[200:])


def test_observation_statistics_exist_for_float_vector_leaves_only():
    vector = Acting(CONFIG, MockEnv((3,)), network=False).init_obs_norm()
    assert isinstance(vector, normalize.NormState) and vector.mean.shape == (2,)
    assert float(vector.count) == 0.0
    # Dict leaves in tree order: "bit" (Discrete: none), "x" (a float vector).
    bit, x = Acting(CONFIG, DictCueEnv(2), network=False).init_obs_norm()
    assert bit is None and x.mean.shape == (2,)
    assert Acting(CONFIG, ImageCueEnv(2), network=False).init_obs_norm() == (None,)


def test_dict_observations_normalise_their_float_leaves_and_keep_the_others():
    acting = Acting(CONFIG, DictCueEnv(2), network=False)
    obs = {"bit": jnp.asarray([0, 1], jnp.int32), "x": jnp.asarray([[1.0, 0.0], [3.0, 4.0]])}
    obs_norm = acting.update_obs_norm(acting.init_obs_norm(), obs)
    assert obs_norm[0] is None and float(obs_norm[1].count) == 2.0
    out = acting.normalize_obs(obs_norm, obs)
    np.testing.assert_array_equal(out["bit"], obs["bit"])
    assert out["bit"].dtype == jnp.int32
    std = np.sqrt(np.asarray([2.0, 8.0]) + 1e-4)
    want = (np.asarray([[1.0, 0.0], [3.0, 4.0]]) - [2.0, 2.0]) / (std + 1e-8)
    np.testing.assert_allclose(out["x"], want, rtol=1e-6)


def test_normalised_observations_are_clipped_and_unnormalised_ones_only_cast():
    acting = Acting(CONFIG, MockEnv((3,)), network=False)
    obs_norm = stats([-1.0, -1.0], [1.0, 1.0])  # mean 0, std about 1.41
    out = acting.normalize_obs(obs_norm, jnp.asarray([[100.0, -100.0]]))
    assert out.tolist() == [[3.0, -3.0]]  # obs_clip
    off = Acting(dataclasses.replace(CONFIG, normalize_observations=False), MockEnv((3,)), False)
    ints = jnp.asarray([[100, -100]], jnp.int32)
    out = off.normalize_obs(obs_norm, ints)
    assert out.dtype == jnp.float32 and out.tolist() == [[100.0, -100.0]]
    assert off.update_obs_norm(obs_norm, ints) is obs_norm


def test_obs_norm_summary_averages_over_every_normalised_dim():
    mean, std = ActorCriticActing.obs_norm_summary(stats([0.0, 0.0], [2.0, 4.0]))
    assert float(mean) == pytest.approx(1.5)  # means (1, 2)
    assert float(std) == pytest.approx((np.sqrt(2 + 1e-4) + np.sqrt(8 + 1e-4)) / 2, rel=1e-6)
    mean, std = ActorCriticActing.obs_norm_summary((None, stats([1.0, 3.0], [3.0, 5.0])))
    assert float(mean) == pytest.approx(3.0)
    mean, std = ActorCriticActing.obs_norm_summary((None,))
    assert (float(mean), float(std)) == (0.0, 1.0)


def test_init_sim_starts_fresh_episodes_with_strong_types():
    env = MockEnv((2, 3), discrete=True)
    acting = Acting(CONFIG, env)
    ss = acting.init_sim(jax.random.key(0))
    assert ss.first.tolist() == [True, True] and ss.policy_carry == ()
    assert ss.score.tolist() == [0.0, 0.0] and ss.length.tolist() == [0, 0]
    np.testing.assert_array_equal(ss.obs, env.reset(jax.random.key(0))[1])
    assert not any(getattr(leaf, "weak_type", False) for leaf in jax.tree.leaves(ss))
    other = acting.init_sim(jax.random.key(0), MockEnv((2, 3, 4), discrete=True))
    assert other.first.shape == (3,)
    assert acting.cast_action(jnp.asarray([1.0, 2.0])).dtype == jnp.int32

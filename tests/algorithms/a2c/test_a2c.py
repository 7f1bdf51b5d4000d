"""A2C's update: one gradient step of the actor-critic loss per rollout, exactly."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from cold_programs import cold_jit

from batchppo.algorithms.a2c.a2c import A2C, Trainer
from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.registry import get_algorithm
from batchppo.algorithms.training.episodes import ENDED
from batchppo.core.keys import host_key
from batchppo.core.simulation import rollout
from batchppo.experiment.run.training import EPISODE_METRICS

# The trainers' programs and the tests' own compile as the run-once ones: each runs a few
# iterations, and the expected values are computed here by programs compiled alike.
pytestmark = pytest.mark.usefixtures("cold_training_programs")

TINY = A2CConfig(
    env="CartPole-v1",
    backend="gymnax",
    network="feed_forward_categorical",
    normalize_ranges=False,
    max_length=4,  # episodes of 4 steps: truncations inside the rollout of 6
    num_agents=3,
    rollout_length=6,
    policy_layers=(8,),
    value_layers=(8,),
    entropy_coef=0.01,
    discount=0.9,
    steps=36,
)


def _n_step_returns(reward, values, next_values, terminated, truncated, discount):
    """The targets of gae_lambda=1, written as the paper's n-step returns, in NumPy."""
    returns = np.zeros_like(reward)
    following = None
    for t in reversed(range(len(reward))):
        done = terminated[t] | truncated[t]
        bootstrap = np.where(terminated[t], 0.0, next_values[t])
        if following is None:
            returns[t] = reward[t] + discount * bootstrap
        else:
            returns[t] = reward[t] + discount * np.where(done, bootstrap, following)
        following = returns[t]
    return returns


@pytest.mark.timeout(180)
def test_learn_takes_one_step_on_the_actor_critic_loss():
    trainer = Trainer(TINY)
    agent: A2C = trainer.agent
    ts = trainer.init(host_key(0, 0))
    ss = trainer.init_sim(ts, host_key(0, 1))
    acting = agent.acting_params(ts)
    _, traj, stats = cold_jit(lambda ss: rollout(agent.env, agent.policy_fn, acting, ss, agent.T))(
        ss
    )
    assert bool(traj.truncated.any())
    params = ts.params
    network = agent.network
    value = cold_jit(network.value)
    values = np.asarray(traj.extras["value"])
    np.testing.assert_allclose(values, value(params, traj.obs), rtol=1e-5, atol=1e-7)
    next_values = np.asarray(value(params, traj.final_obs))
    targets = _n_step_returns(
        np.asarray(traj.reward), values, next_values, np.asarray(traj.terminated),
        np.asarray(traj.truncated), TINY.discount,
    )  # fmt: skip
    advantages = targets - values

    def loss(p):
        dist = network.distribution(network.policy_sequence(p, (), traj.obs, traj.first))
        policy = -(advantages * dist.log_prob(traj.action)).mean()
        value = jnp.square(targets - network.value(p, traj.obs)).mean()
        return policy + 0.5 * value - 0.01 * dist.entropy().mean()

    optimizer = optax.chain(
        optax.clip_by_global_norm(0.5), optax.rmsprop(7e-4, decay=0.99, eps=1e-5)
    )

    @cold_jit
    def step(params):
        updates, _ = optimizer.update(jax.grad(loss)(params), optimizer.init(params), params)
        return optax.apply_updates(params, updates)

    expected = step(params)
    new, metrics = cold_jit(agent.learn)(ts, traj, stats)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), new.params, expected
    )
    np.testing.assert_allclose(metrics["loss"], cold_jit(loss)(params), rtol=1e-5)
    np.testing.assert_allclose(metrics["return_mean"], targets.mean(), rtol=1e-5)
    assert int(new.step) == 18 and int(new.updates) == 1
    # Unnormalised observations: the statistics stay empty.
    assert float(new.obs_norm.count) == float(ts.obs_norm.count)
    trainer.close()


@pytest.mark.timeout(180)
def test_iterations_report_the_declared_metrics_and_count_steps():
    config = dataclasses.replace(TINY, normalize_observations=True, optimizer="adam")
    trainer = Trainer(config)
    ts = trainer.init(host_key(0, 0))
    ss = trainer.init_sim(ts, host_key(0, 1))
    ts, ss, metrics = trainer.iteration(ts, ss)
    declared = {*EPISODE_METRICS, *get_algorithm("a2c").metrics, ENDED}  # ENDED: the episodes
    assert set(metrics) == declared
    assert metrics["env_steps"] == 18 and metrics["episodes"] == 3 and metrics["length"] == 4
    ts, ss, more = trainer.iterations(ts, ss, 2)
    assert int(ts.step) == 54 and trainer.num_iterations == 2
    assert float(ts.obs_norm.count) == 54  # normalised: the statistics saw every observation
    assert all(set(m) == declared for m in more)
    ev = trainer.evaluate(ts, 4, host_key(0, 2))
    assert ev["returns"].shape == (4,) and np.all(ev["lengths"] == 4)
    action = trainer.policy(ts)(np.zeros((2, 4), np.float32))
    assert action.shape == (2,) and action.dtype == np.int32
    trainer.close()

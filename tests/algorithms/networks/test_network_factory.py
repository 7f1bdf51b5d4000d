"""The ``network_factory`` hook: a network of one's own, ``(config, spec) -> Network``, trains in
``Trainer`` (PPO's and A2C's), ``make_train`` and ``batchppo.train``, in place of the config's."""

import jax
import numpy as np
import pytest
from cold_programs import cold_jit

import batchppo
from batchppo.algorithms.a2c import a2c
from batchppo.algorithms.a2c.config import A2CConfig
from batchppo.algorithms.networks.networks import Network, make_network
from batchppo.algorithms.ppo import ppo
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.run_config import NetworkConfig
from batchppo.core.keys import host_key

# One iteration of CartPole: 4 envs x 8 steps.
PPO_TINY = PPOConfig(
    env="CartPole-v1",
    backend="gymnax",
    network="feed_forward_categorical",
    normalize_ranges=False,
    num_agents=4,
    rollout_length=8,
    update_epochs=1,
    num_minibatches=1,
    policy_layers=(8,),
    value_layers=(8,),
    steps=32,
    max_length=200,
    eval_every=0,
)
A2C_TINY = A2CConfig(
    env="CartPole-v1",
    backend="gymnax",
    network="feed_forward_categorical",
    normalize_ranges=False,
    num_agents=4,
    rollout_length=8,
    policy_layers=(8,),
    value_layers=(8,),
    steps=32,
    max_length=200,
    eval_every=0,
)


class TinyNetwork:
    """A user's network factory: a tanh MLP of one hidden layer of 7 (policy) and 5 (value)
    units from the shared pieces, whatever the config's own layers; it records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.networks: list[Network] = []

    def __call__(self, config, spec) -> Network:
        self.calls.append((config, spec))
        own = NetworkConfig(
            network="feed_forward", policy_layers=(7,), value_layers=(5,), activation="tanh"
        )
        self.networks.append(make_network(own, spec))
        return self.networks[-1]


def _hidden_sizes(params) -> tuple[int, int]:
    """The widths of the first hidden layer of the policy and of the value network."""
    policy = params["policy"]["MLP_0"]["Dense_0"]["kernel"]
    value = params["value"]["MLP_0"]["Dense_0"]["kernel"]
    return policy.shape[1], value.shape[1]


@pytest.mark.parametrize("algorithm", [ppo, a2c])
@pytest.mark.usefixtures("cold_training_programs")  # its runs are one iteration each
def test_trainer_trains_one_iteration_with_the_users_network(algorithm):
    config = PPO_TINY if algorithm is ppo else A2C_TINY
    factory = TinyNetwork()
    trainer = algorithm.Trainer(config, network_factory=factory)
    assert factory.calls == [(config, trainer.spec)]
    assert trainer.agent.network is factory.networks[0]
    ts = trainer.init(host_key(0, 0))
    assert _hidden_sizes(ts.params) == (7, 5)
    before = jax.tree.map(np.asarray, ts.params)
    ss = trainer.init_sim(ts, host_key(0, 1))
    ts, _, metrics = trainer.iteration(ts, ss)
    assert int(ts.step) == 32 and np.isfinite(metrics["loss"])
    assert _hidden_sizes(ts.params) == (7, 5)
    moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), before, ts.params)
    assert any(jax.tree.leaves(moved))
    # Without the hook, the config's network: (8, 8).
    default = algorithm.Trainer(config)
    assert _hidden_sizes(default.init(host_key(0, 0)).params) == (8, 8)


@pytest.mark.usefixtures("cold_training_programs")  # its runs are one iteration each
def test_make_train_and_batchppo_train_take_the_hook_seeds_too():
    factory = TinyNetwork()
    ts, metrics = cold_jit(ppo.make_train(PPO_TINY, network_factory=factory))(jax.random.key(0))
    assert len(factory.calls) == 1 and factory.calls[0][0] == PPO_TINY
    assert _hidden_sizes(ts.params) == (7, 5) and metrics["loss"].shape == (1,)
    result = batchppo.train(PPO_TINY, progress="none", network_factory=factory)
    assert len(factory.calls) == 2 and result.step == 32
    assert _hidden_sizes(result.train_state.params) == (7, 5)
    seeds = batchppo.train(PPO_TINY, progress="none", seeds=2, network_factory=factory)
    # The SeedsTrainer's agent and its one-seed trainer's each build the network.
    assert len(factory.calls) == 4 and len(seeds) == 2
    assert all(_hidden_sizes(r.train_state.params) == (7, 5) for r in seeds)
    with pytest.raises(TypeError, match="network_factory= builds the network"):
        batchppo.train(PPO_TINY, network_factory=factory, trainer_factory=ppo.Trainer)


def test_a_factory_that_returns_no_network_is_refused_in_one_line():
    with pytest.raises(TypeError, match=r"^network_factory returned a dict, not a Network"):
        ppo.Trainer(PPO_TINY, network_factory=lambda config, spec: {})

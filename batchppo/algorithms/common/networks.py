"""Policy and value networks (Flax linen) and their distributions (distrax), shared by the
algorithms: :func:`make_network` builds one from any config with the fields of
:class:`NetworkConfig` (PPO's and A2C's configs have them).

Three networks, as in the original Batch PPO:

* ``feed_forward_gaussian``: separate policy and value MLPs; the mean head is ``tanh`` with a
  small initialisation (``init_mean_factor``); the standard deviation is state-independent,
  ``softplus(p)`` with ``p`` initialised so that it starts at ``init_std``.
* ``feed_forward_categorical``: the same with a logits head for discrete actions.
* ``recurrent_gaussian``: the policy's last hidden layer is a GRU whose state is carried through
  ``simulate`` and reset where ``first`` is True (the first observation of an episode). The value
  network stays feed-forward, as in the original.

A network is used through :class:`Network`, a bundle of pure functions. Distribution parameters
travel as plain dicts (``{"mean", "std"}`` or ``{"logits"}``) so they can be stored in the
rollout and rebuilt into distrax distributions for log-probs, KL and entropy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from batchppo.core.env import EnvSpec

PyTree = Any
DistParams = dict[str, jax.Array]

_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {"relu": nn.relu, "tanh": nn.tanh}


def _hidden_init() -> nn.initializers.Initializer:
    # LeCun-normal-like fan-in scaling, as the original's variance_scaling(factor=1).
    return nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal")


class MLP(nn.Module):
    """A stack of dense layers with an activation after each."""

    layers: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        for size in self.layers:
            x = act(nn.Dense(size, kernel_init=_hidden_init())(x))
        return x


class ValueNet(nn.Module):
    """Feed-forward value network ``obs -> V(obs)`` (scalar per observation)."""

    layers: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = MLP(self.layers, self.activation)(obs)
        return nn.Dense(1, kernel_init=_hidden_init())(x)[..., 0]


class GaussianHead(nn.Module):
    """tanh mean with small init and a state-independent softplus standard deviation."""

    action_size: int
    init_std: float
    init_mean_factor: float

    @nn.compact
    def __call__(self, x: jax.Array) -> DistParams:
        mean_init = nn.initializers.variance_scaling(
            self.init_mean_factor, "fan_in", "truncated_normal"
        )
        mean = jnp.tanh(nn.Dense(self.action_size, kernel_init=mean_init)(x))
        # softplus^-1(init_std) so that the std starts exactly at init_std.
        raw0 = math.log(math.expm1(self.init_std))
        raw = self.param("std_param", nn.initializers.constant(raw0), (self.action_size,))
        std = jnp.broadcast_to(nn.softplus(raw), mean.shape)
        return {"mean": mean, "std": std}


class CategoricalHead(nn.Module):
    """Logits head with small init."""

    num_actions: int
    init_mean_factor: float

    @nn.compact
    def __call__(self, x: jax.Array) -> DistParams:
        init = nn.initializers.variance_scaling(self.init_mean_factor, "fan_in", "truncated_normal")
        return {"logits": nn.Dense(self.num_actions, kernel_init=init)(x)}


class FeedForwardPolicy(nn.Module):
    """``obs -> dist params`` through an MLP and a head."""

    layers: Sequence[int]
    activation: str
    head: nn.Module

    @nn.compact
    def __call__(self, obs: jax.Array) -> DistParams:
        return self.head(MLP(self.layers, self.activation)(obs))


class RecurrentPolicy(nn.Module):
    """MLP, then a GRU cell (the last policy layer), then the Gaussian head; one step."""

    layers: Sequence[int]
    activation: str
    head: nn.Module

    @nn.compact
    def __call__(self, carry: jax.Array, obs: jax.Array) -> tuple[jax.Array, DistParams]:
        x = MLP(self.layers[:-1], self.activation)(obs)
        carry, x = nn.GRUCell(self.layers[-1], name="gru")(carry, x)
        return carry, self.head(x)


class NetworkConfig(Protocol):
    """The fields of a config that :func:`make_network` reads, and no others."""

    @property
    def network(self) -> str:
        """``feed_forward_gaussian``, ``feed_forward_categorical`` or ``recurrent_gaussian``."""
        ...

    @property
    def policy_layers(self) -> Sequence[int]:
        """Hidden sizes of the policy MLP (the last one is the GRU's for ``recurrent_gaussian``)."""
        ...

    @property
    def value_layers(self) -> Sequence[int]:
        """Hidden sizes of the value MLP."""
        ...

    @property
    def activation(self) -> str:
        """Hidden activation: ``relu`` or ``tanh``."""
        ...

    @property
    def init_std(self) -> float:
        """Initial standard deviation of the Gaussian policies."""
        ...

    @property
    def init_mean_factor(self) -> float:
        """Scale of the policy head's initialisation."""
        ...


class Network(NamedTuple):
    """Pure functions of one policy and value network.

    Attributes:
        init: ``key -> params`` (``{"policy": ..., "value": ...}``).
        initial_carry: ``batch_size -> carry`` (``()`` for feed-forward networks).
        policy_step: ``(params, carry, obs[B], first[B]) -> (dist_params[B], carry)``; resets
            the carry where ``first`` is True before using it.
        policy_sequence: ``(params, carry0[N], obs[N, L], first[N, L]) -> dist_params[N, L]``
            (batch-major sequences, resets inside at ``first``).
        value: ``(params, obs[...]) -> V[...]``.
        distribution: ``dist_params -> distrax distribution`` (batched over leading axes).
        mode: ``dist_params -> deterministic action`` (mean or argmax).
        recurrent: Whether the policy carries state.
    """

    init: Callable[[jax.Array], PyTree]
    initial_carry: Callable[[int], PyTree]
    policy_step: Callable[..., tuple[DistParams, PyTree]]
    policy_sequence: Callable[..., DistParams]
    value: Callable[[PyTree, jax.Array], jax.Array]
    distribution: Callable[[DistParams], distrax.Distribution]
    mode: Callable[[DistParams], jax.Array]
    recurrent: bool


def gaussian_distribution(params: DistParams) -> distrax.Distribution:
    """Diagonal Gaussian over the last axis (log-probs/KL/entropy summed over action dims)."""
    return distrax.MultivariateNormalDiag(params["mean"], params["std"])


def categorical_distribution(params: DistParams) -> distrax.Distribution:
    """Categorical over the last axis of ``logits``."""
    return distrax.Categorical(logits=params["logits"])


def _policy_head(
    config: NetworkConfig, spec: EnvSpec
) -> tuple[nn.Module, Callable[[DistParams], distrax.Distribution], Callable[..., jax.Array]]:
    """The head of ``config.network`` for ``spec``'s actions, its distribution and its mode."""
    if config.network == "feed_forward_categorical":
        if not spec.discrete:
            raise ValueError(
                "network='feed_forward_categorical' needs a discrete action space; use "
                "feed_forward_gaussian or recurrent_gaussian for continuous actions"
            )
        head = CategoricalHead(spec.num_actions, config.init_mean_factor)
        return head, categorical_distribution, _categorical_mode
    if spec.discrete:
        raise ValueError(
            f"network={config.network!r} needs a continuous action space; use "
            "feed_forward_categorical for discrete actions"
        )
    if len(spec.action_shape) != 1:
        raise ValueError(
            f"Gaussian networks need 1-D actions, got action_shape {spec.action_shape}; "
            "flatten the action space with a wrapper"
        )
    head = GaussianHead(spec.action_shape[0], config.init_std, config.init_mean_factor)
    return head, gaussian_distribution, _gaussian_mode


def _categorical_mode(p: DistParams) -> jax.Array:
    return jnp.argmax(p["logits"], axis=-1).astype(jnp.int32)


def _gaussian_mode(p: DistParams) -> jax.Array:
    return p["mean"]


class _Policy(NamedTuple):
    """The policy half of a :class:`Network` (``init`` takes the value net's params too)."""

    init: Callable[[jax.Array], PyTree]
    initial_carry: Callable[[int], PyTree]
    policy_step: Callable[..., tuple[DistParams, PyTree]]
    policy_sequence: Callable[..., DistParams]


def _feed_forward(
    config: NetworkConfig, head: nn.Module, init_value: Callable[[jax.Array, jax.Array], PyTree]
) -> _Policy:
    policy_net = FeedForwardPolicy(tuple(config.policy_layers), config.activation, head)

    def flat(obs: jax.Array, batch_ndim: int) -> jax.Array:
        return obs.reshape((math.prod(obs.shape[:batch_ndim]), -1))

    def init(key: jax.Array, dummy: jax.Array) -> PyTree:
        kp, kv = jax.random.split(key)
        return {"policy": policy_net.init(kp, dummy)["params"], "value": init_value(kv, dummy)}

    def policy_step(
        params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array
    ) -> tuple[DistParams, PyTree]:
        del first
        return policy_net.apply({"params": params["policy"]}, flat(obs, 1)), carry

    def policy_sequence(
        params: PyTree, carry0: PyTree, obs: jax.Array, first: jax.Array
    ) -> DistParams:
        del carry0, first
        # One (N * L, D) matmul per layer: XLA:CPU runs rank-3 dots slower.
        dist = policy_net.apply({"params": params["policy"]}, flat(obs, 2))
        return jax.tree.map(lambda x: x.reshape((*obs.shape[:2], *x.shape[1:])), dist)

    def initial_carry(batch_size: int) -> PyTree:
        del batch_size
        return ()

    return _Policy(init, initial_carry, policy_step, policy_sequence)


def _recurrent(
    config: NetworkConfig, head: nn.Module, init_value: Callable[[jax.Array, jax.Array], PyTree]
) -> _Policy:
    if len(config.policy_layers) < 1:
        raise ValueError("recurrent_gaussian needs at least one policy layer (the GRU size)")
    rnn = RecurrentPolicy(tuple(config.policy_layers), config.activation, head)
    hidden = int(config.policy_layers[-1])

    def initial_carry(batch_size: int) -> PyTree:
        return jnp.zeros((batch_size, hidden), jnp.float32)

    def init(key: jax.Array, dummy: jax.Array) -> PyTree:
        kp, kv = jax.random.split(key)
        return {
            "policy": rnn.init(kp, initial_carry(1), dummy)["params"],
            "value": init_value(kv, dummy),
        }

    def policy_step(
        params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array
    ) -> tuple[DistParams, PyTree]:
        carry = jnp.where(first[:, None], 0.0, carry)
        obs = obs.reshape((*obs.shape[:1], -1))
        carry, dist = rnn.apply({"params": params["policy"]}, carry, obs)
        return dist, carry

    def policy_sequence(
        params: PyTree, carry0: PyTree, obs: jax.Array, first: jax.Array
    ) -> DistParams:
        # Batch-major (N, L, ...) -> time-major scan over L.
        obs_t = jnp.swapaxes(obs.reshape((*obs.shape[:2], -1)), 0, 1)
        first_t = jnp.swapaxes(first, 0, 1)

        def step(carry: jax.Array, inp: tuple[jax.Array, jax.Array]) -> tuple[Any, Any]:
            o, f = inp
            dist, carry = policy_step(params, carry, o, f)
            return carry, dist

        _, dists = lax.scan(step, carry0, (obs_t, first_t))
        return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), dists)

    return _Policy(init, initial_carry, policy_step, policy_sequence)


def make_network(config: NetworkConfig, spec: EnvSpec) -> Network:
    """Builds the network named by ``config.network`` for an environment.

    Args:
        config: Any config with the fields of :class:`NetworkConfig` (network, policy_layers,
            value_layers, activation, init_std, init_mean_factor); PPO's and A2C's have them.
        spec: The environment's spec; must be discrete for ``feed_forward_categorical`` and
            continuous (1-D actions) for the Gaussian networks.

    Returns:
        The :class:`Network` of pure functions.

    Raises:
        ValueError: if the network does not fit the action space.
    """
    obs_shape = tuple(spec.obs_shape)
    head, distribution, mode = _policy_head(config, spec)
    value_net = ValueNet(tuple(config.value_layers), config.activation)

    def init_value(key: jax.Array, dummy: jax.Array) -> PyTree:
        return value_net.init(key, dummy)["params"]

    recurrent = config.network == "recurrent_gaussian"
    policy = (_recurrent if recurrent else _feed_forward)(config, head, init_value)
    dummy_obs = (1, int(math.prod(obs_shape)))

    def init(key: jax.Array) -> PyTree:
        return policy.init(key, jnp.zeros(dummy_obs, jnp.float32))

    def value(params: PyTree, obs: jax.Array) -> jax.Array:
        batch_shape = obs.shape[: obs.ndim - len(obs_shape)]
        x = obs.reshape((math.prod(batch_shape), -1))  # 2-D dots (see _feed_forward)
        return value_net.apply({"params": params["value"]}, x).reshape(batch_shape)

    return Network(
        init=init,
        initial_carry=policy.initial_carry,
        policy_step=policy.policy_step,
        policy_sequence=policy.policy_sequence,
        value=value,
        distribution=distribution,
        mode=mode,
        recurrent=recurrent,
    )

"""Policy and value networks (Flax linen) and their distributions (distrax), shared by the
algorithms: ``make_network`` builds one from a config's network fields (``NetworkConfig``,
which PPO's and A2C's configs inherit) and the env's spaces.

How a network is chosen from the spaces:

* **Observations.** One float or integer vector ``Box`` (rank 0-2), the common case, goes straight
  into the MLPs (flattened), exactly as the original Batch PPO's networks. Any other observation
  space goes through an ``ObsEncoder`` first: images (rank-3 ``Box``) through a CNN torso (``cnn``),
  vectors flattened, ``Discrete``/``MultiDiscrete`` one-hot encoded, the leaves of a Dict/Tuple
  encoded one by one and concatenated. With ``shared_torso`` the policy and the value network share
  one encoder (its parameters are ``params["torso"]``); otherwise each has its own.
* **Actions.** The heads of ``heads``: Gaussian (``Box``), categorical (``Discrete``), independent
  categoricals (``MultiDiscrete``), Bernoulli (``MultiBinary``), and their product over the leaves
  of a Dict/Tuple action.
* **Invalid actions.** Where the observation carries a mask of the allowed values of a
  ``Discrete`` action (``action_mask``: a leaf named ``action_mask`` by default), the policy's
  logits of the others are masked (``masking.py``).
* **Recurrence.** ``network`` names the policy: ``feed_forward`` or ``recurrent`` (the policy's
  last hidden layer is a GRU whose state is carried through ``simulate`` and reset where
  ``first`` is True; the value network stays feed-forward, as in the original), with the head
  chosen from the action space. The original's names stay: ``feed_forward_gaussian`` and
  ``recurrent_gaussian`` (one Box action), ``feed_forward_categorical`` (one Discrete action).

* **Hidden layers.** The vector torso ``mlp`` (a record of the registry
  ``batchppo.algorithms.networks.torsos``) follows the encoder, in the policy and in the value
  network, sized by ``policy_layers`` and ``value_layers``: ``plain`` (``MLP``, the
  original's), ``layernorm`` (``MLP`` with ``layer_norm``), ``simba`` (``SimbaMLP``) or ``sem``
  (``SemMLP``: the last layer's units softmaxed in groups, ``simplicial_embedding``). With
  ``penultimate_norm`` the features that enter each head are divided by their L2 norm
  (``normalize_features``).

The Gaussian mean head is ``tanh`` with a small initialisation (``init_mean_factor``) and a
state-independent standard deviation ``softplus(p)`` that starts at ``init_std``.

A network is used through ``Network``, a bundle of pure functions. Distribution parameters travel as
plain dicts (``{"mean", "std"}`` or ``{"logits"}``; a tree of them for a Dict/Tuple action) so they
can be stored in the rollout and rebuilt into distrax distributions for log-probs, KL and entropy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util
from jax import lax

from batchppo.algorithms.networks.encoders import ObsEncoder, check_cnn
from batchppo.algorithms.networks.heads import (
    ActionHead,
    BernoulliHead,
    CategoricalHead,
    DistParams,
    GaussianHead,
    MultiCategoricalHead,
    action_head,
    bernoulli_distribution,
    categorical_distribution,
    gaussian_distribution,
    multi_categorical_distribution,
)
from batchppo.algorithms.networks.masking import action_mask_leaf, mask_logits
from batchppo.algorithms.networks.torsos import SEM_SIMPLEX_SIZE, get_torso
from batchppo.algorithms.run_config import (
    ACTIVATIONS,
    NETWORKS,
    RECURRENT,
    NetworkConfig,
    check_mlp,
)
from batchppo.core import spaces
from batchppo.core.env import EnvSpec

PyTree = Any

ACTIVATION_FUNCTIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    name: getattr(nn, name) for name in ACTIVATIONS
}
"""The config's ``activation`` names (``ACTIVATIONS``) -> Flax's functions of those names."""


DIAGNOSTICS = "diagnostics"
"""The Flax collection the networks ``sow`` their representation diagnostics into: each hidden
layer's pre-activations (the torsos) and the features that enter each head. A collection that
is not mutable in an ``apply`` ignores what is sown, so a plain forward pass computes exactly
what it would without them; ``Network.representation`` makes it mutable."""


def _hidden_init() -> nn.initializers.Initializer:
    # LeCun-normal-like fan-in scaling, as the original's variance_scaling(factor=1).
    return nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal")


class MLP(nn.Module):
    """A stack of dense layers, each followed by the activation: the ``plain`` vector torso;
    with ``layer_norm``, by LayerNorm and then the activation: the ``layernorm`` one.

    LayerNorm (Ba et al. 2016, arXiv 1607.06450) keeps each hidden layer's pre-activations at
    zero mean and unit variance per sample, then applies a learned scale and bias per unit.
    Tanaka and Mahmood 2026 ("Performance Variation in Deep Reinforcement Learning", arXiv
    2606.06746) find that it narrows PPO's spread over runs.
    """

    layers: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATION_FUNCTIONS[self.activation]
        for i, size in enumerate(self.layers):
            x = nn.Dense(size, kernel_init=_hidden_init())(x)
            self.sow(DIAGNOSTICS, f"preact_{i}", x)
            x = act(nn.LayerNorm()(x) if self.layer_norm else x)
        return x


SIMBA_EXPANSION = 4
"""How much wider a SimBa block's inner layer is than the block (Lee et al. 2024)."""


class SimbaBlock(nn.Module):
    """One pre-LN residual block of SimBa: ``x + Dense(width)(act(Dense(4 width)(LN(x))))``."""

    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        width = x.shape[-1]
        y = nn.LayerNorm()(x)
        y = nn.Dense(SIMBA_EXPANSION * width, kernel_init=_hidden_init())(y)
        self.sow(DIAGNOSTICS, "preact", y)
        y = ACTIVATION_FUNCTIONS[self.activation](y)
        return x + nn.Dense(width, kernel_init=_hidden_init())(y)


class SimbaMLP(nn.Module):
    """SimBa's torso (Lee et al. 2024, "SimBa: Simplicity Bias for Scaling Up Parameters in
    Deep Reinforcement Learning", arXiv 2410.09754): the ``simba`` vector torso.

    A linear projection of the inputs to the blocks' width, one pre-LN residual block
    (``SimbaBlock``) per entry of ``layers`` (all entries one width: the torso's config check
    refuses others), then a final LayerNorm. The residual path lets the network keep a
    near-linear map of its inputs, the simplicity bias the paper credits for its gains.
    SimBa's third part, running-statistics normalisation of the observations, is the
    algorithms' observation normaliser (``normalize_observations``,
    ``batchppo.core.normalize``), which this torso does not repeat. The paper's blocks use
    ReLU; this one uses the config's ``activation``.
    """

    layers: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Dense(self.layers[0], kernel_init=_hidden_init(), name="embed")(x)
        for i in range(len(self.layers)):
            x = SimbaBlock(self.activation, name=f"block_{i}")(x)
        return nn.LayerNorm(name="norm")(x)


SEM_TEMPERATURE = 1.0
"""The softmax temperature ``tau`` of the ``sem`` torso's simplices: the authors' code applies
the softmax without one (``tau = 1``), a LayerNorm before it setting the logits' scale."""


def simplicial_embedding(
    z: jax.Array, size: int = SEM_SIMPLEX_SIZE, temperature: float = SEM_TEMPERATURE
) -> jax.Array:
    """Simplicial embedding (Lavoie et al. 2022, arXiv 2204.00616): the last axis of ``z``
    (``L * size`` units) cut into ``L`` groups of ``size`` consecutive units, each replaced by
    ``softmax(group / temperature)``, so that each group is non-negative and sums to 1 (a
    point of a simplex) and the whole lies on a product of ``L`` simplices.

    Raises:
        ValueError: The last axis is not a multiple of ``size``.
    """
    width = z.shape[-1]
    if width % size:
        raise ValueError(f"simplicial_embedding: width {width} is not a multiple of {size}")
    groups = z.reshape((*z.shape[:-1], width // size, size))
    return jax.nn.softmax(groups / temperature, axis=-1).reshape(z.shape)


class SemMLP(nn.Module):
    """Simplicial embeddings in an actor and a critic (Obando-Ceron, Mayor, Lavoie, Fujimoto,
    Courville and Castro 2025, "Simplicial Embeddings Improve Sample Efficiency in
    Actor-Critic Agents", arXiv 2510.13704): the ``sem`` vector torso.

    The plain torso's layers (``MLP``: dense, activation) for every entry of ``layers`` but
    the last; then a dense layer of the last entry's width, LayerNorm, and
    ``simplicial_embedding``: its units in groups of ``SEM_SIMPLEX_SIZE``, each softmaxed at
    ``SEM_TEMPERATURE`` onto a simplex (the torso's config check refuses a last width that is
    not a multiple of it). The head reads the simplices directly. The paper puts the layer
    in both the actor and the critic, where it credits the sparse, near-discrete features it
    gives for steadier value bootstrapping and stronger policy gradients.

    From the authors' code for FastTD3 (github.com/waltermayor/FastTD3_SEm and
    johanobandoc/iclr26, ``fast_td3.py``): the layer replaces the last hidden layer (dense,
    activation) of an MLP trunk, and is a dense layer, LayerNorm with a learned scale and
    bias, and a softmax per group with no temperature, followed directly by the output
    layer. There the groups are of 64 units, two in the actor and four in the critic,
    whose hidden layers are 512 and 1024 wide. The paper's text at hand does not give its
    PPO's simplex size, temperature or placement, so those are the FastTD3 code's, but for
    the size: here a simplex is 8 units, the default of that code's ``SimNorm`` and the size
    of TD-MPC2's (Hansen et al. 2024, arXiv 2310.16828), so that the 64-unit layers of the
    MuJoCo presets hold 8 simplices rather than one of 64.
    """

    layers: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = MLP(self.layers[:-1], self.activation, name="hidden")(x)
        z = nn.Dense(self.layers[-1], kernel_init=_hidden_init(), name="project")(x)
        self.sow(DIAGNOSTICS, "preact", z)
        return simplicial_embedding(nn.LayerNorm(name="norm")(z))


FEATURE_NORM_EPS = 1e-6
"""Added to the squared L2 norm of the penultimate features before its root is taken, so
that all-zero features (dead ReLUs) give zeros and finite gradients."""


def normalize_features(x: jax.Array) -> jax.Array:
    """``x / ||x||`` over the last axis, with ``FEATURE_NORM_EPS``: ``penultimate_norm``.

    Bjorck et al. 2021 ("Is High Variance Unavoidable in RL? A Case Study in Continuous
    Control", arXiv 2110.11222) trace much of the spread over seeds to outlier runs that fail
    early, with saturating units, and normalise the penultimate features this way against
    it; Tanaka and Mahmood 2026 (arXiv 2606.06746) find that it narrows PPO's spread too.
    """
    return x * lax.rsqrt(jnp.sum(jnp.square(x), axis=-1, keepdims=True) + FEATURE_NORM_EPS)


def _hidden(x: jax.Array, mlp: str, layers: Sequence[int], activation: str) -> jax.Array:
    # The config's vector torso, built inside the calling module (Flax names it after its class).
    return get_torso(mlp, "vector").build(layers=tuple(layers), activation=activation)(x)


def _penultimate(x: jax.Array, penultimate_norm: bool) -> jax.Array:
    return normalize_features(x) if penultimate_norm else x


class ValueNet(nn.Module):
    """Feed-forward value network ``obs -> V(obs)`` (scalar per observation); an optional
    encoder first (a list of observation leaves in, features out), then the vector torso
    ``mlp``."""

    layers: Sequence[int]
    activation: str = "relu"
    encoder: nn.Module | None = None
    mlp: str = "plain"
    penultimate_norm: bool = False

    @nn.compact
    def __call__(self, obs: Any) -> jax.Array:
        x = obs if self.encoder is None else self.encoder(obs)
        x = _hidden(x, self.mlp, self.layers, self.activation)
        x = _penultimate(x, self.penultimate_norm)
        self.sow(DIAGNOSTICS, "features", x)
        return nn.Dense(1, kernel_init=_hidden_init())(x)[..., 0]


class FeedForwardPolicy(nn.Module):
    """``obs -> dist params`` through an optional encoder, the vector torso ``mlp`` and a
    head."""

    layers: Sequence[int]
    activation: str
    head: nn.Module
    encoder: nn.Module | None = None
    mlp: str = "plain"
    penultimate_norm: bool = False

    @nn.compact
    def __call__(self, obs: Any) -> Any:
        x = obs if self.encoder is None else self.encoder(obs)
        x = _hidden(x, self.mlp, self.layers, self.activation)
        x = _penultimate(x, self.penultimate_norm)
        self.sow(DIAGNOSTICS, "features", x)
        return self.head(x)


class RecurrentPolicy(nn.Module):
    """An optional encoder, the vector torso ``mlp`` on all but the last policy layer, then a
    GRU cell (the last policy layer), then the head; one step. With ``penultimate_norm`` the
    head reads the GRU's output normalised; the carry is the GRU's own."""

    layers: Sequence[int]
    activation: str
    head: nn.Module
    encoder: nn.Module | None = None
    mlp: str = "plain"
    penultimate_norm: bool = False

    @nn.compact
    def __call__(self, carry: jax.Array, obs: Any) -> tuple[jax.Array, Any]:
        x = obs if self.encoder is None else self.encoder(obs)
        x = _hidden(x, self.mlp, self.layers[:-1], self.activation)
        carry, x = nn.GRUCell(self.layers[-1], name="gru")(carry, x)
        return carry, self.head(_penultimate(x, self.penultimate_norm))


class Network(NamedTuple):
    """Pure functions of one policy and value network.

    Observations are pytrees of the env's observation space (arrays for the common one-leaf
    case) with leading batch axes; dist params are a dict per action leaf, in a tree of the
    action space's structure for a Dict/Tuple action.

    Attributes:
        init: ``key -> params`` (``{"policy": ..., "value": ...}``, plus ``"torso"`` with a
            shared torso).
        initial_carry: ``batch_size -> carry`` (``()`` for feed-forward networks).
        policy_step: ``(params, carry, obs[B], first[B]) -> (dist_params[B], carry)``; resets
            the carry where ``first`` is True before using it.
        policy_sequence: ``(params, carry0[N], obs[N, L], first[N, L]) -> dist_params[N, L]``
            (batch-major sequences, resets inside at ``first``).
        value: ``(params, obs[...]) -> V[...]``.
        distribution: ``dist_params -> distrax distribution`` (batched over leading axes).
        mode: ``dist_params -> deterministic action`` (mean, argmax or the likelier bit).
        recurrent: Whether the policy carries state.
        policy_step_and_value: ``(params, carry, obs[B], first[B]) -> (dist_params[B], carry,
            V[B])``: ``policy_step`` and ``value`` of the same observations, the shared torso
            run once.
        policy_sequence_and_value: ``(params, carry0[N], obs[N, L], first[N, L]) ->
            (dist_params[N, L], V[N, L])``: ``policy_sequence`` and ``value`` likewise.
        representation: ``(params, obs[...]) -> {name: array}``: what a feed-forward
            network's layers sow into ``DIAGNOSTICS`` on a batch of observations, its batch
            axes merged into one: ``policy_features`` and ``value_features`` ``(B, F)``, the
            features that enter each head, and ``policy_preact_<i>`` and
            ``value_preact_<i>`` ``(B, H)``, each hidden layer's pre-activations in the order
            the layers run (``representation_diagnostics``). None: the network has none
            (a recurrent one, or one of a factory's own without it).
    """

    init: Callable[[jax.Array], PyTree]
    initial_carry: Callable[[int], PyTree]
    policy_step: Callable[..., tuple[PyTree, PyTree]]
    policy_sequence: Callable[..., PyTree]
    value: Callable[[PyTree, PyTree], jax.Array]
    distribution: Callable[[PyTree], distrax.Distribution]
    mode: Callable[[PyTree], PyTree]
    recurrent: bool
    policy_step_and_value: Callable[..., tuple[PyTree, PyTree, jax.Array]]
    policy_sequence_and_value: Callable[..., tuple[PyTree, jax.Array]]
    representation: Callable[[PyTree, PyTree], dict[str, jax.Array]] | None = None


def _check_network(network: str, action_space: PyTree) -> None:
    """The original's network names fix their head: refuse an action space they do not fit."""
    leaf = spaces.single(action_space)
    if network == "feed_forward_categorical" and not isinstance(leaf, spaces.Discrete):
        raise spaces.UnsupportedSpaceError(
            "network='feed_forward_categorical' needs a discrete action space; use "
            "feed_forward_gaussian or recurrent_gaussian for continuous actions, or "
            f"feed_forward for {spaces.describe(action_space)}"
        )
    if network.endswith("_gaussian") and not isinstance(leaf, spaces.Box):
        fix = (
            "feed_forward_categorical for discrete actions"
            if isinstance(leaf, spaces.Discrete)
            else f"feed_forward or recurrent for {spaces.describe(action_space)}"
        )
        raise spaces.UnsupportedSpaceError(
            f"network={network!r} needs a continuous action space; use {fix}"
        )


def _is_vector(obs_space: PyTree) -> bool:
    """One Box that is not an image: it enters the MLPs flattened, with no encoder."""
    return isinstance(obs_space, spaces.Box) and not spaces.is_image(obs_space)


def _encoder(config: NetworkConfig, obs_space: PyTree) -> ObsEncoder:
    """The encoder of every leaf; refuses a CNN that does not fit an image."""
    leaves = tuple(spaces.leaves(obs_space))
    paths = spaces.leaf_paths(obs_space)
    encoding = getattr(config, "image_encoding", "auto")
    images = [
        (leaf, path)
        for leaf, path in zip(leaves, paths, strict=True)
        if spaces.is_image(leaf) and not spaces.is_code_grid(leaf, encoding)
    ]
    if not images:
        return ObsEncoder(leaves, layout=config.image_layout, encoding=encoding)
    for leaf, path in images:
        check_cnn(
            config.cnn,
            leaf.shape,
            config.image_layout,
            f" {leaf.shape} at {path}" if path else f" {leaf.shape}",
        )
    return ObsEncoder(leaves, config.cnn, int(config.cnn_dense), config.image_layout, encoding)


class _Inputs:
    """How observations enter the network: one vector flattened to ``(B, D)`` float32, or
    the list of leaves (tree order) with their batch axes merged into one."""

    def __init__(self, obs_space: PyTree) -> None:
        self.vector = _is_vector(obs_space)
        first = spaces.leaves(obs_space)[0]
        self.first_rank = len(first.shape)
        if self.vector:
            self.dummy: Any = jnp.zeros((1, int(math.prod(first.shape))), jnp.float32)
        else:
            self.dummy = [jnp.zeros((1, *s.shape), s.dtype) for s in spaces.leaves(obs_space)]

    def batch_shape(self, obs: PyTree) -> tuple[int, ...]:
        """The batch axes of ``obs``."""
        leaf = jax.tree.leaves(obs)[0]
        return tuple(leaf.shape[: leaf.ndim - self.first_rank])

    def __call__(self, obs: PyTree, batch_ndim: int) -> Any:
        if self.vector:
            # One (N * L, D) matmul per layer: XLA:CPU runs rank-3 dots slower.
            return obs.reshape((math.prod(obs.shape[:batch_ndim]), -1)).astype(jnp.float32)
        return [
            x.reshape((math.prod(x.shape[:batch_ndim]), *x.shape[batch_ndim:]))
            for x in jax.tree.leaves(obs)
        ]


NetworkFactory = Callable[[Any, EnvSpec], Network]
"""``(config, spec) -> Network``: builds an algorithm's network from its config and the env's
spec, as Brax's ``network_factory``. ``make_network`` is the default; a factory of one's own is
passed to ``Trainer``, ``SeedsTrainer``, ``make_train`` or ``batchppo.train`` as
``network_factory``."""


def build_network(
    config: Any, spec: EnvSpec, network_factory: NetworkFactory | None = None
) -> Network:
    """The network of a run: ``network_factory(config, spec)``, or ``make_network``'s.

    Raises:
        TypeError: The factory returned something other than a ``Network``.
    """
    network = (network_factory or make_network)(config, spec)
    if not isinstance(network, Network):
        raise TypeError(
            f"network_factory returned a {type(network).__name__}, not a Network: build one "
            "with batchppo.algorithms.networks.networks.make_network, or as it does"
        )
    return network


def make_network(config: NetworkConfig, spec: EnvSpec) -> Network:
    """Builds the network for an env's spaces (see the module docstring for how).

    Args:
        config: A ``NetworkConfig`` (PPO's and A2C's configs are), or any object with its
            fields: the image fields are read only for an image observation,
            ``shared_torso`` only for one that is not one vector ``Box``, and
            ``action_mask`` only where it has one (an object without it masks nothing).
        spec: The environment's spec (its ``obs_space`` and ``action_space`` trees).

    Returns:
        The ``Network`` of pure functions.

    Raises:
        ValueError: A recurrent network has no policy layer.
        UnsupportedSpaceError: The network does not fit the action space, or a space no
            encoder or head takes (one line naming it).
    """
    model = _model(config, spec)
    network = Network(
        init=model.init,
        initial_carry=model.initial_carry,
        policy_step=model.policy_step,
        policy_sequence=model.policy_sequence,
        value=model.value,
        distribution=model.head.distribution,
        mode=model.head.mode,
        recurrent=model.recurrent,
        policy_step_and_value=model.policy_step_and_value,
        policy_sequence_and_value=model.policy_sequence_and_value,
        representation=None if model.recurrent else model.representation,
    )
    mask = action_mask_leaf(getattr(config, "action_mask", "none"), spec)
    return network if mask is None else with_action_mask(network, mask)


def _model(config: NetworkConfig, spec: EnvSpec) -> _Model:
    """The Flax modules of ``make_network``'s network, checked against the spaces."""
    _check_network(config.network, spec.action_space)
    head = action_head(spec.action_space, config.init_std, config.init_mean_factor)
    recurrent = config.network in RECURRENT
    if recurrent and len(config.policy_layers) < 1:
        raise ValueError(f"{config.network} needs at least one policy layer (the GRU size)")
    inputs = _Inputs(spec.obs_space)
    torso: ObsEncoder | None = None
    encoder: ObsEncoder | None = None
    if not inputs.vector:
        encoder = _encoder(config, spec.obs_space)
        if config.shared_torso:
            torso, encoder = encoder, None
    check_mlp(config)
    body = {"mlp": config.mlp, "penultimate_norm": config.penultimate_norm}
    value_net = ValueNet(tuple(config.value_layers), config.activation, encoder, **body)
    layers = tuple(config.policy_layers)
    policy_class = RecurrentPolicy if recurrent else FeedForwardPolicy
    policy_net = policy_class(layers, config.activation, head.module, encoder, **body)
    hidden = int(layers[-1]) if recurrent else 0
    return _Model(head, inputs, torso, policy_net, value_net, recurrent, hidden)


# eq=False: compared and hashed by identity (jit caches on the functions of a Network).
@dataclasses.dataclass(frozen=True, eq=False)
class _Model:
    """A network's modules and, as methods, the pure functions of its ``Network``."""

    head: ActionHead
    inputs: _Inputs
    torso: ObsEncoder | None  # the shared torso, run once for the policy and the value
    policy_net: nn.Module
    value_net: ValueNet
    recurrent: bool
    hidden: int  # the GRU's size; 0 for a feed-forward policy

    def features(self, params: PyTree, x: Any) -> Any:
        """The shared torso's features of the inputs ``x``, or ``x`` without one."""
        if self.torso is None:
            return x
        return self.torso.apply({"params": params["torso"]}, x)

    def initial_carry(self, batch_size: int) -> PyTree:
        """``Network.initial_carry``."""
        if not self.recurrent:
            return ()
        return jnp.zeros((batch_size, self.hidden), jnp.float32)

    def init(self, key: jax.Array) -> PyTree:
        """``Network.init``."""
        kp, kv = jax.random.split(key)
        params: dict[str, Any] = {}
        x = self.inputs.dummy
        if self.torso is not None:
            # A torso of one-hot and flattened leaves only has no parameters to hold.
            torso = self.torso.init(jax.random.fold_in(key, 2), x)
            params["torso"] = torso.get("params", {})
            x = self.features(params, x)
        policy_args = (self.initial_carry(1), x) if self.recurrent else (x,)
        params["policy"] = self.policy_net.init(kp, *policy_args)["params"]
        params["value"] = self.value_net.init(kv, x)["params"]
        return params

    def policy_on(
        self, params: PyTree, carry: PyTree, x: Any, first: jax.Array
    ) -> tuple[PyTree, PyTree]:
        """The policy on one step's features (the torso's output, or the inputs without one)."""
        if not self.recurrent:
            return self.head.to_tree(self.policy_net.apply({"params": params["policy"]}, x)), carry
        carry = jnp.where(first[:, None], 0.0, carry)
        carry, dist = self.policy_net.apply({"params": params["policy"]}, carry, x)
        return self.head.to_tree(dist), carry

    def value_on(self, params: PyTree, x: Any, batch_shape: tuple[int, ...]) -> jax.Array:
        """The value of features ``x``, shaped ``batch_shape``."""
        return self.value_net.apply({"params": params["value"]}, x).reshape(batch_shape)

    def feed_forward_sequence(self, params: PyTree, x: Any, shape: tuple[int, ...]) -> PyTree:
        """A feed-forward policy on the features ``x`` of ``(N, L)`` steps, shaped ``shape``."""
        dist = self.head.to_tree(self.policy_net.apply({"params": params["policy"]}, x))
        return jax.tree.map(lambda d: d.reshape((*shape, *d.shape[1:])), dist)

    def policy_step(
        self, params: PyTree, carry: PyTree, obs: PyTree, first: jax.Array
    ) -> tuple[PyTree, PyTree]:
        """``Network.policy_step``."""
        return self.policy_on(params, carry, self.features(params, self.inputs(obs, 1)), first)

    def policy_sequence(
        self, params: PyTree, carry0: PyTree, obs: PyTree, first: jax.Array
    ) -> PyTree:
        """``Network.policy_sequence``."""
        if not self.recurrent:
            x = self.features(params, self.inputs(obs, 2))
            return self.feed_forward_sequence(params, x, first.shape)
        # Batch-major (N, L, ...) -> time-major scan over L.
        obs_t = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), obs)
        first_t = jnp.swapaxes(first, 0, 1)

        def step(carry: jax.Array, inp: tuple[Any, jax.Array]) -> tuple[Any, Any]:
            o, f = inp
            dist, carry = self.policy_step(params, carry, o, f)
            return carry, dist

        _, dists = lax.scan(step, carry0, (obs_t, first_t))
        return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), dists)

    def value(self, params: PyTree, obs: PyTree) -> jax.Array:
        """``Network.value``."""
        batch_shape = self.inputs.batch_shape(obs)
        x = self.features(params, self.inputs(obs, len(batch_shape)))
        return self.value_on(params, x, batch_shape)

    def policy_step_and_value(
        self, params: PyTree, carry: PyTree, obs: PyTree, first: jax.Array
    ) -> tuple[PyTree, PyTree, jax.Array]:
        """``Network.policy_step_and_value``."""
        if self.torso is None:
            dist, new_carry = self.policy_step(params, carry, obs, first)
            return dist, new_carry, self.value(params, obs)
        x = self.features(params, self.inputs(obs, 1))
        dist, new_carry = self.policy_on(params, carry, x, first)
        return dist, new_carry, self.value_on(params, x, first.shape)

    def representation(self, params: PyTree, obs: PyTree) -> dict[str, jax.Array]:
        """``Network.representation`` (feed-forward networks)."""
        x = self.features(params, self.inputs(obs, len(self.inputs.batch_shape(obs))))
        found: dict[str, jax.Array] = {}
        for part, net in (("policy", self.policy_net), ("value", self.value_net)):
            _, state = net.apply({"params": params[part]}, x, mutable=[DIAGNOSTICS])
            sown = traverse_util.flatten_dict(state[DIAGNOSTICS])
            found[f"{part}_features"] = sown.pop(("features",))[0]
            # The torso's modules sow in the order they run (Flax keeps it).
            for i, values in enumerate(sown.values()):
                found[f"{part}_preact_{i}"] = values[0]
        return found

    def policy_sequence_and_value(
        self, params: PyTree, carry0: PyTree, obs: PyTree, first: jax.Array
    ) -> tuple[PyTree, jax.Array]:
        """``Network.policy_sequence_and_value``."""
        if self.torso is None:
            return self.policy_sequence(params, carry0, obs, first), self.value(params, obs)
        x = self.features(params, self.inputs(obs, 2))  # (N * L, F): the torso once for every step
        values = self.value_on(params, x, first.shape)
        if not self.recurrent:
            return self.feed_forward_sequence(params, x, first.shape), values
        x_t = jnp.swapaxes(x.reshape((*first.shape, -1)), 0, 1)

        def step(carry: jax.Array, inp: tuple[jax.Array, jax.Array]) -> tuple[Any, Any]:
            dist, carry = self.policy_on(params, carry, *inp)
            return carry, dist

        _, dists = lax.scan(step, carry0, (x_t, jnp.swapaxes(first, 0, 1)))
        return jax.tree.map(lambda d: jnp.swapaxes(d, 0, 1), dists), values


def effective_rank(features: jax.Array, delta: float = 0.01) -> jax.Array:
    """The effective rank (srank) of a ``(samples, features)`` matrix: the fewest of its
    singular values, largest first, whose sum reaches ``1 - delta`` of the sum of all
    (Kumar et al. 2021, "Implicit Under-Parameterization", arXiv 2010.14498; Moalla et al.
    2024, arXiv 2405.00662, with ``delta = 0.01``). 0 for an all-zero matrix.

    Returns:
        The rank, an int32 scalar.
    """
    s = jnp.linalg.svd(features.astype(jnp.float32), compute_uv=False)
    total = jnp.sum(s)
    below = jnp.cumsum(s) < (1.0 - delta) * total
    return jnp.where(total > 0, jnp.sum(below) + 1, 0).astype(jnp.int32)


def with_action_mask(network: Network, index: int) -> Network:
    """``network`` with its policy's logits masked by the observation leaf ``index``
    (``masking.mask_logits``) wherever it maps observations to a distribution."""

    def policy_step(params: PyTree, carry: PyTree, obs: PyTree, first: jax.Array) -> Any:
        dist, carry = network.policy_step(params, carry, obs, first)
        return mask_logits(dist, obs, index), carry

    def policy_sequence(params: PyTree, carry0: PyTree, obs: PyTree, first: jax.Array) -> Any:
        return mask_logits(network.policy_sequence(params, carry0, obs, first), obs, index)

    def policy_step_and_value(
        params: PyTree, carry: PyTree, obs: PyTree, first: jax.Array
    ) -> tuple[PyTree, PyTree, jax.Array]:
        dist, carry, value = network.policy_step_and_value(params, carry, obs, first)
        return mask_logits(dist, obs, index), carry, value

    def policy_sequence_and_value(
        params: PyTree, carry0: PyTree, obs: PyTree, first: jax.Array
    ) -> tuple[PyTree, jax.Array]:
        dist, value = network.policy_sequence_and_value(params, carry0, obs, first)
        return mask_logits(dist, obs, index), value

    return network._replace(
        policy_step=policy_step,
        policy_sequence=policy_sequence,
        policy_step_and_value=policy_step_and_value,
        policy_sequence_and_value=policy_sequence_and_value,
    )


__all__ = [
    "ACTIVATION_FUNCTIONS",
    "DIAGNOSTICS",
    "MLP",
    "NETWORKS",
    "BernoulliHead",
    "CategoricalHead",
    "DistParams",
    "FeedForwardPolicy",
    "GaussianHead",
    "MultiCategoricalHead",
    "Network",
    "NetworkConfig",
    "NetworkFactory",
    "RecurrentPolicy",
    "SemMLP",
    "SimbaBlock",
    "SimbaMLP",
    "ValueNet",
    "bernoulli_distribution",
    "build_network",
    "categorical_distribution",
    "effective_rank",
    "gaussian_distribution",
    "make_network",
    "multi_categorical_distribution",
    "normalize_features",
    "simplicial_embedding",
    "with_action_mask",
]

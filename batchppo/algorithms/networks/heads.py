"""Action heads: features to the parameters of an action distribution, one head per leaf.

Each action leaf gets its head and distribution (distrax):

* ``Box`` (1-D): ``GaussianHead``, a diagonal Gaussian with a tanh mean and a state-independent
  softplus standard deviation;
* ``Discrete``: ``CategoricalHead``, a categorical;
* ``MultiDiscrete``: ``MultiCategoricalHead``, independent categoricals, one per entry (logits
  padded to the largest entry with a large negative constant, so that entries of different sizes
  share one array; the padding has probability 0);
* ``MultiBinary``: ``BernoulliHead``, independent Bernoullis.

A Dict/Tuple action space gets one head per leaf over the same features; its distribution is
the product (``distrax.Joint``): log-probs and entropies (and KLs) are sums over the leaves.
Distribution parameters travel as plain dicts (``{"mean", "std"}`` or ``{"logits"}``), in a
tree of the action space's structure for a Dict/Tuple action, so that they can be kept in
the rollout and rebuilt into distributions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp

from batchppo.core import spaces

DistParams = dict[str, jax.Array]
PyTree = Any

PAD_LOGIT = -1e9
"""The logit of a MultiDiscrete entry's padding (probability exactly 0 in float32)."""


def _head_init(factor: float) -> nn.initializers.Initializer:
    return nn.initializers.variance_scaling(factor, "fan_in", "truncated_normal")


class GaussianHead(nn.Module):
    """tanh mean with small init and a state-independent softplus standard deviation."""

    action_size: int
    init_std: float
    init_mean_factor: float

    @nn.compact
    def __call__(self, x: jax.Array) -> DistParams:
        mean_init = _head_init(self.init_mean_factor)
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
        return {
            "logits": nn.Dense(self.num_actions, kernel_init=_head_init(self.init_mean_factor))(x)
        }


class MultiCategoricalHead(nn.Module):
    """Logits of independent categoricals, ``(..., len(nvec), max(nvec))``, padded with
    ``PAD_LOGIT`` where an entry has fewer choices than the largest."""

    nvec: tuple[int, ...]
    init_mean_factor: float

    @nn.compact
    def __call__(self, x: jax.Array) -> DistParams:
        flat = nn.Dense(sum(self.nvec), kernel_init=_head_init(self.init_mean_factor))(x)
        width = max(self.nvec)
        rows, start = [], 0
        for n in self.nvec:
            row = flat[..., start : start + n]
            start += n
            pad = jnp.full((*row.shape[:-1], width - n), PAD_LOGIT, row.dtype)
            rows.append(jnp.concatenate([row, pad], axis=-1))
        return {"logits": jnp.stack(rows, axis=-2)}


class BernoulliHead(nn.Module):
    """Logits of ``n`` independent Bernoullis."""

    n: int
    init_mean_factor: float

    @nn.compact
    def __call__(self, x: jax.Array) -> DistParams:
        return {"logits": nn.Dense(self.n, kernel_init=_head_init(self.init_mean_factor))(x)}


class TreeHead(nn.Module):
    """One head per action leaf over the same features; a tuple of their parameters."""

    heads: tuple[nn.Module, ...]

    def __call__(self, x: jax.Array) -> tuple[DistParams, ...]:
        return tuple(head(x) for head in self.heads)


def gaussian_distribution(params: DistParams) -> distrax.Distribution:
    """Diagonal Gaussian over the last axis (log-probs/KL/entropy summed over action dims)."""
    return distrax.MultivariateNormalDiag(params["mean"], params["std"])


def categorical_distribution(params: DistParams) -> distrax.Distribution:
    """Categorical over the last axis of ``logits``."""
    return distrax.Categorical(logits=params["logits"])


def multi_categorical_distribution(params: DistParams) -> distrax.Distribution:
    """Independent categoricals over the entries (axis -2) of ``logits``; sums over them."""
    return distrax.Independent(distrax.Categorical(logits=params["logits"]), 1)


def bernoulli_distribution(params: DistParams) -> distrax.Distribution:
    """Independent Bernoullis over the last axis of ``logits``; sums over them."""
    return distrax.Independent(distrax.Bernoulli(logits=params["logits"]), 1)


def _gaussian_mode(p: DistParams) -> jax.Array:
    return p["mean"]


def _categorical_mode(p: DistParams) -> jax.Array:
    return jnp.argmax(p["logits"], axis=-1).astype(jnp.int32)


def _bernoulli_mode(p: DistParams) -> jax.Array:
    return (p["logits"] > 0).astype(jnp.int32)


class LeafHead(NamedTuple):
    """A leaf's head module, distribution and mode (the deterministic action)."""

    module: nn.Module
    distribution: Callable[[DistParams], distrax.Distribution]
    mode: Callable[[DistParams], jax.Array]


def leaf_head(leaf: spaces.Leaf, init_std: float, init_mean_factor: float, where: str) -> LeafHead:
    """The head of one action leaf.

    Raises:
        UnsupportedSpaceError: A Box action that is not 1-D (one line naming it).
    """
    if isinstance(leaf, spaces.Box):
        if len(leaf.shape) != 1:
            raise spaces.UnsupportedSpaceError(
                f"Box action of shape {leaf.shape}{where} is not supported: the Gaussian head "
                "takes 1-D Box actions; reshape the action space to 1-D in a wrapper."
            )
        module = GaussianHead(int(leaf.shape[0]), init_std, init_mean_factor)
        return LeafHead(module, gaussian_distribution, _gaussian_mode)
    if isinstance(leaf, spaces.Discrete):
        return LeafHead(
            CategoricalHead(leaf.n, init_mean_factor), categorical_distribution, _categorical_mode
        )
    if isinstance(leaf, spaces.MultiDiscrete):
        return LeafHead(
            MultiCategoricalHead(tuple(leaf.nvec), init_mean_factor),
            multi_categorical_distribution,
            _categorical_mode,
        )
    return LeafHead(
        BernoulliHead(leaf.n, init_mean_factor), bernoulli_distribution, _bernoulli_mode
    )


class ActionHead(NamedTuple):
    """The head of a whole action space.

    Attributes:
        module: ``features -> dist params`` (a leaf's dict, or a tuple of them in tree order).
        to_tree: Those parameters as a tree of the action space's structure.
        distribution: ``dist params tree -> distribution`` (a product over Dict/Tuple leaves).
        mode: ``dist params tree -> deterministic action tree``.
    """

    module: nn.Module
    to_tree: Callable[[Any], PyTree]
    distribution: Callable[[PyTree], distrax.Distribution]
    mode: Callable[[PyTree], PyTree]


def action_head(action_space: PyTree, init_std: float, init_mean_factor: float) -> ActionHead:
    """The head of ``action_space``: a leaf's own, or one per leaf and their product.

    Raises:
        UnsupportedSpaceError: An action leaf no head takes (one line naming it).
    """
    if spaces.is_leaf(action_space):
        head = leaf_head(action_space, init_std, init_mean_factor, "")
        return ActionHead(head.module, lambda p: p, head.distribution, head.mode)
    leaves = spaces.leaves(action_space)
    paths = spaces.leaf_paths(action_space)
    heads = [
        leaf_head(leaf, init_std, init_mean_factor, f" at {path}")
        for leaf, path in zip(leaves, paths, strict=True)
    ]
    treedef = jax.tree.structure(action_space)
    by_leaf = {id(leaf): head for leaf, head in zip(leaves, heads, strict=True)}

    def to_tree(params: tuple[DistParams, ...]) -> PyTree:
        return jax.tree.unflatten(treedef, list(params))

    def distribution(params: PyTree) -> distrax.Distribution:
        dists = jax.tree.map(
            lambda leaf, p: by_leaf[id(leaf)].distribution(p), action_space, params
        )
        return distrax.Joint(dists)

    def mode(params: PyTree) -> PyTree:
        return jax.tree.map(lambda leaf, p: by_leaf[id(leaf)].mode(p), action_space, params)

    module = TreeHead(tuple(h.module for h in heads))
    return ActionHead(module, to_tree, distribution, mode)

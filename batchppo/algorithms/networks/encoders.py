"""Observation encoders: each leaf of an observation space to a flat float feature vector.

``ObsEncoder`` encodes every leaf of an observation (a pytree of the observation space, flattened to
a list of leaves in tree order) by its kind and concatenates the features:

* images (rank-3 ``Box``, HWC or CHW): a CNN torso, the config's ``cnn``, one of the
  registry ``batchppo.algorithms.networks.torsos`` (the built-in ones, ``NatureCNN``,
  ``ImpalaCNN`` and ``MinAtarCNN``, are defined here). uint8 frames are scaled by 1/255 here,
  inside the network; bool and other integer images are cast to float;
* grids of codes (integer images whose values name things, as MiniGrid's object, colour
  and state ids; ``is_code_grid`` of ``core/spaces.py``): each cell's codes embedded
  (``CodeEmbedding``), then flattened, with no CNN and no 1/255 scaling;
* other ``Box`` leaves: flattened and cast to float32 (float leaves arrive normalised);
* ``Discrete``: one-hot; ``MultiDiscrete``: the one-hots of its entries, concatenated;
* ``MultiBinary``: the bits as floats.

A CNN that does not fit its image (the Nature CNN on a 10x10 grid) is refused when the network
is built, in one line naming the image and the torsos that fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from batchppo.algorithms.networks.torsos import fitting, get_torso
from batchppo.algorithms.run_config import IMAGE_LAYOUTS
from batchppo.core import spaces

__all__ = ["IMAGE_LAYOUTS", "ImpalaCNN", "MinAtarCNN", "NatureCNN", "ObsEncoder"]

# auto reads (84, 84, 4) and (10, 10, 4) as HWC, (4, 84, 84) as CHW.


def _conv_init() -> nn.initializers.Initializer:
    return nn.initializers.orthogonal(math.sqrt(2.0))


def image_layout(shape: tuple[int, ...], layout: str) -> str:
    """``hwc`` or ``chw`` for an image of ``shape`` (see ``IMAGE_LAYOUTS``)."""
    if layout != "auto":
        return layout
    return "chw" if shape[0] < shape[-1] else "hwc"


def hwc_shape(shape: tuple[int, ...], layout: str) -> tuple[int, int, int]:
    """The ``(height, width, channels)`` of an image of ``shape`` read in ``layout``."""
    if image_layout(shape, layout) == "chw":
        return (shape[1], shape[2], shape[0])
    return (shape[0], shape[1], shape[2])


def check_cnn(cnn: str, shape: tuple[int, ...], layout: str, where: str) -> None:
    """Raises ``UnsupportedSpaceError`` when torso ``cnn`` does not fit an image of ``shape``
    (its ``min_side`` in the registry ``torsos``), naming the torsos that fit."""
    h, w, _ = hwc_shape(shape, layout)
    if not get_torso(cnn).fits(h, w):
        fits = fitting(h, w)
        raise spaces.UnsupportedSpaceError(
            f"cnn={cnn!r} does not fit the {h}x{w} image observation{where}; "
            f"use cnn={fits[0]!r} (fits: {fits})."
        )


class NatureCNN(nn.Module):
    """Conv 32 8x8/4, conv 64 4x4/2, conv 64 3x3/1 (VALID), then a dense layer; ReLUs."""

    dense: int = 512

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.Conv(
                features, (kernel, kernel), (stride, stride), "VALID", kernel_init=_conv_init()
            )(x)
            x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        return nn.relu(nn.Dense(self.dense, kernel_init=_conv_init())(x))


class MinAtarCNN(nn.Module):
    """The MinAtar paper's network: conv 16 3x3/1 (VALID), ReLU, then a dense layer."""

    dense: int = 128

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Conv(16, (3, 3), (1, 1), "VALID", kernel_init=_conv_init())(x))
        x = x.reshape((x.shape[0], -1))
        return nn.relu(nn.Dense(self.dense, kernel_init=_conv_init())(x))


class _ResidualBlock(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        y = nn.Conv(channels, (3, 3), padding="SAME", kernel_init=_conv_init())(nn.relu(x))
        y = nn.Conv(channels, (3, 3), padding="SAME", kernel_init=_conv_init())(nn.relu(y))
        return x + y


class ImpalaCNN(nn.Module):
    """The IMPALA ResNet: per stage a 3x3 conv, a 3x3/2 max-pool and two residual blocks
    (channels 16, 32, 32), then ReLU and a dense layer."""

    dense: int = 256
    channels: Sequence[int] = (16, 32, 32)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for channels in self.channels:
            x = nn.Conv(channels, (3, 3), padding="SAME", kernel_init=_conv_init())(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = _ResidualBlock()(x)
            x = _ResidualBlock()(x)
        x = nn.relu(x).reshape((x.shape[0], -1))
        return nn.relu(nn.Dense(self.dense, kernel_init=_conv_init())(x))


def image_to_hwc(x: jax.Array, layout: str) -> jax.Array:
    """An image batch ``(B, ...)`` in HWC, its dtype kept."""
    return jnp.moveaxis(x, 1, -1) if image_layout(x.shape[1:], layout) == "chw" else x


def image_to_float(x: jax.Array, layout: str) -> jax.Array:
    """An image batch ``(B, ...)`` as float32 HWC: uint8 scaled by 1/255, others cast."""
    if image_layout(x.shape[1:], layout) == "chw":
        x = jnp.moveaxis(x, 1, -1)
    if x.dtype == jnp.uint8:
        return x.astype(jnp.float32) / 255.0
    return x.astype(jnp.float32)


CODE_FEATURES = 8
"""Width of the embedding of each code of a grid of codes (``CodeEmbedding``)."""


class CodeEmbedding(nn.Module):
    """A grid of codes ``(B, H, W, C)`` to features: each channel's code (0 to its ``high``,
    clipped) looked up in an embedding of its own, then every cell's embeddings flattened:
    ``(B, H * W * C * features)``. MiniGrid's object, colour and state ids are names, not
    intensities, so they are embedded rather than scaled.

    Attributes:
        highs: The largest code of each channel (the leaf's ``high``).
        features: Width of each code's embedding.
    """

    highs: tuple[int, ...]
    features: int = CODE_FEATURES

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        highs = jnp.asarray(self.highs, jnp.int32)
        offsets = jnp.cumsum(jnp.concatenate([jnp.zeros(1, jnp.int32), highs[:-1] + 1]))
        index = jnp.clip(x.astype(jnp.int32), 0, highs) + offsets
        embedded = nn.Embed(int(sum(self.highs)) + len(self.highs), self.features)(index)
        return embedded.reshape((x.shape[0], -1))


def code_highs(leaf: spaces.Box, layout: str) -> tuple[int, ...]:
    """The largest code of each channel of a grid of codes (its ``high``, HWC)."""
    high = leaf.high if image_layout(leaf.shape, layout) == "hwc" else np.moveaxis(leaf.high, 0, -1)
    return tuple(int(h) for h in high.reshape((-1, high.shape[-1])).max(axis=0))


def encode_leaf(leaf: spaces.Leaf, x: jax.Array) -> jax.Array:
    """The parameter-free encoding ``(B, F)`` of a non-image leaf ``x`` of shape ``(B, ...)``."""
    batch = x.shape[0]
    if isinstance(leaf, spaces.Discrete):
        return jax.nn.one_hot(x, leaf.n, dtype=jnp.float32)
    if isinstance(leaf, spaces.MultiDiscrete):
        parts = [jax.nn.one_hot(x[:, i], n, dtype=jnp.float32) for i, n in enumerate(leaf.nvec)]
        return jnp.concatenate(parts, axis=-1)
    return x.reshape((batch, -1)).astype(jnp.float32)


class ObsEncoder(nn.Module):
    """Every leaf of an observation to features, concatenated in tree order.

    Attributes:
        leaves: The observation space's leaf specs, in tree order.
        cnn: The image torso (a name of the registry ``torsos``).
        cnn_dense: Width of the CNN's final dense layer.
        layout: How image axes are read (``IMAGE_LAYOUTS``).
        encoding: How integer images are read (``image_encoding``: pixels or codes,
            ``is_code_grid`` of ``core/spaces.py``).
    """

    leaves: tuple[spaces.Leaf, ...]
    cnn: str = "nature"
    cnn_dense: int = 512
    layout: str = "auto"
    encoding: str = "auto"

    @nn.compact
    def __call__(self, obs: Sequence[jax.Array]) -> jax.Array:
        features = []
        for i, (leaf, x) in enumerate(zip(self.leaves, obs, strict=True)):
            if spaces.is_code_grid(leaf, self.encoding):
                grid = image_to_hwc(x, self.layout)
                embed = CodeEmbedding(code_highs(leaf, self.layout), name=f"codes_{i}")
                features.append(embed(grid))
            elif spaces.is_image(leaf):
                torso = get_torso(self.cnn)
                image = image_to_float(x, self.layout)  # HWC
                if torso.layout == "chw":
                    image = jnp.moveaxis(image, -1, 1)
                features.append(torso.build(f"cnn_{i}", dense=self.cnn_dense)(image))
            else:
                features.append(encode_leaf(leaf, x))
        return features[0] if len(features) == 1 else jnp.concatenate(features, axis=-1)

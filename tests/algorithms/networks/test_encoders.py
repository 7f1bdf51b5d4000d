"""Observation encoders: exact output shapes and dtypes of every torso, exact encodings of the
parameter-free leaves, image layouts and scaling, and the refusal of a CNN that does not fit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cold_programs import init_and_apply

from batchppo.algorithms.networks.encoders import (
    ImpalaCNN,
    MinAtarCNN,
    NatureCNN,
    ObsEncoder,
    check_cnn,
    encode_leaf,
    hwc_shape,
    image_to_float,
)
from batchppo.core import spaces


def _output_shape(module, x):
    """The shape and dtype of ``module``'s output on ``x`` at its initial parameters, traced
    (``jax.eval_shape``): nothing compiled."""

    def output(x):
        return module.apply(module.init(jax.random.key(0), x), x)

    return jax.eval_shape(output, x)


@pytest.mark.parametrize(
    ("module", "shape", "out"),
    [
        (NatureCNN(), (84, 84, 4), 512),
        (NatureCNN(dense=64), (36, 36, 1), 64),
        (ImpalaCNN(), (64, 64, 3), 256),
        (MinAtarCNN(), (10, 10, 4), 128),
    ],
)
def test_cnn_output_shapes_and_dtypes(module, shape, out):
    y = _output_shape(module, jax.ShapeDtypeStruct((3, *shape), jnp.float32))
    assert y.shape == (3, out) and y.dtype == jnp.float32


def test_image_layouts_and_uint8_scaling():
    assert hwc_shape((84, 84, 4), "auto") == (84, 84, 4)
    assert hwc_shape((4, 84, 84), "auto") == (84, 84, 4)
    assert hwc_shape((10, 10, 4), "auto") == (10, 10, 4)
    assert hwc_shape((3, 3, 3), "chw") == (3, 3, 3)
    chw = jnp.arange(2 * 3 * 4 * 5, dtype=jnp.uint8).reshape((2, 3, 4, 5))
    hwc = image_to_float(chw, "chw")
    assert hwc.shape == (2, 4, 5, 3) and hwc.dtype == jnp.float32
    # XLA may divide as a product with 1/255: equal to float32 rounding.
    want = np.moveaxis(np.asarray(chw), 1, -1) / np.float32(255.0)
    np.testing.assert_allclose(hwc, want, rtol=1e-6, atol=0)
    frame = jnp.array([[[[0], [255]]]], jnp.uint8)
    np.testing.assert_array_equal(image_to_float(frame, "hwc"), [[[[0.0], [1.0]]]])
    grid = jnp.array([[[[True], [False]]]])
    np.testing.assert_array_equal(image_to_float(grid, "hwc"), [[[[1.0], [0.0]]]])


def test_parameter_free_encodings_are_exact():
    one_hot = encode_leaf(spaces.Discrete(3), jnp.array([2, 0], jnp.int32))
    np.testing.assert_array_equal(one_hot, [[0, 0, 1], [1, 0, 0]])
    multi = encode_leaf(spaces.MultiDiscrete((2, 3)), jnp.array([[1, 2], [0, 0]], jnp.int32))
    np.testing.assert_array_equal(multi, [[0, 1, 0, 0, 1], [1, 0, 1, 0, 0]])
    bits = encode_leaf(spaces.MultiBinary(3), jnp.array([[1, 0, 1]], jnp.int8))
    assert bits.dtype == jnp.float32
    np.testing.assert_array_equal(bits, [[1.0, 0.0, 1.0]])
    board = encode_leaf(spaces.box((2, 2), np.int32), jnp.array([[[1, 2], [3, 4]]], jnp.int32))
    assert board.dtype == jnp.float32
    np.testing.assert_array_equal(board, [[1.0, 2.0, 3.0, 4.0]])


def test_obs_encoder_concatenates_leaves_in_tree_order():
    tree = {
        "frame": spaces.box((36, 36, 2), np.uint8, 0, 255),
        "mode": spaces.Discrete(4),
        "pos": spaces.box((3,), np.float32),
    }
    leaves = tuple(spaces.leaves(tree))
    encoder = ObsEncoder(leaves, "nature", 32)
    x = [
        jnp.zeros((5, 36, 36, 2), jnp.uint8),
        jnp.full((5,), 1, jnp.int32),
        jnp.ones((5, 3), jnp.float32),
    ]
    params, y = init_and_apply(encoder, jax.random.key(0), x)
    assert list(params["params"]) == ["cnn_0"]
    assert y.shape == (5, 32 + 4 + 3) and y.dtype == jnp.float32
    np.testing.assert_array_equal(y[:, 32:], np.tile([0, 1, 0, 0, 1, 1, 1], (5, 1)))


def test_cnn_that_does_not_fit_the_image_is_refused_in_one_line():
    with pytest.raises(spaces.UnsupportedSpaceError) as info:
        check_cnn("nature", (10, 10, 4), "auto", " (10, 10, 4)")
    assert str(info.value) == (
        "cnn='nature' does not fit the 10x10 image observation (10, 10, 4); use cnn='minatar' "
        "(fits: ['minatar', 'impala'])."
    )
    check_cnn("nature", (4, 84, 84), "auto", "")

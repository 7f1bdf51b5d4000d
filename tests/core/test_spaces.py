"""Space trees: leaves, tree order, the EnvSpec derived both ways, casts, and the one-line
error for a space the env API does not carry (the backends' converters are tested with their
backends)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.core import spaces
from batchppo.core.env import EnvSpec


def test_tree_order_and_leaf_predicates():
    tree = {
        "pos": spaces.box((3,), np.float64, -1.0, 1.0),
        "frame": spaces.box((84, 84, 4), np.uint8, 0, 255),
        "count": spaces.box((2,), np.int64, 0, 9),
        "pair": (spaces.Discrete(2), spaces.box((1,), np.float32, 0, 1)),
        "bits": spaces.MultiBinary(4),
    }
    # 64-bit leaves are narrowed; bounds are float32 copies of the leaf's shape.
    assert tree["pos"].dtype == np.float32 and tree["count"].dtype == np.int32
    assert tree["pos"].low.dtype == np.float32
    np.testing.assert_array_equal(tree["pos"].low, [-1.0, -1.0, -1.0])
    # JAX's tree order: dict keys sorted, tuples in order.
    assert spaces.leaf_paths(tree) == [
        "['bits']", "['count']", "['frame']", "['pair'][0]", "['pair'][1]", "['pos']",
    ]  # fmt: skip
    assert spaces.leaf_paths(spaces.Discrete(3)) == [""]
    assert spaces.is_image(tree["frame"]) and not spaces.is_float_vector(tree["frame"])
    assert spaces.is_float_vector(tree["pos"]) and not spaces.is_float_vector(tree["count"])


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "",
            "observation space: space Text(1, 5) is not supported; supported: Box (any dtype "
            "and rank), Discrete (start 0), MultiDiscrete and MultiBinary, nested in Dict and "
            "Tuple.",
        ),
        (
            "['a'][1]",
            "observation space: space Text(1, 5) at ['a'][1] is not supported; supported: Box "
            "(any dtype and rank), Discrete (start 0), MultiDiscrete and MultiBinary, nested in "
            "Dict and Tuple.",
        ),
    ],
)
def test_unsupported_names_the_space_where_it_sits_and_what_works(path, message):
    error = spaces.unsupported("Text(1, 5)", path, "observation space")
    assert isinstance(error, spaces.UnsupportedSpaceError) and isinstance(error, ValueError)
    assert str(error) == message


def test_env_spec_flat_fields_derive_from_spaces_and_back():
    obs = spaces.box((3,), np.float32, -1.0, 1.0)
    spec = EnvSpec.from_spaces(obs, spaces.Discrete(4))
    assert (spec.obs_shape, spec.discrete, spec.num_actions, spec.action_shape) == (
        (3,), True, 4, ()
    )  # fmt: skip
    np.testing.assert_array_equal(spec.obs_high, [1.0, 1.0, 1.0])
    nested = EnvSpec.from_spaces({"a": obs}, spaces.MultiDiscrete((2, 2)))
    assert nested.obs_shape is None and nested.obs_dtype is None
    assert not nested.discrete and nested.num_actions == 0 and nested.action_shape == (2,)
    legacy = EnvSpec((2,), jnp.float32, (1,), jnp.float32, False)
    assert isinstance(legacy.obs_space, spaces.Box) and legacy.obs_space.shape == (2,)
    assert legacy.action_space.dtype == np.float32 and legacy.action_space.shape == (1,)
    assert EnvSpec((4,), jnp.float32, (), jnp.int32, True, num_actions=3).action_space.n == 3


def test_cast_flatten_and_structs_follow_the_tree():
    tree = {"b": spaces.Discrete(3), "a": spaces.box((2,), np.uint8, 0, 255)}
    value = {"a": [[1, 2]], "b": np.array([2], np.int64)}
    cast = spaces.cast(tree, value)
    assert cast["a"].dtype == np.uint8 and cast["b"].dtype == np.int32
    assert [x.tolist() for x in spaces.flatten(tree, cast)] == [[[1, 2]], [2]]
    structs = spaces.structs(tree, (5,))
    assert structs["a"] == jax.ShapeDtypeStruct((5, 2), jnp.uint8)
    assert structs["b"] == jax.ShapeDtypeStruct((5,), jnp.int32)


def test_cast_actions_checks_structure_and_shape():
    tree = (spaces.Discrete(3), spaces.box((2,), np.float32))
    ok = spaces.cast_actions(tree, (jnp.zeros(4, jnp.float32), jnp.zeros((4, 2))), 4, "Env")
    assert ok[0].dtype == jnp.int32
    with pytest.raises(ValueError, match=r"^Env.step: action shape \(3, 2\), expected \(4, 2\).$"):
        spaces.cast_actions(tree, (jnp.zeros(4), jnp.zeros((3, 2))), 4, "Env")
    with pytest.raises(ValueError, match=r"does not match the action space"):
        spaces.cast_actions(tree, jnp.zeros(4), 4, "Env")

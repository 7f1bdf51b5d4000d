"""Atomic save / restore of whole training states."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import struct

from batchppo.experiment import checkpoint as ckpt
from batchppo.experiment import fileio
from batchppo.experiment.errors import CheckpointError


@struct.dataclass
class State:
    params: dict
    opt_state: object
    key: jax.Array
    raw_key: jax.Array
    beta: jax.Array
    step: jax.Array


def make_state(seed: int, width: int = 3) -> State:
    params = {"w": jnp.arange(width, dtype=jnp.float32) + seed, "b": jnp.zeros((2,), jnp.float32)}
    opt = optax.adam(1e-3)
    opt_state = opt.init(params)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    _, opt_state = opt.update(grads, opt_state, params)
    return State(
        params=params,
        opt_state=opt_state,
        key=jax.random.key(seed),
        raw_key=jax.random.PRNGKey(seed),
        beta=jnp.float32(1.5 + seed),
        step=jnp.int32(100 * seed),
    )


def assert_same(a, b):
    a = jax.tree_util.tree_map(
        lambda x: (
            jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        ),
        a,
    )
    b = jax.tree_util.tree_map(
        lambda x: (
            jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        ),
        b,
    )
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_restores_every_leaf_with_typed_keys(tmp_path):
    state = make_state(3)
    path = ckpt.save_checkpoint(tmp_path, state, step=300, meta={"wall_time": 12.5})
    assert path.name == "ckpt-000000000300.msgpack"
    restored, meta = ckpt.restore_checkpoint(path, make_state(0))
    assert_same(restored, state)
    assert meta == {"format": ckpt.FORMAT_VERSION, "step": 300, "wall_time": 12.5}
    assert jax.dtypes.issubdtype(restored.key.dtype, jax.dtypes.prng_key)
    # The restored key continues the same random stream.
    np.testing.assert_array_equal(
        jax.random.uniform(restored.key, (4,)), jax.random.uniform(state.key, (4,))
    )
    assert isinstance(restored.opt_state[0], optax.ScaleByAdamState)
    assert int(restored.opt_state[0].count) == 1


def test_keep_last_k_and_no_temporary_files(tmp_path):
    (tmp_path / ".ckpt-000000000001.msgpack.abc.tmp").write_bytes(b"torn")  # an old kill
    for step in (10, 20, 30, 40):
        ckpt.save_checkpoint(tmp_path, make_state(step // 10), step, keep=2)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [30, 40]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt-000000000030.msgpack",
        "ckpt-000000000040.msgpack",
    ]
    assert ckpt.latest_checkpoint(tmp_path)[0] == 40
    assert ckpt.find_checkpoint(tmp_path, 30)[0] == 30


def test_find_checkpoint_errors_name_what_exists(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        ckpt.find_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        ckpt.find_checkpoint(tmp_path / "missing")
    ckpt.save_checkpoint(tmp_path, make_state(1), 10)
    with pytest.raises(CheckpointError, match=r"no checkpoint at step 5 .*available steps: 10"):
        ckpt.find_checkpoint(tmp_path, 5)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: b"not msgpack at all",
        lambda data: b"",
    ],
)
def test_corrupt_checkpoint_is_a_one_line_error(tmp_path, damage):
    path = ckpt.save_checkpoint(tmp_path, make_state(1), 10)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError) as info:
        ckpt.restore_checkpoint(path, make_state(0))
    assert str(info.value).startswith(f"corrupt or incompatible checkpoint {path}")
    assert "\n" not in str(info.value)


def test_checkpoint_of_another_shape_is_refused(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, make_state(1, width=5), 10)
    with pytest.raises(CheckpointError, match=r"shape \(5,\) where \(3,\) expected"):
        ckpt.restore_checkpoint(path, make_state(0, width=3))


def test_missing_checkpoint_file(tmp_path):
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        ckpt.restore_checkpoint(tmp_path / "ckpt-000000000001.msgpack", make_state(0))


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    fileio.atomic_write_bytes(path, b"old")

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(fileio.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        fileio.atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def grown_state(optional: tuple[str, ...]) -> type:
    """``State`` with a field added later that older checkpoints lack."""

    @struct.dataclass
    class GrownState:
        params: dict
        opt_state: object
        key: jax.Array
        raw_key: jax.Array
        beta: jax.Array
        step: jax.Array
        running: jax.Array

        RESTORE_DEFAULTS = optional

    return GrownState


def test_a_field_added_later_restores_from_the_fresh_state(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, make_state(3), step=300)
    fresh = grown_state(("running",))(**vars(make_state(0)), running=jnp.full((2,), 7.0))
    restored, _ = ckpt.restore_checkpoint(path, fresh)
    np.testing.assert_array_equal(restored.running, [7.0, 7.0])
    assert_same(restored.params, make_state(3).params)
    # Only declared fields may be missing: anything else is still an incompatible checkpoint.
    strict = grown_state(())(**vars(make_state(0)), running=jnp.full((2,), 7.0))
    with pytest.raises(CheckpointError, match="corrupt or incompatible checkpoint"):
        ckpt.restore_checkpoint(path, strict)

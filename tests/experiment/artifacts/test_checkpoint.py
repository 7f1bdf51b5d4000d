"""Atomic save / restore of whole training states."""

from __future__ import annotations

import errno
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization, struct

from batchppo.experiment import fileio
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.errors import CheckpointError, CorruptCheckpointError


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


# --- Integrity (issue 24): checksums, the newest good checkpoint, a full disk ----------------


def _flip_a_byte_of_a_param(path, seed):
    """Damage that still unpacks: one byte of params.w's float data (of ``make_state(seed)``)
    changes."""
    data = bytearray(path.read_bytes())
    at = bytes(data).find((np.arange(3, dtype=np.float32) + seed).tobytes())
    assert at > 0
    data[at + 1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_flipped_bit_is_caught_by_the_checksum(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, make_state(0), 10)
    _flip_a_byte_of_a_param(path, 0)
    with pytest.raises(CorruptCheckpointError) as info:
        ckpt.restore_checkpoint(path, make_state(0))
    assert str(info.value) == (
        f"corrupt or incompatible checkpoint {path}: its SHA-256 does not match the one "
        "stored with it"
    )


def test_a_checkpoint_written_before_checksums_loads_with_a_warning(tmp_path):
    state = make_state(2)
    payload = {
        "meta": {"format": ckpt.FORMAT_VERSION, "step": 200},
        "state": serialization.to_state_dict(ckpt.to_host(state)),
    }
    path = ckpt.checkpoint_path(tmp_path, 200)
    path.write_bytes(serialization.msgpack_serialize(payload))  # the format before checksums
    with pytest.warns(ckpt.UnverifiedCheckpointWarning) as warned:
        restored, meta = ckpt.restore_checkpoint(path, make_state(0))
    assert str(warned[0].message) == (
        f"checkpoint {path} has no checksum (written before checkpoints carried one); loaded "
        "unverified"
    )
    assert_same(restored, state)
    assert meta == {"format": ckpt.FORMAT_VERSION, "step": 200}


def test_resume_takes_the_newest_checkpoint_that_verifies_and_moves_the_others_aside(tmp_path):
    for step in (10, 20, 30):
        ckpt.save_checkpoint(tmp_path, make_state(step // 10), step)
    newest = ckpt.checkpoint_path(tmp_path, 30)
    newest.write_bytes(newest.read_bytes()[:100])  # torn
    _flip_a_byte_of_a_param(ckpt.checkpoint_path(tmp_path, 20), 2)
    lines = []
    state, meta, step = ckpt.restore_newest(tmp_path, make_state(0), lines.append)
    assert step == 10 and meta["step"] == 10
    assert_same(state, make_state(1))
    corrupt = tmp_path / "corrupt"
    assert lines[0].startswith(
        f"skipped the checkpoint at step 30: corrupt or incompatible checkpoint {newest}: "
    )
    assert lines[0].endswith(f"; moved it to {corrupt}")
    assert lines[1] == (
        "skipped the checkpoint at step 20: corrupt or incompatible checkpoint "
        f"{ckpt.checkpoint_path(tmp_path, 20)}: its SHA-256 does not match the one stored "
        f"with it; moved it to {corrupt}"
    )
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [10]
    assert [s for s, _ in ckpt.list_checkpoints(corrupt)] == [20, 30]  # moved, not deleted


def test_a_damaged_checkpoint_whose_name_is_taken_in_corrupt_gets_a_free_name(tmp_path):
    # A run resumed from step 10 saves step 20 again, and that copy is damaged too: the copy
    # moved aside first stays as it was.
    ckpt.save_checkpoint(tmp_path, make_state(1), 10)
    corrupt = tmp_path / "corrupt"
    copies = []
    for n in range(3):
        path = ckpt.save_checkpoint(tmp_path, make_state(2), 20)
        path.write_bytes(f"damaged copy {n}".encode())
        lines = []
        _, _, step = ckpt.restore_newest(tmp_path, make_state(0), lines.append)
        assert step == 10
        copies.append(lines[0])
    name = ckpt.checkpoint_path(tmp_path, 20).name  # ckpt-<step, zero-padded>.msgpack
    second, third = name.replace(".msgpack", "-2.msgpack"), name.replace(".msgpack", "-3.msgpack")
    assert copies[0].endswith(f"; moved it to {corrupt}")
    assert copies[1].endswith(
        f"; moved it to {corrupt} as {second} (an earlier damaged copy has its name)"
    )
    assert copies[2].endswith(
        f"; moved it to {corrupt} as {third} (an earlier damaged copy has its name)"
    )
    assert {p.name: p.read_bytes() for p in corrupt.iterdir()} == {
        name: b"damaged copy 0",
        second: b"damaged copy 1",
        third: b"damaged copy 2",
    }
    assert [s for s, _ in ckpt.list_checkpoints(corrupt)] == [20]  # each step counted once


def test_when_no_checkpoint_verifies_resume_stops_with_one_line_naming_the_fix(tmp_path):
    for step in (10, 20):
        path = ckpt.save_checkpoint(tmp_path, make_state(1), step)
        path.write_bytes(b"")
    message = (
        f"no checkpoint in {tmp_path} verifies (steps 10, 20 are damaged and were moved to "
        f"{tmp_path / 'corrupt'}); start a new run (another --timestamp), or delete "
        f"{tmp_path / 'corrupt'} to train this run again from step 0"
    )
    for _ in range(2):  # and again: the run does not silently start over from step 0
        with pytest.raises(CheckpointError) as info:
            ckpt.restore_newest(tmp_path, make_state(0))
        assert str(info.value) == message
    assert ckpt.restore_newest(tmp_path / "fresh", make_state(0)) is None  # nothing saved yet


def test_a_checkpoint_that_verifies_but_does_not_fit_is_not_moved(tmp_path):
    ckpt.save_checkpoint(tmp_path, make_state(1, width=5), 10)
    with pytest.raises(CheckpointError, match=r"shape \(5,\) where \(3,\) expected"):
        ckpt.restore_newest(tmp_path, make_state(0, width=3))
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [10]
    assert not (tmp_path / "corrupt").exists()


def test_a_full_disk_during_a_checkpoint_leaves_the_previous_one_intact(tmp_path, monkeypatch):
    ckpt.save_checkpoint(tmp_path, make_state(1), 10)

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fileio.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        ckpt.save_checkpoint(tmp_path, make_state(2), 20, keep=1)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000010.msgpack"]
    state, _, step = ckpt.restore_newest(tmp_path, make_state(0))
    assert step == 10
    assert_same(state, make_state(1))

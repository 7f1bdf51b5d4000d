"""Atomic checkpoints of the whole training state.

A checkpoint is one msgpack file ``ckpt-<step>.msgpack`` holding the TrainState's state dict
(params, optimiser state, normalisers, KL penalty beta, RNG key, step counters; see
``flax.serialization``) next to a small ``meta`` mapping (format version, step, wall time).
It is written to a temporary file in the same directory, fsynced and renamed over the final
name, so a reader (or a run killed with SIGKILL at any moment) only ever sees complete files.
Only the newest ``keep`` checkpoints are kept.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from batchppo.experiment.errors import CheckpointError
from batchppo.experiment.fileio import atomic_write_bytes

FORMAT_VERSION = 1
_NAME = re.compile(r"^ckpt-(\d+)\.msgpack$")

T = TypeVar("T")


def checkpoint_path(directory: str | Path, step: int) -> Path:
    """The file name of the checkpoint at env step ``step``."""
    return Path(directory) / f"ckpt-{step:012d}.msgpack"


def list_checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """All complete checkpoints in ``directory`` as ``(step, path)``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(directory: str | Path) -> tuple[int, Path] | None:
    """The newest checkpoint as ``(step, path)``, or None when there is none."""
    found = list_checkpoints(directory)
    return found[-1] if found else None


def find_checkpoint(directory: str | Path, step: int | None = None) -> tuple[int, Path]:
    """The checkpoint at ``step`` (the newest when None).

    Raises:
        CheckpointError: No checkpoint (at that step) in ``directory``; lists what exists.
    """
    found = list_checkpoints(directory)
    if not found:
        raise CheckpointError(f"no checkpoint in {directory}")
    if step is None:
        return found[-1]
    for s, path in found:
        if s == step:
            return s, path
    steps = ", ".join(str(s) for s, _ in found)
    raise CheckpointError(f"no checkpoint at step {step} in {directory}; available steps: {steps}")


def _with_restore_defaults(template: Any, state_dict: Any) -> Any:
    """Fills the fields ``template`` declares optional (``RESTORE_DEFAULTS``) where missing.

    A state class lists there the fields added after checkpoints were first written whose
    fresh value is exact on resume, so that older checkpoints still restore.
    """
    optional = getattr(template, "RESTORE_DEFAULTS", ())
    missing = [name for name in optional if isinstance(state_dict, dict) and name not in state_dict]
    if not missing:
        return state_dict
    fresh = serialization.to_state_dict(template)
    return {**state_dict, **{name: fresh[name] for name in missing}}


def _to_host(tree: Any) -> Any:
    # Typed PRNG keys are not msgpack-serialisable; store their raw uint32 data instead.
    def leaf(x: Any) -> Any:
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return np.asarray(jax.random.key_data(x))
        return np.asarray(x) if isinstance(x, jax.Array) else x

    return jax.tree_util.tree_map(leaf, tree)


def save_checkpoint(
    directory: str | Path,
    state: Any,
    step: int,
    keep: int | None = None,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Saves ``state`` atomically as the checkpoint at ``step`` and prunes old ones.

    Args:
        directory: The checkpoint directory (created if missing).
        state: The TrainState (any pytree ``flax.serialization`` knows).
        step: Env steps of ``state``; names the file.
        keep: Keep only the newest ``keep`` checkpoints; None keeps all.
        meta: Extra plain values stored with the state (e.g. wall time).

    Returns:
        The path written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    payload = {
        "meta": {"format": FORMAT_VERSION, "step": int(step), **(meta or {})},
        "state": serialization.to_state_dict(_to_host(state)),
    }
    path = checkpoint_path(directory, step)
    atomic_write_bytes(path, serialization.msgpack_serialize(payload))
    # Leftovers of writes interrupted by a kill: never complete, safe to drop.
    for stale in directory.glob(".ckpt-*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
    if keep is not None and keep > 0:
        for _, old in list_checkpoints(directory)[:-keep]:
            with contextlib.suppress(OSError):
                old.unlink()
    return path


def _like_template(template: Any, restored: Any) -> Any:
    # Back to device arrays of the template's dtypes; typed PRNG keys re-wrapped from raw data.
    def leaf(t: Any, r: Any) -> Any:
        if isinstance(t, jax.Array) and jax.dtypes.issubdtype(t.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(np.asarray(r), impl=jax.random.key_impl(t))
        if isinstance(t, (jax.Array, np.ndarray)):
            return jnp.asarray(np.asarray(r, dtype=t.dtype))
        return r

    return jax.tree_util.tree_map(leaf, template, restored)


def restore_checkpoint(path: str | Path, template: T) -> tuple[T, dict[str, Any]]:
    """Restores a checkpoint into the structure of ``template``.

    Args:
        path: A file written by :func:`save_checkpoint`.
        template: A TrainState of the same structure, e.g. ``trainer.init(key)``.

    Returns:
        ``(state, meta)``.

    Raises:
        CheckpointError: Missing, unreadable, corrupt, or of another structure or shape (e.g.
            written by a run with other network sizes).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error.strerror or error}") from None
    try:
        payload = serialization.msgpack_restore(data)
        meta, state_dict = payload["meta"], payload["state"]
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT_VERSION}")
        host_template = _to_host(template)
        state_dict = _with_restore_defaults(host_template, state_dict)
        restored = serialization.from_state_dict(host_template, state_dict)
        for want, got in zip(
            jax.tree_util.tree_leaves(host_template),
            jax.tree_util.tree_leaves(restored),
            strict=True,
        ):
            if np.shape(want) != np.shape(got):
                raise ValueError(f"array of shape {np.shape(got)} where {np.shape(want)} expected")
    except Exception as error:  # msgpack, KeyError, ValueError, TypeError: all mean corrupt.
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CheckpointError(f"corrupt or incompatible checkpoint {path}: {reason}") from None
    return _like_template(template, restored), dict(meta)

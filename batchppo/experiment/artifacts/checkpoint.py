"""Atomic, checksummed checkpoints of the whole training state.

A checkpoint is one msgpack file ``ckpt-<step>.msgpack``. Its body is the msgpack of the
TrainState's state dict (params, optimiser state, normalisers, KL penalty beta, RNG key, step
counters; see ``flax.serialization``) next to a small ``meta`` mapping (format version, step, wall
time); the file wraps that body with its SHA-256 (``{"sha256": ..., "body": ...}``), so a file
damaged after it was written (a torn copy, a flipped bit, a truncated sync) is told from a good one
before anything is restored. Files written before checksums existed are the bare body: they still
load, with an ``UnverifiedCheckpointWarning``.

It is written to a temporary file in the same directory, fsynced and renamed over the final name, so
a reader (or a run killed with SIGKILL at any moment) only ever sees complete files, and a write
that fails (a full disk) leaves the earlier checkpoints as they were. Only the newest ``keep``
checkpoints are kept. ``restore_newest`` is what a resume uses: the newest checkpoint that verifies,
the damaged ones moved aside into ``corrupt/``.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import warnings
from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from batchppo.experiment.errors import CheckpointError, CorruptCheckpointError
from batchppo.experiment.fileio import atomic_write_bytes

FORMAT_VERSION = 1
"""Version of the body (``meta`` and ``state``); the checksummed wrapper does not change it."""
CORRUPT_DIR = "corrupt"
"""Where ``restore_newest`` moves checkpoints that do not verify (inside their dir)."""
_NAME = re.compile(r"^ckpt-(\d+)\.msgpack$")


class UnverifiedCheckpointWarning(UserWarning):
    """A checkpoint without a checksum (written before checksums existed) was loaded."""


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


def to_host(tree: Any) -> Any:
    """``tree`` as a checkpoint stores it: NumPy arrays, typed PRNG keys as their raw data.

    Typed PRNG keys are not msgpack-serialisable, so their uint32 key data is stored instead.
    """

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
        "state": serialization.to_state_dict(to_host(state)),
    }
    path = checkpoint_path(directory, step)
    body = serialization.msgpack_serialize(payload)
    digest = hashlib.sha256(body).hexdigest()
    atomic_write_bytes(path, serialization.msgpack_serialize({"sha256": digest, "body": body}))
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
        path: A file written by ``save_checkpoint``.
        template: A TrainState of the same structure, e.g. ``trainer.init(key)``.

    Returns:
        ``(state, meta)``.

    Raises:
        CorruptCheckpointError: Missing, unreadable or damaged (its checksum does not match,
            or it does not unpack).
        CheckpointError: Of another format, structure or shape (e.g. written by a run with
            other network sizes).
    """
    path = Path(path)
    payload = _read_payload(path)
    try:
        meta, state_dict = payload["meta"], payload["state"]
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT_VERSION}")
        host_template = to_host(template)
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


def _read_payload(path: Path) -> dict[str, Any]:
    """The body of checkpoint ``path`` (``meta`` and ``state``), its checksum verified.

    Raises:
        CorruptCheckpointError: Unreadable, not msgpack, or its SHA-256 does not match.
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CorruptCheckpointError(
            f"cannot read checkpoint {path}: {error.strerror or error}"
        ) from None
    try:
        outer = serialization.msgpack_restore(data)
        if not isinstance(outer, dict):
            raise ValueError(f"a {type(outer).__name__}, not a map")
        if "body" not in outer:  # written before checksums: the body itself
            warnings.warn(
                f"checkpoint {path} has no checksum (written before checkpoints carried one); "
                "loaded unverified",
                UnverifiedCheckpointWarning,
                stacklevel=3,
            )
            return outer
        body = outer["body"]
        if hashlib.sha256(body).hexdigest() != outer.get("sha256"):
            raise ValueError("its SHA-256 does not match the one stored with it")
        payload = serialization.msgpack_restore(body)
        if not isinstance(payload, dict):
            raise ValueError(f"a body of {type(payload).__name__}, not a map")
        return payload
    except Exception as error:  # msgpack, KeyError, TypeError, ValueError: all mean damaged.
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CorruptCheckpointError(
            f"corrupt or incompatible checkpoint {path}: {reason}"
        ) from None


def recorded_step(path: str | Path) -> int | None:
    """The step that checkpoint ``path`` records, its checksum verified; nothing is restored.

    Returns:
        The step of its ``meta``; None where the file does not verify or records no step.
    """
    try:
        meta = _read_payload(Path(path)).get("meta")
    except CorruptCheckpointError:
        return None
    step = meta.get("step") if isinstance(meta, dict) else None
    return step if isinstance(step, int) else None


def _aside_path(corrupt: Path, path: Path) -> Path:
    """Where damaged checkpoint ``path`` goes in ``corrupt``: under its own name, or, when an
    earlier damaged copy holds that name, ``ckpt-<step>-<n>.msgpack`` with the first free ``n`` from
    2 (a name ``list_checkpoints`` does not list, so each step counts once)."""
    target = corrupt / path.name
    n = 2
    while target.exists():
        target = corrupt / f"{path.stem}-{n}{path.suffix}"
        n += 1
    return target


def restore_newest(
    directory: str | Path, template: T, report: Any = None
) -> tuple[T, dict[str, Any], int] | None:
    """Restores the newest checkpoint in ``directory`` that verifies: what a resume uses.

    Damaged checkpoints (``CorruptCheckpointError``) are skipped and moved into
    ``<directory>/corrupt/`` (never deleted: a copy whose name an earlier damaged one holds gets a
    free name, ``ckpt-<step>-<n>.msgpack``), each named through ``report``. A checkpoint that
    verifies but does not fit ``template`` raises at once: every older one would not fit either.

    Args:
        directory: The checkpoint directory.
        template: A state of the run's structure.
        report: Called with one line per checkpoint skipped; None: no report.

    Returns:
        ``(state, meta, step)``, or None when the directory holds no checkpoint and none was
        ever moved aside (a run that has not saved yet).

    Raises:
        CheckpointError: None verifies (or only moved-aside ones are left): one line naming
            what was moved where and the fix; or the newest good one does not fit.
    """
    directory = Path(directory)
    corrupt = directory / CORRUPT_DIR
    skipped = []
    for step, path in reversed(list_checkpoints(directory)):
        try:
            state, meta = restore_checkpoint(path, template)
        except CorruptCheckpointError as error:
            corrupt.mkdir(exist_ok=True)
            target = _aside_path(corrupt, path)
            path.replace(target)
            skipped.append(step)
            if report is not None:
                renamed = (
                    ""
                    if target.name == path.name
                    else f" as {target.name} (an earlier damaged copy has its name)"
                )
                report(
                    f"skipped the checkpoint at step {step:,}: {error}; moved it to "
                    f"{corrupt}{renamed}"
                )
            continue
        return state, meta, step
    aside = list_checkpoints(corrupt)
    if not aside:
        return None
    steps = ", ".join(f"{s:,}" for s, _ in aside)
    raise CheckpointError(
        f"no checkpoint in {directory} verifies (steps {steps} are damaged and were moved to "
        f"{corrupt}); start a new run (another --timestamp), or delete {corrupt} to train this "
        "run again from step 0"
    )

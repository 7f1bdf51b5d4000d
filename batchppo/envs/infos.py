"""Info batching: per-env info dicts to Gymnasium's dict-of-arrays form, and merging.

Each worker (or Ray actor, or the parent's own group) batches the infos of its envs with
``batch_infos``; the parent merges the parts of all groups into one dict over the whole batch with
``merge_info_parts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np

__all__ = ["batch_infos", "merge_info_parts"]


def batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Batches per-env info dicts into Gymnasium's dict-of-arrays form (with ``_key`` masks).

    Takes a fast path when every env returned the same keys with scalar values (the common
    case, e.g. MuJoCo's per-step infos); anything else goes through Gymnasium's own
    ``VectorEnv._add_info``.

    Args:
        infos: One info dict per env (empty dicts allowed).

    Returns:
        ``{key: array of len(infos), "_key": bool mask, ...}``; ``{}`` if all infos are empty.
    """
    n = len(infos)
    if not any(infos):
        return {}
    first = infos[0]
    keys = first.keys()
    if all(info.keys() == keys for info in infos) and all(
        isinstance(v, (bool, int, float, np.number, np.bool_)) for v in first.values()
    ):
        out: dict[str, Any] = {}
        try:
            for key in keys:
                values = np.array([info[key] for info in infos])
                if values.dtype == object:
                    raise TypeError
                out[key] = values
                out["_" + key] = np.ones(n, dtype=bool)
            return out
        except (TypeError, ValueError):
            pass
    return _slow_batch_infos(infos)


class _InfoBatcher(gymnasium.vector.VectorEnv):
    """Gives access to Gymnasium's ``_add_info`` for a batch of a given size."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs


def _slow_batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    batcher = _InfoBatcher(len(infos))
    out: dict[str, Any] = {}
    for i, info in enumerate(infos):
        if info:
            out = batcher._add_info(out, info, i)
    return out


def merge_info_parts(parts: Sequence[tuple[int, int, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Merges batched info dicts of consecutive env ranges into one dict over all ``n`` envs.

    Args:
        parts: ``(offset, count, batched_info)`` for each range of envs.
        n: Total number of envs.

    Returns:
        A batched info dict of length ``n`` (masks False where a part had no entry).
    """
    parts = [p for p in parts if p[2]]
    if not parts:
        return {}
    if len(parts) == 1 and parts[0][0] == 0 and parts[0][1] == n:
        return parts[0][2]
    out: dict[str, Any] = {}
    for offset, count, info in parts:
        for key, value in info.items():
            if isinstance(value, dict):
                continue  # nested dicts are merged below, by recursion
            if key not in out:
                if isinstance(value, np.ndarray):
                    out[key] = np.zeros((n, *value.shape[1:]), dtype=value.dtype)
                else:
                    out[key] = np.full(n, None, dtype=object)
            elif isinstance(value, np.ndarray) and out[key].dtype != value.dtype:
                out[key] = out[key].astype(np.result_type(out[key], value))
            out[key][offset : offset + count] = value
        for key, value in info.items():
            if isinstance(value, dict):
                out.setdefault(key, [])
                out[key].append((offset, count, value))
    for key, value in list(out.items()):
        if isinstance(value, list):
            out[key] = merge_info_parts(value, n)
    for key in list(out.keys()):
        if not key.startswith("_") and "_" + key not in out:
            out["_" + key] = np.zeros(n, dtype=bool)
    return out

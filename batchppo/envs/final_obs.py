"""The dense ``final_obs`` rule, in one place for every host batch env and adapter.

Same-step autoreset returns, for env ``i`` of a batch, ``obs[i]``: the first obs of the next
episode where an episode ended this step (``done[i] = terminated[i] | truncated[i]``), else
the next obs of the same episode. ``final_obs[i]`` is the obs the episode ended in where
``done[i]``, and ``obs[i]`` otherwise: a dense array with the batch's shapes, present at every
step, so a learner bootstraps ``V(final_obs)`` vectorised.

* ``fill_final_obs``: in place over preallocated arrays (``BatchEnv``'s shared memory).
* ``dense_final_obs``: a new array from a batch's obs, final obs and done flags (Ray).
* ``final_obs_from_infos``: from Gymnasium's sparse ``infos["final_obs"]`` object array and its mask
  ``infos["_final_obs"]`` (``HostEnv`` over any vector env).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["dense_final_obs", "fill_final_obs", "final_obs_from_infos"]


def _rows_mask(mask: np.ndarray, ndim: int) -> np.ndarray:
    """``mask`` of shape ``(n,)`` or ``(n, 1)`` as a view broadcasting over ``ndim``-d rows."""
    return mask.reshape((-1,) + (1,) * (ndim - 1))


def fill_final_obs(
    final_leaves: Sequence[np.ndarray],
    obs_leaves: Sequence[np.ndarray],
    done: np.ndarray,
    scratch: np.ndarray | None = None,
) -> None:
    """Writes ``obs`` into the rows of ``final_obs`` whose episode did not end, in place.

    The rows where ``done`` is set keep the final obs already written there.

    Args:
        final_leaves: Per leaf, the final obs ``(n, ...)``; written in place.
        obs_leaves: Per leaf, the obs ``(n, ...)``, in the same order.
        done: ``(n,)`` bool, the envs whose episode ended this step.
        scratch: Optional ``(n,)`` or ``(n, 1)`` bool buffer for ``not done``, so that the
            call allocates nothing.
    """
    if not done.any():  # every row continues its episode: one plain copy a leaf
        for final, obs in zip(final_leaves, obs_leaves, strict=True):
            np.copyto(final, obs)
        return
    if scratch is not None:
        done = done.reshape(scratch.shape)
    not_done = np.logical_not(done, out=scratch)
    rows = np.flatnonzero(not_done)
    for final, obs in zip(final_leaves, obs_leaves, strict=True):
        if final[:1].nbytes >= _ROW_COPY_BYTES:  # whole rows copied beat a per-element mask
            final[rows] = obs[rows]
        else:
            np.copyto(final, obs, where=_rows_mask(not_done, final.ndim))


_ROW_COPY_BYTES = 1024
"""Row size from which ``fill_final_obs`` copies the continuing rows by index: a mask is tested
element by element, which costs more than indexing for large rows (an Atari frame stack) and
less for small ones (a few floats)."""


def dense_final_obs(obs: np.ndarray, final_obs: np.ndarray, done: np.ndarray) -> np.ndarray:
    """A new array: ``final_obs`` where ``done``, ``obs`` elsewhere (rows of the batch).

    Args:
        obs: ``(n, ...)`` the obs returned by the step.
        final_obs: ``(n, ...)`` the final obs; only its ``done`` rows are read.
        done: ``(n,)`` bool, the envs whose episode ended this step.

    Returns:
        The dense final obs, ``(n, ...)``.
    """
    final = np.array(final_obs, copy=True)
    fill_final_obs([final], [obs], np.asarray(done, np.bool_))
    return final


def final_obs_from_infos(obs: Any, infos: Mapping[str, Any], dtype: Any = None) -> Any:
    """The dense final obs from Gymnasium's same-step infos.

    Args:
        obs: ``(n, ...)`` the obs returned by the step.
        infos: The step's infos; ``infos["_final_obs"]`` masks the envs whose episode ended
            and ``infos["final_obs"][i]`` holds env ``i``'s final obs.
        dtype: The dtype of the copy made when an episode ended (``obs``'s by default).

    Returns:
        ``obs`` itself where no episode ended (no mask or none set), else a copy of ``obs``
        (never a view of the env's buffers) with the ended rows replaced by their final obs.
    """
    mask = infos.get("_final_obs")
    if mask is None or not np.any(mask):
        return obs
    final = np.array(obs, dtype)
    rows = np.flatnonzero(mask)
    final[rows] = np.stack([np.asarray(infos["final_obs"][i]) for i in rows])
    return final

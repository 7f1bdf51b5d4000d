"""Invalid-action masking: an observation leaf that says which of a ``Discrete`` action's
values are allowed (``NetworkConfig.action_mask``), applied to the policy's logits.

Envs with a set of legal moves that changes from state to state (Jumanji's, PettingZoo's,
board games) put it in the observation as a boolean vector, ``action_mask``. Masking sets the
logits of the disallowed actions to ``MASKED_LOGIT`` wherever the policy is evaluated (acting,
the loss, evaluation, export), so the behaviour and the learned policy agree: a disallowed
action is never sampled nor the mean action, its probability is 0 (to float32), it adds nothing
to the entropy or the KL, and its logit gets no gradient (Huang and Ontañón 2022, "A Closer Look
at Invalid Action Masking in Policy Gradient Algorithms").
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from batchppo.algorithms.networks.heads import PAD_LOGIT
from batchppo.core import spaces
from batchppo.core.env import EnvSpec

__all__ = ["AUTO_MASK_KEY", "MASKED_LOGIT", "action_mask_leaf", "mask_logits"]

MASKED_LOGIT = PAD_LOGIT
"""The logit of a disallowed action: the heads' padding logit, whose probability is 0 in
float32."""
AUTO_MASK_KEY = "action_mask"
"""The observation key that ``action_mask: auto`` takes as the mask."""

PyTree = Any


def _last_key(path: tuple[Any, ...]) -> str | None:
    key = path[-1] if path else None
    return getattr(key, "key", None) if key is not None else None


def _fits(leaf: spaces.Leaf, n: int) -> bool:
    return isinstance(leaf, spaces.Box | spaces.MultiBinary) and tuple(leaf.shape) == (n,)


def action_mask_leaf(setting: str, spec: EnvSpec) -> int | None:
    """The index (in tree order) of the observation leaf that masks the action, or None.

    Args:
        setting: ``NetworkConfig.action_mask``: ``auto``, ``none`` or a Dict key.
        spec: The env's spec.

    Returns:
        The leaf's index among ``spaces.leaves(spec.obs_space)``; None with ``none``, or with
        ``auto`` where no leaf named ``action_mask`` fits the action.

    Raises:
        UnsupportedSpaceError: A named key that is missing, appears twice, does not fit a
            ``Discrete(n)`` action (a leaf of shape ``(n,)``), or an action that is not one
            ``Discrete`` (one line naming it and the fix).
    """
    if setting == "none":
        return None
    key = AUTO_MASK_KEY if setting == "auto" else setting
    paths, _ = jax.tree_util.tree_flatten_with_path(spec.obs_space)
    found = [i for i, (path, _) in enumerate(paths) if _last_key(path) == key]
    action = spaces.single(spec.action_space)
    if setting == "auto":
        ok = len(found) == 1 and isinstance(action, spaces.Discrete)
        if not ok or not _fits(spaces.leaves(spec.obs_space)[found[0]], action.n):
            return None
        return found[0]
    where = f"action_mask={setting!r}"
    if len(found) != 1:
        keys = [k for k in (_last_key(p) for p, _ in paths) if k is not None]
        count = "no observation leaf" if not found else f"{len(found)} observation leaves"
        raise spaces.UnsupportedSpaceError(
            f"{where}: {count} named {key!r} (keys: {keys}); name one, or set action_mask=none"
        )
    if not isinstance(action, spaces.Discrete):
        raise spaces.UnsupportedSpaceError(
            f"{where}: masks one Discrete action, not {spaces.describe(spec.action_space)}; "
            "set action_mask=none"
        )
    leaf = spaces.leaves(spec.obs_space)[found[0]]
    if not _fits(leaf, action.n):
        raise spaces.UnsupportedSpaceError(
            f"{where}: the leaf {spaces.describe(leaf)} does not fit Discrete({action.n}) (it "
            f"needs shape ({action.n},)); set action_mask=none"
        )
    return found[0]


def mask_logits(dist: PyTree, obs: PyTree, index: int) -> PyTree:
    """``dist`` (``{"logits": (..., n)}``) with the logits the observation's leaf ``index``
    disallows (a 0 or False) set to ``MASKED_LOGIT``."""
    allowed = jax.tree.leaves(obs)[index].astype(bool)
    logits = dist["logits"]
    return {**dist, "logits": jnp.where(allowed, logits, jnp.asarray(MASKED_LOGIT, logits.dtype))}

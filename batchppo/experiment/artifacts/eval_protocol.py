"""How a policy's evaluation score was measured: how its episodes acted, and how many there were.

A policy scores very differently with its mean (deterministic) action and with actions sampled
from it (HalfCheetah: thousands apart), so every score that ``train``, ``evaluate`` and ``plot``
print, log, draw or write names its protocol, as ``str(EvalProtocol)`` words it:
``"10 episodes, sampled actions"`` or ``"100 episodes, mean action"``.

A run's periodic evaluations follow its config (``eval_actions``, ``eval_episodes``); each eval
report of ``metrics.jsonl`` records its own (``actions``, ``episodes``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from batchppo.algorithms.run_config import EVAL_ACTIONS, RunConfig

ACTION_WORDS = {"mean": "mean action", "sampled": "sampled actions"}
"""How a protocol's action mode reads, by ``eval_actions`` value."""


@dataclasses.dataclass(frozen=True)
class EvalProtocol:
    """The protocol of an evaluation score.

    Attributes:
        actions: ``mean`` (the policy's deterministic action) or ``sampled`` (drawn from the
            policy, as in training).
        episodes: Episodes the score is the mean return of; None where it is not known (eval
            reports written before they recorded it).
    """

    actions: str
    episodes: int | None

    def __post_init__(self) -> None:
        if self.actions not in EVAL_ACTIONS:
            raise ValueError(f"actions={self.actions!r}: choose one of {EVAL_ACTIONS}")

    def __str__(self) -> str:
        words = ACTION_WORDS[self.actions]
        if self.episodes is None:
            return words
        return f"{self.episodes} episode{'s' * (self.episodes != 1)}, {words}"

    @classmethod
    def of_config(cls, config: RunConfig) -> EvalProtocol:
        """The protocol of a run's periodic evaluations (``eval_actions``, ``eval_episodes``)."""
        return cls(config.eval_actions, config.eval_episodes)

    @classmethod
    def of_record(cls, record: Mapping[str, Any]) -> EvalProtocol:
        """The protocol of an eval report (a ``metrics.jsonl`` record): its ``actions`` and
        ``episodes``. Reports written before they recorded ``actions`` acted with the mean
        action."""
        episodes = record.get("episodes")
        return cls(record.get("actions") or "mean", None if episodes is None else int(episodes))


def score_text(score: float | None, protocol: EvalProtocol | None) -> str:
    """A score with its protocol, ``"1738.36 (10 episodes, sampled actions)"``; ``"n/a"``
    without a score."""
    if score is None:
        return "n/a"
    return f"{score:.2f}" if protocol is None else f"{score:.2f} ({protocol})"

"""Every training episode that ended, handed from the compiled iteration to the host.

An agent's iteration returns, beside its scalar metrics, the rollout's per-step
[`EpisodeStats`][batchppo.core.EpisodeStats] under the metric ``ENDED`` (``episode_metrics``). The
trainer fetches them with the other metrics (one transfer per call) and lists the episodes that
ended as an [`EndedEpisodes`][batchppo.algorithms.training.episodes.EndedEpisodes]: each one's
return, length, how it ended and the env step at which it ended, in the order they ended. The
experiment layer writes them to the run's ``episodes.jsonl``
(``batchppo.experiment.artifacts.logging``), from which ``batchppo evaluate --training-window``
takes exactly the last N.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

ENDED = "ended"
"""The metric of an iteration that holds its ended episodes: the rollout's ``EpisodeStats``
(``(T, num_envs)`` arrays) in the compiled program, an ``EndedEpisodes`` on the host."""


@dataclasses.dataclass(frozen=True, eq=False)
class EndedEpisodes:
    """The episodes that ended in one training iteration, in the order they ended: by env
    step, then by env index within a step.

    Attributes:
        step: ``(n,)`` int64, the run's env step (summed over envs) at the end of the vector
            step in which each episode ended: the iteration's first step plus ``(t + 1) *
            num_envs`` for rollout step ``t``.
        score: ``(n,)`` float32, each episode's undiscounted return (as the rollout summed it).
        length: ``(n,)`` int64, each episode's steps.
        terminated: ``(n,)`` bool, ended in a terminal state.
        truncated: ``(n,)`` bool, cut by a time limit (an env may report both).
        end_step: The run's env step at the end of the iteration.
        games: ``(g,)`` float64, the raw scores (all lives, rewards unclipped) of the Atari
            games that ended during the trainer's call, on its last iteration (the env reports
            them once a call); empty elsewhere.
    """

    step: np.ndarray
    score: np.ndarray
    length: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    end_step: int
    games: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.float64))

    def __len__(self) -> int:
        return int(self.step.size)

    def __eq__(self, other: object) -> bool:
        """Equal where every field is (the arrays element by element)."""
        if not isinstance(other, EndedEpisodes):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable arrays: unhashable


def ended_episodes(stats: Any, end_step: int) -> EndedEpisodes:
    """The episodes that ended in one iteration's rollout.

    Args:
        stats: The rollout's ``EpisodeStats`` on the host: ``(T, num_envs)`` numpy arrays.
        end_step: The run's env step after the iteration (its train state's ``step``).

    Returns:
        The episodes where ``stats.done``, ordered by rollout step, then env.
    """
    done = np.asarray(stats.done, bool)
    num_steps, num_envs = done.shape
    t, env = np.nonzero(done)  # row-major: by step, then env
    first = int(end_step) - num_steps * num_envs
    return EndedEpisodes(
        step=(first + (t + 1) * num_envs).astype(np.int64),
        score=np.asarray(stats.score, np.float32)[t, env],
        length=np.asarray(stats.length, np.int64)[t, env],
        terminated=np.asarray(stats.terminated, bool)[t, env],
        truncated=np.asarray(stats.truncated, bool)[t, env],
        end_step=int(end_step),
    )

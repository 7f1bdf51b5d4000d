"""Per-episode task metrics from a vector env's infos (what the env reports beside the reward).

``EpisodeInfoRecorder`` follows the batched infos of Gymnasium's same-step autoreset
(``batchppo.envs.infos.batch_infos``): at a step where env ``i`` ends its episode, the infos at
``i`` are the *next* episode's reset info and the last step's info is in ``infos["final_info"]``.
For every scalar numeric info key it keeps, per env and episode, the mean over the episode's steps
and the key's value at the reset and at the last step.

``GameScores`` keeps the raw score of each Atari game that ends (all its lives, before reward
clipping) until the trainer takes them for its report: the training metrics ``games`` and
``game_score`` (``batchppo.experiment.run.window``), the protocol by which CleanRL reports its
training games.

The task metrics derived from them are declared once, in ``TASK_METRICS``, by the info key they
read: an env whose infos carry the key gets the metric (MuJoCo's locomotion tasks carry
``x_velocity`` and ``x_position``), others simply report none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "TASK_METRICS",
    "EpisodeInfoRecorder",
    "GameScores",
    "TaskMetric",
    "episode_task_metrics",
]

# Keys of the batching itself, not of an env's info.
_RESERVED = frozenset({"final_obs", "final_info", "env_restarted"})


@dataclasses.dataclass(frozen=True)
class TaskMetric:
    """A metric of one episode read off one info key.

    Attributes:
        name: The metric's name in results.
        key: The info key it reads.
        reduce: ``"mean"``: the mean over the episode's steps; ``"delta"``: the value at the
            last step minus the value in the reset info.
        unit: Unit for display.
        description: One line for tables and docs.
    """

    name: str
    key: str
    reduce: str
    unit: str
    description: str


TASK_METRICS: tuple[TaskMetric, ...] = (
    TaskMetric("forward_velocity", "x_velocity", "mean", "m/s", "mean forward velocity"),
    TaskMetric("distance", "x_position", "delta", "m", "final x minus initial x"),
)
"""The task metrics every evaluation reports where the env's infos carry their key."""


def _scalar_keys(infos: Mapping[str, Any], n: int) -> list[str]:
    """The info keys holding one number per env."""
    keys = []
    for key, value in infos.items():
        if key.startswith("_") or key in _RESERVED or not isinstance(value, np.ndarray):
            continue
        if value.shape == (n,) and (value.dtype.kind in "fiub"):
            keys.append(key)
    return keys


def _mask(infos: Mapping[str, Any], key: str, n: int) -> np.ndarray:
    return np.asarray(infos.get("_" + key, np.ones(n, bool)), bool)


@dataclasses.dataclass
class _Key:
    """Running sums of one info key over each env's current episode."""

    sum: np.ndarray
    count: np.ndarray
    first: np.ndarray
    last: np.ndarray

    @classmethod
    def empty(cls, n: int) -> _Key:
        return cls(np.zeros(n), np.zeros(n, np.int64), np.full(n, np.nan), np.full(n, np.nan))

    def restart(self, where: np.ndarray) -> None:
        self.sum[where] = 0.0
        self.count[where] = 0
        self.first[where] = np.nan
        self.last[where] = np.nan


class EpisodeInfoRecorder:
    """Per-env, per-episode summaries of the scalar numeric infos of a same-step vector env.

    Call ``reset`` with the infos of the vector env's reset, then ``step`` with each step's infos,
    ``terminated`` and ``truncated``. ``episodes`` lists each env's ended episodes in order,
    ``running`` the episode each env is in.

    Each episode is ``{key: {"mean", "first", "last"}}``: the mean of the key over the
    episode's steps, its value in the episode's reset info (NaN if the reset info lacks it)
    and at its last step so far.

    Args:
        num_envs: The vector env's batch size.
    """

    def __init__(self, num_envs: int) -> None:
        self.num_envs = int(num_envs)
        self._keys: dict[str, _Key] = {}
        self.episodes: list[list[dict[str, dict[str, float]]]] = [[] for _ in range(self.num_envs)]
        """Each env's ended episodes, in order."""

    def reset(self, infos: Mapping[str, Any]) -> None:
        """Starts new episodes in every env and forgets the old ones (a vector env reset)."""
        n = self.num_envs
        self._keys = {}
        self.episodes = [[] for _ in range(n)]
        self._begin(infos, np.ones(n, bool))

    def _key(self, key: str) -> _Key:
        if key not in self._keys:
            self._keys[key] = _Key.empty(self.num_envs)
        return self._keys[key]

    def _begin(self, infos: Mapping[str, Any], where: np.ndarray) -> None:
        """Takes the reset info of the envs ``where`` new episodes start."""
        for key in _scalar_keys(infos, self.num_envs):
            first = where & _mask(infos, key, self.num_envs)
            self._key(key).first[first] = infos[key][first]

    def step(self, infos: Mapping[str, Any], terminated: np.ndarray, truncated: np.ndarray) -> None:
        """Adds one step of every env; ends the episodes where ``terminated | truncated``."""
        n = self.num_envs
        done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        final = infos.get("final_info", {}) if done.any() else {}
        if not isinstance(final, Mapping):
            final = {}
        for key in dict.fromkeys(_scalar_keys(infos, n) + _scalar_keys(final, n)):
            values = np.zeros(n)
            seen = np.zeros(n, bool)
            if key in infos:
                running = ~done & _mask(infos, key, n)
                values[running] = infos[key][running]
                seen |= running
            if key in final:
                ended = done & _mask(final, key, n)
                values[ended] = final[key][ended]
                seen |= ended
            record = self._key(key)
            record.sum[seen] += values[seen]
            record.count[seen] += 1
            record.last[seen] = values[seen]
        for i in np.flatnonzero(done):
            self.episodes[i].append(self._summary(i))
        for record in self._keys.values():
            record.restart(done)
        self._begin(infos, done)

    def _summary(self, i: int) -> dict[str, dict[str, float]]:
        return {
            key: {
                "mean": float(r.sum[i] / r.count[i]),
                "first": float(r.first[i]),
                "last": float(r.last[i]),
            }
            for key, r in self._keys.items()
            if r.count[i] > 0
        }

    def running(self) -> list[dict[str, dict[str, float]]]:
        """The summary of the episode each env is in (its steps so far)."""
        return [self._summary(i) for i in range(self.num_envs)]


def episode_task_metrics(episode: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The ``TASK_METRICS`` of one recorded episode whose infos carry their key.

    A ``delta`` metric needs the key in the episode's reset info too.
    """
    out = {}
    for metric in TASK_METRICS:
        values = episode.get(metric.key)
        if values is None:
            continue
        if metric.reduce == "mean":
            out[metric.name] = values["mean"]
        elif not np.isnan(values["first"]):
            out[metric.name] = values["last"] - values["first"]
    return out


class GameScores:
    """The raw scores of the games that ended, kept until taken.

    The Atari envs keep one (the process backend's ``GameScoreLog`` wrapper in each worker, the
    ``ale`` backend's envs for their batch), and the trainer takes them after each iteration.
    """

    def __init__(self) -> None:
        self._scores: list[float] = []

    def add(self, scores: Any) -> None:
        """Keeps ``scores`` (an iterable of numbers), in order."""
        self._scores.extend(float(s) for s in np.ravel(np.asarray(scores, np.float64)))

    def take(self) -> np.ndarray:
        """The scores kept since the last call, float64 in the order the games ended."""
        taken, self._scores = np.asarray(self._scores, np.float64), []
        return taken

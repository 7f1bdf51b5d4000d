"""A run's ``episodes.jsonl``: every training episode, one JSON record a line, in the order
they ended (the trainers list them: ``batchppo.algorithms.training.episodes``).

Two kinds of record:

* an episode: ``{"step": S, "return": R, "length": L, "terminated": T, "truncated": U}``, with
  ``S`` the run's env step (summed over envs) at the end of the vector step in which it ended,
  ``R`` its return (float32, written with the 9 significant digits that read back as that
  float32; null where not finite), ``T`` and ``U`` how it ended (an env may report both);
* an Atari game: ``{"step": S, "game_score": G}``, the raw score of a whole game (all lives,
  rewards unclipped), ``S`` the step of the iteration whose call reported it.

JSON lines, as ``metrics.jsonl``: appended as the run goes, read line by line (a torn last
line, the one a killed process was writing, is skipped) and cut back by step on resume, with
the standard library alone. An episode costs about 85 bytes: a run of 100k episodes writes 8.5 MB.

The ledger writes each iteration's episodes after it; the file is flushed before each train
report's line and synced with each checkpoint, so a report's episodes are on disk no later than
the report and a checkpoint's all are. Resuming from the checkpoint at step S first drops every
record with step > S, so a resumed run's file holds each episode exactly once. A file holds every
episode of its run from step 0: a run resumed from a step S > 0 whose dir has no file (it predates
the file) gets none.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from batchppo.algorithms.training.episodes import EndedEpisodes
from batchppo.experiment.fileio import read_jsonl, truncate_jsonl

EPISODES_FILE = "episodes.jsonl"


_BOOL = ("false", "true")


def _number(value: float, spec: str) -> str:
    """``value`` as a JSON number in the format ``spec`` (``null`` where not finite)."""
    return format(value, spec) if math.isfinite(value) else "null"


def episode_lines(ended: EndedEpisodes) -> str:
    """The JSON lines of one iteration's episodes, then of its games.

    A return has 9 significant digits, which read back as the very float32 the rollout summed;
    the lines are formatted here rather than by ``json.dumps`` (several times faster, for
    iterations that end thousands of episodes).
    """
    lines = [
        f'{{"step":{step},"return":{_number(score, ".9g")},"length":{length},'
        f'"terminated":{_BOOL[terminated]},"truncated":{_BOOL[truncated]}}}\n'
        for step, score, length, terminated, truncated in zip(
            ended.step.tolist(), ended.score.tolist(), ended.length.tolist(),
            ended.terminated.tolist(), ended.truncated.tolist(), strict=True,
        )
    ]  # fmt: skip
    lines += [
        f'{{"step":{ended.end_step},"game_score":{_number(score, "")}}}\n'
        for score in ended.games.tolist()
    ]
    return "".join(lines)


def read_episodes(run_dir: str | Path) -> list[dict[str, Any]]:
    """The complete records of ``<run_dir>/episodes.jsonl`` (none where it does not exist)."""
    return read_jsonl(Path(run_dir) / EPISODES_FILE)


class EpisodeFile:
    """The ``episodes.jsonl`` a run appends to (nothing without a run dir).

    Args:
        run_dir: The run directory; None: no disk I/O.
        resume_step: Step of the checkpoint the run resumes from (its records after it are
            dropped first); None for a fresh run.

    Attributes:
        enabled: Whether the run's episodes go to the file: a run dir and a fresh run, one
            resumed from step 0, or one whose file exists.
    """

    def __init__(self, run_dir: Path | None, resume_step: int | None) -> None:
        self.path = None if run_dir is None else Path(run_dir) / EPISODES_FILE
        self._file: IO[str] | None = None
        self.enabled = False
        if self.path is None:
            return
        if resume_step is not None:
            truncate_jsonl(self.path, resume_step)
        self.enabled = not resume_step or self.path.exists()

    def write(self, ended: Sequence[EndedEpisodes]) -> None:
        """Appends the records of iterations' episodes, one ``EndedEpisodes`` each (the file is
        made on the first iteration: a trainer that lists none makes none)."""
        if not ended or not self.enabled or self.path is None:
            return
        if self._file is None:
            self._file = self.path.open("a")
        self._file.write("".join(episode_lines(one) for one in ended))

    def flush(self, sync: bool = False) -> None:
        """Hands the records written so far to the OS; ``sync``: to the disk."""
        if self._file is not None:
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())

    def close(self) -> None:
        """Syncs and closes the file."""
        self.flush(sync=True)
        if self._file is not None:
            self._file.close()
            self._file = None

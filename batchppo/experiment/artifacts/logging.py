"""What a run reports: ``metrics.jsonl`` and TensorBoard event files (tensorboardX).

Each report is one JSON object per line in ``<run>/metrics.jsonl`` (``step``, ``phase``, ``score``,
``length``, ``sps``, ``wall_time`` and the trainer's metrics; NaN is written as ``null``) and one
scalar per metric in the TensorBoard writer of its phase (``<run>/train``, ``<run>/eval``), so train
and eval curves share a chart and an x-axis (env steps). A tracker (``track=wandb``:
``batchppo.experiment.artifacts.tracking``) gets the same scalars.

An eval report's score is measured as its ``actions`` and ``episodes`` say
(``batchppo.experiment.artifacts.eval_protocol``): they stay in ``metrics.jsonl`` beside it, and the
eval writer gets them as the text ``protocol`` (``"10 episodes, sampled actions"``; TensorBoard's
Text tab) with the first eval report of each process and whenever they change.

Every training episode goes to ``<run>/episodes.jsonl``
(``batchppo.experiment.artifacts.episode_log``), flushed before each train report.

Resuming from the checkpoint at step S first drops every record with step > S, from
``metrics.jsonl``, ``episodes.jsonl`` and the event files, so the curves continue without a gap
or a duplicate whatever moment the previous process died at.
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from batchppo.algorithms.training.episodes import EndedEpisodes
from batchppo.experiment.artifacts.episode_log import EpisodeFile
from batchppo.experiment.artifacts.eval_protocol import EvalProtocol
from batchppo.experiment.fileio import atomic_write_bytes, read_jsonl, truncate_jsonl

METRICS_FILE = "metrics.jsonl"
PHASES = ("train", "eval")
PROTOCOL_TAG = "protocol"
"""The text tag of the eval writer that names how its scores were measured."""


def _plain(value: Any) -> Any:
    # JSON has no NaN/inf; numpy scalars become Python numbers.
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """All complete records of ``<run_dir>/metrics.jsonl`` (a torn last line is skipped)."""
    return read_jsonl(Path(run_dir) / METRICS_FILE)


def truncate_metrics(run_dir: str | Path, max_step: int) -> int:
    """Keeps the records of ``metrics.jsonl`` with ``step <= max_step``; returns how many."""
    return truncate_jsonl(Path(run_dir) / METRICS_FILE, max_step)


# --- TensorBoard event files (TFRecord framing) ---------------------------------------------


def _load_tensorboardx() -> None:
    """Loads tensorboardX without letting it import torch.

    tensorboardX's writer module imports torch wherever torch is installed, only to accept
    torch tensors, which batchppo never gives it; that import is a second or more of every
    run's set-up (several with torch's CUDA build). So while tensorboardX loads, ``import
    torch`` fails for it; afterwards torch imports as usual. A torch imported before is left
    alone.
    """
    if "tensorboardX" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # ``import torch`` now raises
    try:
        import tensorboardX  # noqa: F401
    finally:
        del sys.modules["torch"]


def _masked_crc(data: bytes) -> int:
    _load_tensorboardx()
    from tensorboardX.record_writer import masked_crc32c

    return masked_crc32c(data)


def iter_event_records(path: str | Path) -> Iterator[bytes]:
    """The serialised ``Event`` protos of one event file; stops at a torn or corrupt record."""
    data = Path(path).read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        end = pos + 12 + length + 4
        if length_crc != _masked_crc(header) or end > len(data):
            return
        body = data[pos + 12 : pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[end - 4 : end])
        if body_crc != _masked_crc(body):
            return
        yield body
        pos = end


def _frame(body: bytes) -> bytes:
    header = struct.pack("<Q", len(body))
    return (
        header
        + struct.pack("<I", _masked_crc(header))
        + body
        + struct.pack("<I", _masked_crc(body))
    )


def read_scalars(phase_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """All scalars of the event files in ``phase_dir`` by tag, as ``(step, value)``, in order."""
    _load_tensorboardx()
    from tensorboardX.proto.event_pb2 import Event

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(phase_dir).glob("events.out.tfevents.*")):
        for body in iter_event_records(path):
            event = Event.FromString(body)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def read_texts(phase_dir: str | Path) -> dict[str, list[tuple[int, str]]]:
    """All text summaries of the event files in ``phase_dir`` by tag (without the
    ``/text_summary`` suffix TensorBoard's text plugin adds), as ``(step, text)``, in order."""
    _load_tensorboardx()
    from tensorboardX.proto.event_pb2 import Event

    texts: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(Path(phase_dir).glob("events.out.tfevents.*")):
        for body in iter_event_records(path):
            event = Event.FromString(body)
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "text":
                    tag = value.tag.removesuffix("/text_summary")
                    text = value.tensor.string_val[0].decode()
                    texts.setdefault(tag, []).append((event.step, text))
    return texts


def truncate_events(phase_dir: str | Path, max_step: int) -> None:
    """Rewrites the event files in ``phase_dir`` without summaries of ``step > max_step``."""
    _load_tensorboardx()
    from tensorboardX.proto.event_pb2 import Event

    for path in sorted(Path(phase_dir).glob("events.out.tfevents.*")):
        bodies = list(iter_event_records(path))
        kept = [b for b in bodies if not _is_summary_after(Event.FromString(b), max_step)]
        if len(kept) != len(bodies) or path.stat().st_size != sum(len(_frame(b)) for b in bodies):
            atomic_write_bytes(path, b"".join(_frame(b) for b in kept))


def _is_summary_after(event: Any, max_step: int) -> bool:
    return event.HasField("summary") and event.step > max_step


class _EventFile:
    """A synchronous TensorBoard event file: every report is on disk once ``flush`` returns.

    (tensorboardX's ``SummaryWriter`` hands events to a background thread whose ``flush``
    does not wait for the queue, so a checkpoint could be saved before its reports.)
    """

    def __init__(self, directory: Path, purge_step: int | None) -> None:
        _load_tensorboardx()
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.proto.summary_pb2 import Summary

        self._event, self._summary = Event, Summary
        directory.mkdir(parents=True, exist_ok=True)
        # A unique suffix per start: names only have the second, and a resume within the same
        # second would otherwise overwrite the previous process's file.
        suffix = f".{purge_step or 0:012d}.{os.getpid()}"
        self._writer = EventsWriter(str(directory / "events"), suffix)
        if purge_step is not None:
            # Tells TensorBoard to drop any event of step >= purge_step it still sees.
            start = SessionLog(status=SessionLog.START)
            self._writer.write_event(
                Event(wall_time=time.time(), step=purge_step, session_log=start)
            )

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        values = [self._summary.Value(tag=k, simple_value=v) for k, v in scalars.items()]
        summary = self._summary(value=values)
        self._writer.write_event(self._event(wall_time=time.time(), step=step, summary=summary))

    def write_text(self, step: int, tag: str, text: str) -> None:
        from tensorboardX.summary import text as text_summary

        summary = text_summary(tag, text)
        self._writer.write_event(self._event(wall_time=time.time(), step=step, summary=summary))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class ScalarSink(Protocol):
    """Another place reports go, beside TensorBoard (``batchppo.experiment.artifacts.tracking``)."""

    def write(self, phase: str, step: int, scalars: Mapping[str, float]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class RunLogger:
    """Writes reports of a run to ``metrics.jsonl`` and TensorBoard, and its training episodes
    to ``episodes.jsonl`` (nothing when disabled).

    Args:
        run_dir: The run directory, or None for no disk I/O at all.
        resume_step: Step of the checkpoint the run resumes from; records after it are
            dropped first. None for a fresh run.
        tracker: Also gets each report's TensorBoard scalars (an experiment tracker such as
            ``WandbTracker``); closed by ``close``.
    """

    def __init__(
        self,
        run_dir: str | Path | None,
        resume_step: int | None = None,
        tracker: ScalarSink | None = None,
    ) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._writers: dict[str, _EventFile] = {}
        self._file = None
        self.tracker = tracker
        self._protocol: str | None = None  # the last eval protocol the eval writer got
        self.episodes = EpisodeFile(self.run_dir, resume_step)
        if self.run_dir is None:
            return
        if resume_step is not None:
            truncate_metrics(self.run_dir, resume_step)
            for phase in PHASES:
                if (self.run_dir / phase).is_dir():
                    truncate_events(self.run_dir / phase, resume_step)
        purge = None if resume_step is None else resume_step + 1
        self._writers = {phase: _EventFile(self.run_dir / phase, purge) for phase in PHASES}
        self._file = (self.run_dir / METRICS_FILE).open("a")

    def log(self, phase: str, step: int, values: Mapping[str, Any]) -> dict[str, Any]:
        """Records one report of ``phase`` at env step ``step``; returns the JSON record."""
        record = {"step": int(step), "phase": phase}
        record.update({k: _plain(v) for k, v in values.items() if k not in record})
        if phase == "train":  # the report's episodes reach the disk no later than it
            self.episodes.flush()
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()  # In the OS's hands: survives a kill -9 of this process.
        writer = self._writers.get(phase)
        if writer is not None:
            scalars = {
                k: float(v)
                for k, v in record.items()
                if k not in ("step", "phase")
                and isinstance(v, (int, float))
                and not isinstance(v, bool)
            }
            writer.write(int(step), scalars)
            if phase == "eval":
                self._write_protocol(writer, record)
            if self.tracker is not None:
                self.tracker.write(phase, int(step), scalars)
        return record

    def _write_protocol(self, writer: _EventFile, record: Mapping[str, Any]) -> None:
        """Names the eval report's protocol in the eval writer, the first time and on a change."""
        protocol = str(EvalProtocol.of_record(record))
        if protocol != self._protocol:
            writer.write_text(int(record["step"]), PROTOCOL_TAG, protocol)
            self._protocol = protocol

    def log_episodes(self, ended: list[EndedEpisodes]) -> None:
        """Appends iterations' ended episodes to ``episodes.jsonl`` (``EpisodeFile.write``)."""
        self.episodes.write(ended)

    def flush(self) -> None:
        """Pushes everything written so far to disk (called before each checkpoint)."""
        self.episodes.flush(sync=True)
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
        for writer in self._writers.values():
            writer.flush()
        if self.tracker is not None:
            self.tracker.flush()

    def close(self) -> None:
        """Flushes and closes the files."""
        self.flush()
        self.episodes.close()
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.tracker is not None:
            tracker, self.tracker = self.tracker, None
            tracker.close()

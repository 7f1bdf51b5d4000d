"""metrics.jsonl and TensorBoard event files, including truncation on resume."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from batchppo.experiment.artifacts.logging import (
    RunLogger,
    iter_event_records,
    read_metrics,
    read_scalars,
    read_texts,
    truncate_events,
    truncate_metrics,
)


def test_records_and_scalars(tmp_path):
    logger = RunLogger(tmp_path)
    logger.log("train", 10, {"score": np.float32(1.5), "length": float("nan"), "episodes": 3})
    logger.log("eval", 10, {"score": 2.0, "flag": True})
    logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"step": 10, "phase": "train", "score": 1.5, "length": None, "episodes": 3},
        {"step": 10, "phase": "eval", "score": 2.0, "flag": True},
    ]
    train = read_scalars(tmp_path / "train")
    assert train == {"score": [(10, 1.5)], "episodes": [(10, 3.0)]}  # NaN and bools skipped
    assert read_scalars(tmp_path / "eval") == {"score": [(10, 2.0)]}


def test_no_logdir_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logger = RunLogger(None)
    record = logger.log("train", 5, {"score": 1.0})
    logger.close()
    assert record == {"step": 5, "phase": "train", "score": 1.0}
    assert list(tmp_path.iterdir()) == []


def test_truncate_metrics_drops_later_steps_and_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    records = [{"step": s, "phase": "train"} for s in (1, 2, 3, 4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 5, "pha')
    assert read_metrics(tmp_path) == records
    assert truncate_metrics(tmp_path, 2) == 2
    assert path.read_text() == "".join(json.dumps(r) + "\n" for r in records[:2])


def test_resume_truncates_event_files_and_continues(tmp_path):
    logger = RunLogger(tmp_path)
    for step in (1, 2, 3, 4):
        logger.log("train", step, {"score": float(step)})
    logger.close()
    # Simulate a process killed mid-record: a torn record at the end of the file.
    (event_file,) = (tmp_path / "train").glob("events.out.tfevents.*")
    with event_file.open("ab") as f:
        f.write(b"\x10\x00\x00")
    logger = RunLogger(tmp_path, resume_step=2)
    for step in (3, 4, 5):
        logger.log("train", step, {"score": 10.0 * step})
    logger.close()
    assert read_scalars(tmp_path / "train") == {
        "score": [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0), (5, 50.0)]
    }
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3, 4, 5]


def test_the_eval_writer_names_the_protocol_once_and_on_a_change(tmp_path):
    sampled = {"actions": "sampled", "episodes": 10}
    logger = RunLogger(tmp_path)
    for step in (1, 2):
        logger.log("eval", step, {"score": float(step), **sampled})
    logger.log("eval", 3, {"score": 3.0, "actions": "mean", "episodes": 1})
    logger.close()
    assert read_texts(tmp_path / "eval") == {
        "protocol": [(1, "10 episodes, sampled actions"), (3, "1 episode, mean action")]
    }
    assert read_scalars(tmp_path / "eval") == {
        "score": [(1, 1.0), (2, 2.0), (3, 3.0)], "episodes": [(1, 10.0), (2, 10.0), (3, 1.0)]
    }  # fmt: skip
    # A resume from step 1 drops the later text with the later scalars, and names it again.
    logger = RunLogger(tmp_path, resume_step=1)
    logger.log("eval", 2, {"score": 2.0, **sampled})
    logger.close()
    assert read_texts(tmp_path / "eval") == {
        "protocol": [(1, "10 episodes, sampled actions"), (2, "10 episodes, sampled actions")]
    }


def test_truncate_events_keeps_file_version_and_rewrites_only_when_needed(tmp_path):
    logger = RunLogger(tmp_path)
    logger.log("eval", 7, {"score": 1.0})
    logger.close()
    (event_file,) = (tmp_path / "eval").glob("events.out.tfevents.*")
    before = event_file.read_bytes()
    truncate_events(tmp_path / "eval", 7)
    assert event_file.read_bytes() == before
    truncate_events(tmp_path / "eval", 6)
    assert read_scalars(tmp_path / "eval") == {}
    assert len(list(iter_event_records(event_file))) == 1  # the file_version event


def test_the_event_files_load_tensorboardx_without_torch(tmp_path):
    # A fresh interpreter: tensorboardX's writer imports torch where torch is installed (a
    # second or more of a run's set-up); the logger loads it without, and torch still imports.
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: tensorboardX has nothing to import")
    script = textwrap.dedent(
        f"""
        import sys
        from batchppo.experiment.artifacts.logging import RunLogger, read_scalars
        logger = RunLogger({str(tmp_path)!r})
        logger.log("train", 3, {{"loss": 0.5}})
        logger.close()
        assert "tensorboardX" in sys.modules and "torch" not in sys.modules
        assert read_scalars({str(tmp_path / "train")!r}) == {{"loss": [(3, 0.5)]}}
        import torch, tensorboardX.x2num
        print("ok", torch.tensor([1.0]).item())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["ok", "1.0"], out.stderr

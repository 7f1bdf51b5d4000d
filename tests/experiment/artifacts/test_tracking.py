"""``track=wandb`` in W&B's offline mode: the run's config and reports, read back from the
offline run's own file (``run-<id>.wandb``: W&B's records, protobuf in a LevelDB-style log)."""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path

import pytest
import yaml

import batchppo.algorithms.ppo.ppo  # noqa: F401  (the trainer the loop imports late)
from batchppo import cli
from batchppo.experiment.artifacts import tracking, visualize
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import configs, env_checks
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run import training

sys.path.insert(0, str(Path(__file__).parents[1]))
from experiment_fakes import FakeSeedsTrainer, FakeTrainer, fake_config
from tiny_runs import tiny_run

TINY = tiny_run(eval_episodes=2, eval_every=512, checkpoint_every=512)
_BLOCK = 32768


def read_wandb_file(path) -> list:
    """The records of an offline run's ``.wandb`` file (W&B's header, then LevelDB log
    records: crc32c, length, type FULL/FIRST/MIDDLE/LAST, in 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, records, parts = 7, [], b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        parts += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = pb.Record()
            record.ParseFromString(parts)
            records.append(record)
            parts = b""
    return records


def finished_records(path) -> list:
    """The records of a finished offline run. W&B's service process writes the file: it may
    complete just after ``finish()`` returns, so this waits (up to 60 s) for its exit record."""
    deadline = time.monotonic() + 60
    while True:
        records = read_wandb_file(path) if path.stat().st_size > 7 else []
        if records and records[-1].WhichOneof("record_type") == "exit":
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} has no exit record after 60 s")
        time.sleep(0.05)


def offline_runs(run_dir) -> list:
    """Each offline W&B run of a run dir (one per process that tracked it), oldest first:
    ``(run record, config dict, history rows)``."""
    runs = []
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        run, config, history = None, {}, []
        for record in finished_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run = record.run
                config.update({i.key: json.loads(i.value_json) for i in run.config.update})
            elif kind == "config":
                config.update({i.key: json.loads(i.value_json) for i in record.config.update})
            elif kind == "history":
                row = {
                    i.key or "/".join(i.nested_key): json.loads(i.value_json)
                    for i in record.history.item
                }
                history.append({k: v for k, v in row.items() if not k.startswith("_")})
        runs.append((run, config, history))
    return runs


def expected_rows(records: list[dict]) -> list[dict]:
    """What W&B should get for metrics.jsonl's records: TensorBoard's scalars of each."""
    rows = []
    for r in records:
        row = {"step": r["step"]}
        for key, value in r.items():
            if key in ("step", "phase") or not isinstance(value, (int, float)):
                continue
            if isinstance(value, bool):
                continue
            row[f"{r['phase']}/{key}"] = value
        rows.append(row)
    return rows


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    return tmp_path


def train_fake(logdir, config=None, **kwargs):
    if config is None:
        config = fake_config(
            track="wandb", wandb_project="proj", wandb_entity="ent", wandb_group="grp"
        )
    return training.train(
        config, logdir, name="fake", timestamp="T", progress="none", trainer_factory=FakeTrainer,
        **kwargs,
    )  # fmt: skip


def test_offline_run_has_the_config_and_every_report_of_metrics_jsonl(offline):
    result = train_fake(offline / "logs")
    run_dir = result.run_dir
    run_id = (run_dir / tracking.ID_FILE).read_text().strip()
    [(run, config, history)] = offline_runs(run_dir)
    assert (run.run_id, run.entity, run.project, run.run_group, run.display_name,
            run.job_type) == (run_id, "ent", "proj", "grp", "T-fake", "train")  # fmt: skip
    config.pop("_wandb")
    assert config == yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["track"] == "wandb" and config["steps"] == 1000
    assert config["wandb_entity"] == "ent"
    records = read_metrics(run_dir)
    assert [(r["phase"], r["step"]) for r in records] == [
        ("train", 300), ("eval", 400), ("train", 500), ("train", 800), ("eval", 800),
        ("train", 1000), ("eval", 1000),
    ]  # fmt: skip
    assert history == expected_rows(records)
    assert history[0]["train/policy_loss"] == 2.0 and history[0]["train/score"] == 200.0
    assert "train/kl" in history[0]  # the first iteration's NaN is left out of the mean
    # The eval report as metrics.jsonl has it, less its nulls (NaN: left out, as in TensorBoard)
    # and its action mode (a word, not a scalar).
    assert records[1]["cut"] is None and records[1]["actions"] == "mean"
    left_out = ("step", "phase", "cut", "actions")
    assert history[1] == {"step": 400, **{f"eval/{k}": v for k, v in records[1].items()
                                         if k not in left_out}}  # fmt: skip

    # Resuming (steps raised) continues the same W&B run: a second offline file, same id.
    train_fake(offline / "logs", "cartpole_jax", overrides=["steps=1200"])
    first, second = offline_runs(run_dir)
    assert second[0].run_id == run_id and first[2] == history
    assert second[2] == expected_rows(read_metrics(run_dir)[len(records) :])
    assert [row["step"] for row in second[2]] == [1200, 1200]


def test_a_seeds_run_groups_its_seeds(offline, capsys, monkeypatch):
    from batchppo.algorithms.ppo import ppo as ppo_module

    monkeypatch.setattr(ppo_module, "SeedsTrainer", FakeSeedsTrainer)
    code = cli.main(["train", "--config", "cartpole_jax", "--logdir", str(offline / "logs"),
                     "--progress", "none", "--seeds", "2", "--timestamp", "T", "--set",
                     "num_agents=10", "--set", "rollout_length=10", "--set", "steps=200",
                     "--set", "track=wandb"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    found = []
    for i in range(2):
        [(run, _, history)] = offline_runs(offline / "logs" / f"T-cartpole_jax-s{i}")
        found.append((run.project, run.run_group, run.display_name))
        assert history == expected_rows(read_metrics(offline / "logs" / f"T-cartpole_jax-s{i}"))
    assert found == [("batchppo", "T-cartpole_jax", f"T-cartpole_jax-s{i}") for i in range(2)]


@pytest.mark.usefixtures("cold_training_programs")  # its run is one iteration
def test_visualize_sends_the_videos_to_the_tracked_run(offline):
    overrides = [*TINY, "steps=256", "eval_every=0", "track=wandb", "max_length=5"]
    result = training.train("cartpole_jax", offline / "logs", timestamp="T", overrides=overrides,
                        progress="none")  # fmt: skip
    stats = visualize.visualize(result.run_dir, offline / "videos", num_episodes=2)
    *_, (run, _, history) = offline_runs(result.run_dir)
    assert run.job_type == "visualize"
    assert run.run_id == (result.run_dir / tracking.ID_FILE).read_text().strip()
    [row] = history  # W&B flattens a video's fields into nested keys: videos/episode_0/path
    videos = {}
    for key, value in row.items():
        name, _, field = key.rpartition("/")
        videos.setdefault(name, {})[field] = value
    assert sorted(videos) == ["videos/episode_0", "videos/episode_1"]
    for i in range(2):
        video = videos[f"videos/episode_{i}"]
        assert video["_type"] == "video-file" and video["path"].endswith(".mp4")
        logged = next((result.run_dir / "wandb").glob(f"offline-run-*/files/{video['path']}"))
        assert logged.read_bytes() == (offline / "videos" / f"episode-{i:03d}.mp4").read_bytes()
    assert len(stats["videos"]) == 2


def test_no_logdir_tracks_nothing_and_says_so(offline):
    with pytest.warns(UserWarning, match="track=wandb: the run has no logdir, so nothing is"):
        result = training.train(fake_config(track="wandb"), progress="none",
                            trainer_factory=FakeTrainer)  # fmt: skip
    assert result.run_dir is None and result.step == 1000


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["track=tensorboard"], "track='tensorboard': choose one of ('wandb',), or None"),
        (["wandb_project=p"], "wandb_project='p' is for track=wandb; set track=wandb"),
        (["track=wandb", "wandb_group=''"], "wandb_group='': give a name, or None"),
    ],
)
def test_bad_tracking_settings_are_refused(overrides, message):
    with pytest.raises(ConfigError) as info:
        configs.apply_overrides(configs.get_preset("cartpole_jax"), overrides)
    assert message in str(info.value)


def test_track_wandb_without_the_package_fails_before_a_run_dir(capsys, tmp_path, monkeypatch):
    real = env_checks.importlib.util.find_spec
    monkeypatch.setattr(
        env_checks.importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else
        real(name, *a)
    )  # fmt: skip
    code = cli.main(["train", "--config", "cartpole_jax", "--logdir", str(tmp_path / "logs"),
                     "--set", "track=wandb"])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2
    assert err == (
        "batchppo: error: track=wandb needs the wandb package: pip install 'batchppo[wandb]' (or "
        "drop track=wandb)\n"
    )
    assert not (tmp_path / "logs").exists()

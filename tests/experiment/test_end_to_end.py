"""End to end with the real BatchPPO trainer: train, resume, kill -9, evaluate, visualize, plot."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from tiny_runs import tiny_run

import batchppo.algorithms.ppo.ppo  # noqa: F401  (the trainer the loop imports late)
from batchppo import cli
from batchppo.core.keys import host_key
from batchppo.experiment.analysis import evaluate, plot
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts import provenance, visualize
from batchppo.experiment.artifacts.episode_log import read_episodes
from batchppo.experiment.artifacts.logging import read_metrics, read_scalars
from batchppo.experiment.run import training

TINY = tiny_run(eval_episodes=2, eval_every=1024, checkpoint_every=512)
PER_ITERATION = 256
KILL_STEPS = 40_000


def assert_curves(run_dir: Path, last_step: int, eval_every: int) -> None:
    """Every report present exactly once, in order, in metrics.jsonl and TensorBoard."""
    records = read_metrics(run_dir)
    train = [r["step"] for r in records if r["phase"] == "train"]
    evals = [r["step"] for r in records if r["phase"] == "eval"]
    assert train == list(range(PER_ITERATION, last_step + 1, PER_ITERATION))
    expected_evals = list(range(eval_every, last_step + 1, eval_every))
    if last_step % eval_every:
        expected_evals.append(last_step)
    assert evals == expected_evals
    tb_train = read_scalars(run_dir / "train")
    tb_eval = read_scalars(run_dir / "eval")
    assert [s for s, _ in tb_train["score"]] == train
    assert [s for s, _ in tb_eval["score"]] == evals
    for tag in ("sps", "policy_loss", "value_loss", "entropy", "learning_rate", "obs_std"):
        assert [s for s, _ in tb_train[tag]] == train, tag
    # episodes.jsonl holds each episode once: as many in each report's span as it counts.
    ended = [e["step"] for e in read_episodes(run_dir)]
    assert ended == sorted(ended) and ended[-1] <= last_step
    spans = zip([0, *train[:-1]], train, strict=True)
    counted = [r["episodes"] for r in records if r["phase"] == "train"]
    assert [sum(a < e <= b for e in ended) for a, b in spans] == counted


# Its runs are a few iterations each: they, and the trainers the tests load from them,
# compile with the options of the programs that run once (the subprocesses of the kill test
# compile as the CLI does, and share nothing with these).
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, module_cold_training_programs):
    logdir = tmp_path_factory.mktemp("logdir")
    first = training.train(
        "cartpole_jax", logdir, timestamp="T1", overrides=[*TINY, "steps=2048"], progress="none"
    )
    return logdir, first


@pytest.mark.timeout(120)
def test_train_then_resume_continues_the_step_count_and_curves(tiny_run):
    logdir, first = tiny_run
    run_dir = logdir / "T1-cartpole_jax"
    assert first.run_dir == run_dir and first.step == 2048
    assert np.isfinite(first.score)
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "checkpoints", "code.jsonl", "config.yaml", "episodes.jsonl", "eval", "metrics.jsonl",
        "train",
    ]  # fmt: skip
    assert [s for s, _ in ckpt.list_checkpoints(run_dir / "checkpoints")] == [1024, 1536, 2048]
    assert_curves(run_dir, 2048, 1024)
    second = training.train(
        "cartpole_jax", logdir, timestamp="T1", overrides=["steps=3072"], progress="none"
    )
    assert second.step == 3072 and second.config.steps == 3072
    starts = [json.loads(line) for line in (run_dir / "code.jsonl").read_text().splitlines()]
    assert [s["step"] for s in starts] == [0, 2048]  # the code of each start and resume
    assert starts[0]["commit"] == starts[1]["commit"] == provenance.code_version()["commit"]
    assert second.records[0]["step"] == 2048 + PER_ITERATION
    assert int(second.train_state.updates) == 3072 // PER_ITERATION
    assert_curves(run_dir, 3072, 1024)


@contextlib.contextmanager
def jax_compile_events():
    """The names of JAX's compile-time events (tracing, lowering, XLA compilation) from now on."""
    events = []

    def listen(event, seconds, **kwargs):
        if event.startswith("/jax/core/compile/"):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


@pytest.mark.timeout(120)
def test_resuming_a_complete_run_compiles_nothing(tiny_run, capsys):
    logdir, _ = tiny_run
    run_dir = logdir / "T1-cartpole_jax"
    # At 2048 steps, or 3072 where the resume test has extended the run: complete either way.
    step, final = ckpt.latest_checkpoint(run_dir / "checkpoints")
    with jax_compile_events() as events:
        again = training.train("cartpole_jax", logdir, timestamp="T1", progress="lines")
        assert events == []  # not a program traced, lowered or compiled
        assert int(again.train_state.updates) == step // PER_ITERATION  # loaded when read
        assert "/jax/core/compile/jaxpr_trace_duration" in events  # the loading trainer's init
    assert again.step == again.config.steps == step and again.records == []
    assert capsys.readouterr().out == (
        f"run already complete at step {step:,} (steps={step:,}), nothing to train; final "
        f"checkpoint {final}; to train on, raise steps (--set steps=N)\n"
    )


@pytest.mark.timeout(120)
def test_load_policy_and_visualize_writes_playable_videos(tiny_run, tmp_path):
    import imageio.v2 as imageio

    logdir, _ = tiny_run
    run_dir = logdir / "T1-cartpole_jax"
    policy = training.load_policy(run_dir)
    actions = policy(np.zeros((5, 4), np.float32))
    assert actions.shape == (5,) and set(np.unique(actions)) <= {0, 1}
    stats = visualize.visualize(run_dir, tmp_path / "videos", num_episodes=2, checkpoint=2048)
    assert stats["checkpoint"] == 2048 and stats["env"] == "CartPole-v1"
    assert json.loads((tmp_path / "videos" / "stats.json").read_text()) == stats
    assert len(stats["returns"]) == len(stats["lengths"]) == len(stats["videos"]) == 2
    for video, length, ret in zip(stats["videos"], stats["lengths"], stats["returns"], strict=True):
        assert 1 <= length <= 60 and ret == float(length)  # CartPole: +1 per step
        with warnings.catch_warnings():  # imageio's ffmpeg subprocess; not a bare fork
            warnings.simplefilter("ignore", RuntimeWarning)
            reader = imageio.get_reader(video)
        frames = list(reader.iter_data())
        reader.close()
        assert len(frames) == length + 1
        assert frames[0].shape == (400, 600, 3) and frames[0].std() > 0


@pytest.mark.timeout(120)
def test_evaluate_runs_the_run_evaluator_for_the_episodes_asked(tiny_run, tmp_path, capsys):
    logdir, _ = tiny_run
    run_dir = logdir / "T1-cartpole_jax"
    # 2048 is kept whether or not the resume test has extended the run to 3072.
    stats = evaluate.evaluate_run(run_dir, checkpoint=2048, num_episodes=11, seed=4)
    # The same episodes as the run's own evaluator from the documented key.
    config, trainer, state, step = training.load_run(run_dir, 2048)
    try:
        key = host_key(config.seed, training.EVALUATE_RUN_KEY, 4)
        expected = trainer.evaluate(state, 11, key)
        expected_sampled = trainer.evaluate(state, 11, key, sample=True)
    finally:
        trainer.close()
    # --sample: the sampling policy's episodes from the same key, not the mean action's.
    sampled = evaluate.evaluate_run(run_dir, checkpoint=2048, num_episodes=11, seed=4, sample=True)
    assert sampled["protocol"] == "final-sampled" and stats["protocol"] == "final-mean"
    assert (sampled["actions"], stats["actions"]) == ("sampled", "mean")
    # By default, the run's own protocol: its eval_episodes (2) with its eval_actions (mean).
    own = evaluate.evaluate_run(run_dir, checkpoint=2048, seed=4)
    assert (own["protocol"], own["episodes"]) == ("final-mean", 2)
    assert own["returns"] == stats["returns"][:2]  # the first episodes of the same key
    assert sampled["returns"] == np.asarray(expected_sampled["returns"], np.float64).tolist()
    assert sampled["returns"] != stats["returns"]
    returns = np.asarray(expected["returns"], np.float64)
    assert step == stats["checkpoint"] == 2048 and stats["env"] == "CartPole-v1"
    assert stats["episodes"] == 11 and stats["cut"] == 0
    assert stats["returns"] == returns.tolist()
    assert stats["returns"] == [float(n) for n in stats["lengths"]]  # CartPole: +1 per step
    assert stats["mean_return"] == pytest.approx(returns.mean(), abs=1e-12)
    assert stats["std_return"] == pytest.approx(returns.std(), abs=1e-12)
    assert stats["stderr_return"] == pytest.approx(returns.std() / np.sqrt(11), abs=1e-12)
    assert stats["mean_length"] == pytest.approx(np.mean(stats["lengths"]), abs=1e-12)

    out_file = tmp_path / "eval" / "stats.json"
    argv = ["evaluate", str(run_dir), "--checkpoint", "2048", "--episodes", "11"]
    code = cli.main([*argv, "--seed", "4", "--json", str(out_file)])
    out, _ = capsys.readouterr()
    assert code == 0
    written = json.loads(out_file.read_text())
    assert written["runs"] == [{"run_dir": str(run_dir), **stats, "group": "cartpole_jax"}]
    config = provenance.effective_config(training.open_run_dir(run_dir)[0])
    assert written["provenance"]["cartpole_jax"]["config"] == config
    assert written["provenance"]["cartpole_jax"]["commit"] == provenance.run_code(run_dir)[0]
    # CartPole's infos carry no task metrics: falls (terminated episodes) only.
    assert stats["metrics"] == stats["info_means"] == {}
    falls = int(sum(stats["terminated"]))
    assert stats["terminated_fraction"] == falls / 11
    assert out.splitlines() == [
        f"{run_dir}: CartPole-v1 checkpoint 2,048: mean return {stats['mean_return']:.2f} ± "
        f"{stats['stderr_return']:.2f} (standard error; episodes' std {stats['std_return']:.2f}) "
        f"over 11 episodes with the mean action (the run's eval_actions), mean length "
        f"{stats['mean_length']:.1f}",
        f"  terminated {falls} of 11 episodes",
        f"wrote {out_file}",
    ]

    # Several runs (here the same run twice):
    # each is reported, then the mean and std of their means.
    code = cli.main(["evaluate", str(run_dir), str(run_dir), "--episodes", "3"])
    out, _ = capsys.readouterr()
    newest = evaluate.evaluate_run(run_dir, num_episodes=3)
    last = ckpt.latest_checkpoint(run_dir / "checkpoints")[0]
    assert code == 0 and newest["checkpoint"] == last
    lines = out.splitlines()
    assert len(lines) == 7 and lines[:2] == lines[2:4]
    assert lines[0].startswith(f"{run_dir}: CartPole-v1 checkpoint {last:,}: mean return ")
    assert lines[1] == evaluate.format_run(newest)
    summary = evaluate.summarize([newest, newest])
    assert summary == {"runs": 2, "mean": newest["mean_return"], "std": 0.0}
    assert lines[4] == (
        f"mean over 2 runs: {newest['mean_return']:.2f} ± 0.00 (std of the runs' means; each 3 "
        "episodes, mean action)"
    )
    r = newest["mean_return"]
    assert lines[5:] == [
        "group cartpole_jax: 2 runs, each 3 episodes, mean action (95% stratified-bootstrap "
        "intervals)",
        f"  CartPole-v1 return: mean {r:.1f} [{r:.1f}, {r:.1f}], median {r:.1f} [{r:.1f}, "
        f"{r:.1f}], IQM {r:.1f} [{r:.1f}, {r:.1f}]",
    ]
    two = evaluate.summarize([{"mean_return": 10.0}, {"mean_return": 14.0}])
    assert two == {"runs": 2, "mean": 12.0, "std": 2.0}


@pytest.mark.timeout(60)
def test_plot_writes_a_png(tiny_run, tmp_path):
    logdir, _ = tiny_run
    for x in ("steps", "hours"):
        out = plot.plot_runs([logdir / "T1-cartpole_jax"], tmp_path / f"curves-{x}.png", x=x)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert out.stat().st_size > 10_000


def _start(logdir: Path, cache: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "batchppo", "train", "--config", "cartpole_jax"]
    command += ["--logdir", str(logdir), "--timestamp", "K", "--progress", "lines"]
    for override in [*TINY, "checkpoint_every=2560", f"steps={KILL_STEPS}"]:
        command += ["--set", override]
    # A persistent compilation cache shared by the three processes saves two compilations.
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(cache),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"training exited early ({proc.returncode}): {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("training made no progress")
        time.sleep(0.01)


@pytest.mark.timeout(240)
def test_kill_9_then_ctrl_c_then_resume_to_the_end(tmp_path):
    logdir, cache = tmp_path / "logdir", tmp_path / "cache"
    run_dir = logdir / "K-cartpole_jax"
    checkpoints = run_dir / "checkpoints"

    def last_step() -> int:
        records = read_metrics(run_dir)
        return records[-1]["step"] if records else 0

    def beyond_a_checkpoint() -> bool:
        found = ckpt.latest_checkpoint(checkpoints)
        return found is not None and last_step() > found[0]

    # 1. kill -9 between checkpoints, after reports beyond the last one.
    proc = _start(logdir, cache)
    _wait_for(beyond_a_checkpoint, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed_at = ckpt.latest_checkpoint(checkpoints)[0]
    assert last_step() > killed_at

    # 2. Resume, then Ctrl-C: the iteration finishes, a checkpoint is saved, exit 130.
    proc = _start(logdir, cache)
    # (Records of the killed process beyond its checkpoint stay until the new one truncates
    # them, so wait for a checkpoint only the new process can have written.)
    _wait_for(lambda: ckpt.latest_checkpoint(checkpoints)[0] > killed_at, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"resuming {run_dir} from step {killed_at:,}" in out
    stopped = ckpt.latest_checkpoint(checkpoints)[0]
    assert stopped == last_step() > killed_at
    assert "--timestamp K" in out

    # 3. Resume to the end: every report once, in order.
    proc = _start(logdir, cache)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    final = -(-KILL_STEPS // PER_ITERATION) * PER_ITERATION
    assert f"done: {final:,} steps" in out
    assert_curves(run_dir, final, 1024)

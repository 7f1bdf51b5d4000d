"""Which env renders a run, and MuJoCo offscreen videos (skipped without offscreen GL)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
import warnings

import gymnasium
import jax
import numpy as np
import pytest

from batchppo.experiment import trainers
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts import loading, visualize
from batchppo.experiment.config import configs
from batchppo.experiment.errors import UserError


def test_render_env_id():
    assert visualize.render_env_id(configs.get_preset("hopper")) == "Hopper-v5"
    assert visualize.render_env_id(configs.get_preset("pendulum_jax")) == "Pendulum-v1"
    assert visualize.render_env_id(configs.get_preset("cartpole_jax")) == "CartPole-v1"
    with pytest.raises(UserError, match="cannot render 'ant' \\(backend brax\\)"):
        visualize.render_env_id(configs.PRESETS["ant_brax"])
    catch = dataclasses.replace(configs.get_preset("cartpole_jax"), env="Catch-bsuite")
    with pytest.raises(UserError, match="cannot render 'Catch-bsuite'"):
        visualize.render_env_id(catch)


def test_render_ids_by_backend():
    assert visualize.gymnax_twin("Pendulum-v1", {}) == "Pendulum-v1"
    with pytest.raises(ValueError, match="default parameters"):
        visualize.gymnax_twin("Pendulum-v1", {"max_speed": 9.0})
    with pytest.raises(ValueError, match="Gymnasium twin"):
        visualize.gymnax_twin("Catch-bsuite", {})
    assert visualize.ale_gymnasium_id("ALE/Pong-v5", {"preprocess": "atari"}) == "ALE/Pong-v5"
    with pytest.raises(ValueError) as info:
        visualize.ale_gymnasium_id("pong", {})
    assert str(info.value) == "only ALE/<Game>-v5 ids render (through Gymnasium); got 'pong'"
    assert list(visualize.RENDER_IDS) == ["process", "sync", "ray", "gymnax", "ale"]
    jumanji = types.SimpleNamespace(backend="jumanji", env="Snake-v1", env_kwargs={})
    with pytest.raises(UserError) as info:
        visualize.render_env_id(jumanji)
    assert str(info.value) == (
        "cannot render 'Snake-v1' (backend jumanji): its envs have no Gymnasium twin; "
        "visualize renders the backends process, sync, ray, gymnax, ale"
    )


def test_make_render_env_returns_the_run_stack_ready_to_render():
    env = visualize.make_render_env(configs.get_preset("pendulum_jax"), "Pendulum-v1")
    try:
        assert isinstance(env, gymnasium.Env)
        # The run's stack: range normalisation maps Pendulum's bounds (1, 1, 8) to 1.
        np.testing.assert_array_equal(env.observation_space.high, [1.0, 1.0, 1.0])
        obs, *_ = env.step(np.zeros(1, np.float32))
        assert obs.dtype == np.float32
        frame = env.render()
        assert frame.ndim == 3 and frame.shape[2] == 3
    finally:
        env.close()


def test_the_video_env_of_an_atari_preset_plays_whole_games():
    # The eval env (eval_env_kwargs, preprocess atari_game), as evaluate scores: an episode is
    # a game, all its lives; the training env's episodes end at the first lost life.
    config = configs.get_preset("breakout_atari")
    env_id, env = visualize.video_env(config)
    training_env = visualize.make_render_env(config, env_id)
    try:
        for built, lives_left in ((env, 0), (training_env, 4)):
            built.reset(seed=0)
            while not any(built.step(0)[2:4]):  # NOOP: the ball is lost life after life
                pass
            assert built.unwrapped.ale.lives() == lives_left
    finally:
        env.close()
        training_env.close()


def untrained_run(tmp_path, preset, overrides):
    """A run dir of ``preset`` whose one checkpoint (step 0) holds the initial state."""
    config = configs.apply_overrides(configs.get_preset(preset), overrides)
    run_dir = tmp_path / f"T-{preset}"
    (run_dir / "checkpoints").mkdir(parents=True)
    configs.save_config(config, run_dir / "config.yaml")
    trainer = trainers.default_trainer_factory(loading.loading_config(config))
    try:
        state = trainer.init(jax.random.PRNGKey(0))
        ckpt.save_checkpoint(run_dir / "checkpoints", state, 0)
    finally:
        trainer.close()
    return run_dir


@pytest.mark.timeout(120)
def test_visualize_prints_each_episode_as_it_ends_and_cuts_at_eval_max_steps(tmp_path, capsys):
    run_dir = untrained_run(tmp_path, "pendulum_jax", ["eval_max_steps=5"])
    outdir = tmp_path / "videos"
    stats = visualize.visualize(run_dir, outdir, num_episodes=2, progress=True)
    assert stats["lengths"] == [5, 5] and stats["cut"] == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{outdir / f'episode-00{i}.mp4'}: return {stats['returns'][i]:.2f}, length 5 (cut at "
        "eval_max_steps)"
        for i in range(2)
    ]
    visualize.visualize(run_dir, outdir, num_episodes=1)
    assert capsys.readouterr().out == ""  # no progress: nothing printed


def _egl_available() -> bool:
    probe = "import mujoco; c = mujoco.GLContext(64, 64); c.make_current(); c.free()"
    env = {**os.environ, "MUJOCO_GL": "egl"}
    try:
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              timeout=60)  # fmt: skip
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@pytest.mark.timeout(120)
def test_mujoco_video_renders_offscreen(tmp_path):
    pytest.importorskip("mujoco")
    if not _egl_available():
        pytest.skip(
            "no offscreen OpenGL (EGL): apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri"
        )
    import imageio.v2 as imageio

    # An untrained policy is enough to check rendering.
    run_dir = untrained_run(
        tmp_path, "hopper",
        ["num_agents=1", "max_length=20", "policy_layers=[8]", "value_layers=[8]"],
    )  # fmt: skip
    # A fresh process: MuJoCo picks its GL backend (MUJOCO_GL) when first imported.
    outdir = tmp_path / "videos"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "MUJOCO_GL": "egl"}
    done = subprocess.run(
        [sys.executable, "-m", "batchppo", "visualize", str(run_dir), "--outdir",
         str(outdir), "--num_episodes", "1"],
        capture_output=True, text=True, env=env, timeout=110,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stats = json.loads((outdir / "stats.json").read_text())
    assert stats["env"] == "Hopper-v5" and stats["checkpoint"] == 0
    (length,) = stats["lengths"]
    assert 1 <= length <= 20
    (ret,) = stats["returns"]
    assert done.stdout.splitlines() == [
        f"{outdir / 'episode-000.mp4'}: return {ret:.2f}, length {length}",
        f"mean return {ret:.2f} over 1 episodes with the mean action",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reader = imageio.get_reader(outdir / "episode-000.mp4")
        frames = list(reader.iter_data())
        reader.close()
    assert len(frames) == length + 1
    assert frames[0].shape == (480, 480, 3) and frames[0].std() > 0

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

from batchppo.experiment import checkpoint as ckpt
from batchppo.experiment import configs, loading, trainers, visualize
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

    config = configs.apply_overrides(
        configs.get_preset("hopper"),
        ["num_agents=1", "max_length=20", "policy_layers=[8]", "value_layers=[8]"],
    )
    run_dir = tmp_path / "T-hopper"
    (run_dir / "checkpoints").mkdir(parents=True)
    configs.save_config(config, run_dir / "config.yaml")
    # An untrained policy is enough to check rendering: checkpoint the initial state.
    trainer = trainers.default_trainer_factory(loading.loading_config(config))
    try:
        state = trainer.init(jax.random.PRNGKey(0))
        ckpt.save_checkpoint(run_dir / "checkpoints", state, 0)
    finally:
        trainer.close()
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reader = imageio.get_reader(outdir / "episode-000.mp4")
        frames = list(reader.iter_data())
        reader.close()
    assert len(frames) == length + 1
    assert frames[0].shape == (480, 480, 3) and frames[0].std() > 0

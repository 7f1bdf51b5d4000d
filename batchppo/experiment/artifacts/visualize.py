"""Videos and statistics of a trained policy: one MP4 per episode plus ``stats.json``.

Episodes run in one Gymnasium env of the run's *evaluation* env (the env ``batchppo evaluate``
scores: ``eval_env_kwargs`` over ``env_kwargs``, so the Atari presets record whole games, not
one life) with the run's wrapper stack (time limit, range normalisation, float32 conversion:
``batchppo.envs.make_env_fn``) rendering ``rgb_array`` frames, acting with the mean (mode)
action, each episode cut at ``eval_max_steps`` steps as the evaluations cut theirs. gymnax
presets render their Gymnasium twin (same dynamics, same range normalisation formulas). Frames
stream into the MP4 (imageio's bundled ffmpeg, H.264), so long MuJoCo episodes need no memory
for the whole video. With ``progress``, a line per episode as it ends, and a bar over its steps
on a terminal: rendering offscreen and encoding make a long episode slow to record.

Headless rendering: classic control draws through pygame with ``SDL_VIDEODRIVER=dummy``;
MuJoCo renders offscreen through EGL (``MUJOCO_GL=egl``, needs the system's ``libegl1`` and
Mesa's ``libegl-mesa0`` + ``libgl1-mesa-dri`` on a machine without a GPU driver) or OSMesa
(``MUJOCO_GL=osmesa``, needs ``libosmesa6``). Both variables are only defaulted here.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from batchppo.algorithms.run_config import RunConfig
from batchppo.algorithms.training.trainer import eval_env_config
from batchppo.backends.ale import ALE_ID
from batchppo.backends.gymnax import GYMNASIUM_TWINS
from batchppo.experiment.artifacts.loading import load_run
from batchppo.experiment.artifacts.tracking import open_tracker
from batchppo.experiment.errors import UserError
from batchppo.experiment.trainers import TrainerFactory

STATS_FILE = "stats.json"


def gymnasium_id(env_id: str, env_kwargs: Mapping[str, Any]) -> str:
    """The render id of a backend whose envs are Gymnasium's: the run's own id (the render env
    is built with its ``env_kwargs``)."""
    del env_kwargs
    return env_id


def gymnax_twin(env_id: str, env_kwargs: Mapping[str, Any]) -> str:
    """The render id of a gymnax run: its Gymnasium twin (``GYMNASIUM_TWINS``: the same id and
    dynamics), with the default parameters.

    Raises:
        ValueError: An id without a twin, or ``env_kwargs`` (the twin has the defaults).
    """
    if env_id not in GYMNASIUM_TWINS:
        raise ValueError(
            f"gymnax envs render through their Gymnasium twin, which only "
            f"{sorted(GYMNASIUM_TWINS)} have"
        )
    if env_kwargs:
        raise ValueError(
            f"its Gymnasium twin has the default parameters, not env_kwargs {dict(env_kwargs)};"
            " train without env_kwargs to render"
        )
    return env_id


def ale_gymnasium_id(env_id: str, env_kwargs: Mapping[str, Any]) -> str:
    """The render id of an ``ale`` run: its Gymnasium ALE id (``ALE/<Game>-v5``), whose env the
    process backend's stack builds with the run's ``env_kwargs``.

    Raises:
        ValueError: A ROM name (``breakout``), which Gymnasium does not register.
    """
    del env_kwargs
    if not ALE_ID.match(env_id):
        raise ValueError(f"only ALE/<Game>-v5 ids render (through Gymnasium); got {env_id!r}")
    return env_id


RENDER_IDS: dict[str, Callable[[str, Mapping[str, Any]], str]] = {
    "process": gymnasium_id,
    "sync": gymnasium_id,
    "ray": gymnasium_id,
    "gymnax": gymnax_twin,
    "ale": ale_gymnasium_id,
}
"""The Gymnasium id a run's policy renders in, by backend name: ``render_id(env_id,
env_kwargs)``, or ``ValueError`` with the reason. A backend of a plug-in that renders adds its
entry; a backend without one renders nothing (``brax``, ``jumanji``)."""


def render_env_id(config: RunConfig) -> str:
    """The Gymnasium id to render a run of ``config`` in (``RENDER_IDS`` of its backend).

    Raises:
        UserError: Backends without a Gymnasium twin (Brax, gymnax ids without one, gymnax
            with ``env_kwargs``), with the reason.
    """
    render_id = RENDER_IDS.get(config.backend)
    try:
        if render_id is None:
            raise ValueError(
                f"its envs have no Gymnasium twin; visualize renders the backends "
                f"{', '.join(RENDER_IDS)}"
            )
        return render_id(config.env, config.env_kwargs)
    except ValueError as error:
        raise UserError(
            f"cannot render {config.env!r} (backend {config.backend}): {error}"
        ) from None


def _headless_defaults() -> None:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")  # pygame would probe ALSA otherwise.
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def make_render_env(config: RunConfig, env_id: str) -> Any:
    """One Gymnasium env of the run's wrapper stack that renders ``rgb_array`` frames.

    Raises:
        UserError: The env cannot be built or cannot render here (missing MuJoCo, no
            offscreen OpenGL), with what to install.
    """
    _headless_defaults()
    try:
        from batchppo.envs import make_env_fn
    except ImportError as error:
        raise UserError(f"batchppo.envs.make_env_fn is unavailable: {error}") from None
    try:
        env = make_env_fn(
            env_id,
            max_length=config.max_length,
            normalize_ranges=config.normalize_ranges,
            render_mode="rgb_array",
            wrappers=config.env_wrappers,
            **config.env_kwargs,
        )()
        env.reset(seed=0)
        frame = env.render()
    except Exception as error:  # Missing extras and GL failures surface as many types.
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(
            f"cannot render {env_id}: {reason}. MuJoCo envs need `pip install "
            "'batchppo[mujoco]'` and offscreen OpenGL: `apt-get install libegl1 libegl-mesa0 "
            "libgl1-mesa-dri` with MUJOCO_GL=egl, or `apt-get install libosmesa6` with "
            "MUJOCO_GL=osmesa"
        ) from None
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise UserError(f"{env_id} rendered {type(frame).__name__}, not an RGB frame")
    return env


def _even(frame: np.ndarray) -> np.ndarray:
    # H.264 with yuv420p needs even sizes; crop a pixel rather than resample.
    h, w = frame.shape[:2]
    return frame[: h - h % 2, : w - w % 2]


def video_env(config: RunConfig) -> tuple[str, Any]:
    """The env a run's videos are recorded in, and its Gymnasium id: one env of the run's
    evaluation env (``eval_env_config``: what ``evaluate`` scores), rendering ``rgb_array``.

    Raises:
        UserError: See ``render_env_id`` and ``make_render_env``.
    """
    config = eval_env_config(config)
    env_id = render_env_id(config)
    return env_id, make_render_env(config, env_id)


def record_episode(
    env: Any,
    policy: Any,
    path: Path,
    seed: int,
    fps: int,
    max_steps: int | None = None,
    on_step: Callable[[], object] | None = None,
) -> tuple[float, int, bool]:
    """Runs one episode with ``policy`` and streams its frames into the MP4 ``path``.

    Args:
        env: The env (``video_env``).
        policy: Maps an observation batch to an action batch.
        path: The MP4 file.
        seed: The episode's ``env.reset`` seed.
        fps: Frames per second of the video.
        max_steps: Cut the episode after this many steps (None: until it ends).
        on_step: Called after each step.

    Returns:
        ``(return, length, cut)``: ``cut`` when ``max_steps`` ended the episode; the video has
        ``length + 1`` frames (the first observation's frame, then one per step).
    """
    import imageio.v2 as imageio

    if hasattr(policy, "reset"):
        policy.reset()
    obs, _ = env.reset(seed=seed)
    total, length = 0.0, 0
    with warnings.catch_warnings():
        # imageio starts ffmpeg (on the first frame) through subprocess, i.e. fork + exec at
        # once, which JAX's "os.fork() was called" warning does not need to flag.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
        with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=1) as writer:
            writer.append_data(_even(env.render()))
            while True:
                action = np.asarray(policy(np.asarray(obs)[None]))[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                length += 1
                writer.append_data(_even(env.render()))
                if on_step is not None:
                    on_step()
                if terminated or truncated:
                    return total, length, False
                if max_steps is not None and length >= max_steps:
                    return total, length, True


def episode_line(video: str, total: float, length: int, cut: bool) -> str:
    """The line that reports a recorded episode (``visualize``'s progress, ``batchppo
    visualize``)."""
    return f"{video}: return {total:.2f}, length {length}" + (
        " (cut at eval_max_steps)" if cut else ""
    )


def visualize(
    run_dir: str | Path,
    outdir: str | Path,
    checkpoint: int | None = None,
    num_episodes: int = 3,
    seed: int = 0,
    trainer_factory: TrainerFactory | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Records ``num_episodes`` episodes of a run's policy (mean action) in its evaluation env
    (see the module docstring); a tracked run (``track=wandb``) also sends the videos to its W&B
    run.

    Args:
        run_dir: A run directory written by ``batchppo train``.
        outdir: Where ``episode-000.mp4``, ... and ``stats.json`` go (created if missing).
        checkpoint: Env step of the checkpoint; None: the newest.
        num_episodes: Episodes to record.
        seed: Episode ``i`` starts from ``env.reset(seed=seed + i)``.
        trainer_factory: Builds the trainer (default: the trainer of the run's algorithm).
        progress: Print each episode's line (``episode_line``) on stdout as it ends, and show
            a bar over its steps on stderr when that is a terminal; False: print nothing.

    Returns:
        The content of ``stats.json``: ``returns``, ``lengths``, ``mean_return``,
        ``mean_length``, ``cut`` (episodes cut at ``eval_max_steps``), ``videos``,
        ``checkpoint``, ``env``.

    Raises:
        UserError: Missing or corrupt run dir or checkpoint, or an env that cannot render.
    """
    if num_episodes < 1:
        raise UserError(f"num_episodes={num_episodes}: must be >= 1")
    config, trainer, state, step = load_run(run_dir, checkpoint, trainer_factory)
    try:
        policy = trainer.policy(state, deterministic=True)
    finally:
        trainer.close()
    env_id, env = video_env(config)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    fps = int(env.metadata.get("render_fps") or 30)
    returns, lengths, videos, cut = [], [], [], 0
    bar = _steps_bar() if progress else None
    bound = config.eval_max_steps
    try:
        for i in range(num_episodes):
            path = outdir / f"episode-{i:03d}.mp4"
            if bar is not None:
                bar.reset(
                    total=None if config.max_length is None else min(bound, config.max_length)
                )
                bar.set_description_str(f"episode {i + 1}/{num_episodes}")
            total, length, was_cut = record_episode(
                env, policy, path, seed + i, fps, bound, None if bar is None else bar.update
            )
            returns.append(total)
            lengths.append(length)
            videos.append(str(path))
            cut += was_cut
            if bar is not None:
                _print_line(bar, episode_line(str(path), total, length, was_cut))
    finally:
        env.close()
        if bar is not None:
            bar.close()
    stats = {
        "env": env_id,
        "checkpoint": step,
        "returns": returns,
        "lengths": lengths,
        "mean_return": float(np.mean(returns)),
        "mean_length": float(np.mean(lengths)),
        "cut": cut,
        "videos": videos,
    }
    (outdir / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    # A tracked run (track=wandb) gets the videos in its own W&B run (its id in the run dir).
    tracker = open_tracker(config, Path(run_dir), job_type="visualize")
    if tracker is not None:
        try:
            tracker.videos(videos, fps)
        finally:
            tracker.close()
    return stats


def _steps_bar() -> Any:
    """A tqdm bar over an episode's steps on stderr, disabled where stderr is no terminal."""
    from tqdm import tqdm

    return tqdm(
        total=None, unit="step", file=sys.stderr, disable=None, leave=False, dynamic_ncols=True
    )


def _print_line(bar: Any, text: str) -> None:
    """Prints ``text`` on stdout without breaking ``bar`` (``_steps_bar``)."""
    if bar.disable:
        print(text, flush=True)
    else:
        bar.write(text, file=sys.stdout)

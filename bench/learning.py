"""Learning side by side on HalfCheetah-v5: SB3 PPO (rl-zoo hyperparameters) and ``cheetah_fast``.

Both train for the same budget of env steps with the same seed, one after the other, each in a
fresh Python process (imports, start-up and compilation included in its wall-clock), and are
then scored the same way: the mean return of ``--episodes`` episodes with the mean action, on
the env with its observation normaliser frozen. The script prints return, wall-clock and CPU
time for both and the ratios. CPU time is that of the run's whole process tree (env workers
included), sampled every half second: unlike wall-clock it hardly depends on what else runs on
the machine, so its ratio holds on a shared machine where an hour-long wall-clock does not.

SB3's settings are rl-baselines3-zoo's tuned ``HalfCheetah-v3`` entry in ``hyperparams/ppo.yml``
(one env, VecNormalize on observations and rewards, n_steps 512, batch 64, 20 epochs,
lr 2.0633e-5, clip 0.1, gamma 0.98, GAE 0.92, ent 4.0e-4, vf 0.58, grad norm 0.8,
log_std_init -2, 256x256 ReLU without orthogonal init); the zoo reports 5819 +- 664 for it at
1M steps on v3 (rl-baselines3-zoo benchmark.md). torch runs on the CPU with one thread per
core.

``--against-sac RUN_DIR`` compares wall-clock with SB3's SAC on Hopper-v5 instead. SAC runs
rl-baselines3-zoo's settings for Hopper (``hyperparams/sac.yml``: the MuJoCo defaults, that is
SB3's SAC defaults with ``learning_starts`` 10000; lr 3e-4, buffer 1M, batch 256, tau 0.005,
gamma 0.99, one gradient step per env step, automatic entropy, 256x256). Its random warm-up
(``--sac-warmup``, 10,000 steps) and ``--sac-steps`` learning steps are timed apart, and its
time for 1M steps is *extrapolated* linearly from them (the warm-up as measured, every later
step at the measured learning rate): a full SAC run costs hours on 2 cores. Our side is read
off a finished run of ours (``hopper_fast``): the wall-clock of its first eval at or above
SAC's published 1M-step return on Hopper, 2787 (the mean of 10 seeds in SimbaV2's baseline
CSVs, Gym v4).

``--atari GAME --cleanrl-dir DIR`` compares on an Atari game instead: CleanRL's
``ppo_atari.py`` (its Gymnasium 1.x version: the ``gymnasium-v1.0`` branch of vwxyzjn/cleanrl,
checked out at DIR; batchppo ships none of its code) on ``GAMENoFrameskip-v4`` against the
``breakout_atari`` preset's settings on ``ALE/GAME-v5`` with the same preprocessing (frame
skip 4 with max-pooling, 84x84 grey, 4 stacked, 30 noop starts, FIRE on reset, lives as
episodes and clipped rewards for learning; no sticky actions), for ``--steps`` agent steps
(4 frames each) with the same seed. Both scores are whole games with raw rewards and sampled
actions: CleanRL's is the mean of the games its training finished in the last tenth of the
steps (its ``charts/episodic_return``), ours the mean of ``--episodes`` games of the final
policy (our mean-action score over whole games is printed beside it). CleanRL needs torch,
tyro and tensorboard (the ``bench`` extra) and runs torch on the CPU with one thread per core.
Its script runs through ``bench/cleanrl_atari.py train``, which saves the agent it trained
(``ppo_atari.cleanrl_model``, kept beside its events under ``--logdir``); ``cleanrl_atari.py
import`` turns that into a run dir of ours that ``batchppo evaluate`` scores by our protocol.
``--only cleanrl`` (or ``batchppo``) runs one side.

Examples:
    python bench/learning.py                    # 1M steps each (SB3: about 25 min on 2 cores)
    python bench/learning.py --steps 20000 --episodes 2       # smoke test
    python bench/learning.py --only batchppo --json out.json
    python bench/learning.py --against-sac docs/runs/s0-hopper_fast --sac-steps 20000
    python bench/learning.py --atari Breakout --cleanrl-dir ~/cleanrl --steps 100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from harness import Result, Side, compare, run_process, spawn, write_json

ENV_ID = "HalfCheetah-v5"
PRESET = "cheetah_fast"
RUNNERS = ("sb3", "batchppo")
ATARI_SIDES = ("cleanrl", "batchppo")
SAC_ENV_ID = "Hopper-v5"
SAC_LEARNING_STARTS = 10_000
"""rl-baselines3-zoo's ``learning_starts`` for the MuJoCo tasks: random actions before SAC
learns."""
SAC_1M_RETURN = 2787.0
"""SAC's Hopper return at 1M steps: the mean of 10 seeds in SimbaV2's baseline CSVs (Gym v4)."""
SAC_BUDGET = 1_000_000
ATARI_PRESET = "breakout_atari"
"""The preset whose settings (CleanRL's) train every Atari game here, its env replaced."""
CLEANRL_MODEL = "ppo_atari.cleanrl_model"
"""The file CleanRL's trained agent is saved to (in its run's directory, then kept beside its
TensorBoard events under ``--logdir``)."""
FINAL_FRACTION = 0.1
"""CleanRL's score: the games that its training finished in this last fraction of the steps."""


def worker_sb3(steps: int, seed: int, episodes: int) -> dict:
    """Trains SB3 PPO with the zoo's HalfCheetah settings; returns the final mean-action score."""
    import gymnasium
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    start = time.monotonic()
    torch.set_num_threads(os.cpu_count() or 1)
    env = VecNormalize(make_vec_env(ENV_ID, n_envs=1, seed=seed))
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=512,
        batch_size=64,
        n_epochs=20,
        learning_rate=2.0633e-05,
        clip_range=0.1,
        gamma=0.98,
        gae_lambda=0.92,
        ent_coef=0.000401762,
        vf_coef=0.58096,
        max_grad_norm=0.8,
        policy_kwargs=dict(
            log_std_init=-2,
            ortho_init=False,
            activation_fn=torch.nn.ReLU,
            net_arch=dict(pi=[256, 256], vf=[256, 256]),
        ),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=steps)
    train_seconds = time.monotonic() - start
    eval_env = VecNormalize(
        make_vec_env(lambda: gymnasium.make(ENV_ID), n_envs=1, seed=seed + 10_007),
        training=False,
        norm_reward=False,
    )
    eval_env.obs_rms = env.obs_rms
    returns, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True
    )
    return {
        "score": float(sum(returns) / len(returns)),
        "returns": [float(r) for r in returns],
        "train_seconds": train_seconds,
    }


@contextlib.contextmanager
def _trained(
    preset: str,
    overrides: Sequence[str],
    logdir: str | None = None,
    eval_every: int = 0,
    run_dir: tuple[str, str] | None = None,
) -> Iterator[tuple[Any, Any, float]]:
    """Trains ``preset`` with ``overrides`` (evaluations every ``eval_every`` steps, none
    for 0; with ``logdir``, the run dir ``<timestamp>-<name>`` of ``run_dir = (timestamp,
    name)`` under it, else none); yields the result, a trainer of its config to evaluate the
    final state with (closed on exit) and the training's wall-clock seconds."""
    import batchppo
    from batchppo.algorithms.ppo import Trainer

    start = time.monotonic()
    result = batchppo.train(
        preset,
        logdir,
        overrides=[*overrides, f"eval_every={eval_every}"],
        progress="none",
        timestamp=run_dir[0] if run_dir else None,
        name=run_dir[1] if run_dir else None,
    )
    train_seconds = time.monotonic() - start
    trainer = Trainer(result.config)
    try:
        yield result, trainer, train_seconds
    finally:
        trainer.close()


def worker_batchppo(steps: int, seed: int, episodes: int) -> dict:
    """Trains the ``cheetah_fast`` preset; returns the final mean-action score."""
    overrides = [f"steps={steps}", f"seed={seed}", f"eval_episodes={episodes}"]
    with _trained(PRESET, overrides) as (result, trainer, train_seconds):
        evaluation = trainer.evaluate(result.train_state, episodes, _key(seed))
    return {
        "score": float(evaluation["score"]),
        "returns": [float(r) for r in evaluation["returns"]],
        "train_seconds": train_seconds,
    }


def worker_sac(steps: int, seed: int, warmup: int, threads: int) -> dict:
    """Times SB3's SAC with the zoo's Hopper settings: ``warmup`` random steps (the zoo's
    ``learning_starts``), then ``steps`` learning steps, with ``threads`` torch threads;
    returns the wall-clock and CPU seconds of both phases."""
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Clock(BaseCallback):
        """Notes the wall-clock when the warm-up ends."""

        def __init__(self) -> None:
            super().__init__()
            self.warmup_end: float | None = None
            self.warmup_cpu: float | None = None

        def _on_step(self) -> bool:
            if self.warmup_end is None and self.num_timesteps >= warmup:
                self.warmup_end = time.monotonic()
                self.warmup_cpu = time.process_time()
            return True

    torch.set_num_threads(threads)
    env = make_vec_env(SAC_ENV_ID, n_envs=1, seed=seed)
    model = SAC("MlpPolicy", env, learning_starts=warmup, seed=seed, device="cpu")
    clock = Clock()
    start, start_cpu = time.monotonic(), time.process_time()
    model.learn(total_timesteps=warmup + steps, callback=clock)
    end, end_cpu = time.monotonic(), time.process_time()
    return {
        "warmup_steps": warmup,
        "warmup_seconds": clock.warmup_end - start,
        "warmup_cpu_seconds": clock.warmup_cpu - start_cpu,
        "learn_steps": steps,
        "learn_seconds": end - clock.warmup_end,
        "learn_cpu_seconds": end_cpu - clock.warmup_cpu,
        "threads": threads,
    }


def worker_batchppo_atari(
    game: str, steps: int, seed: int, episodes: int, logdir: str | None, eval_every: int
) -> dict:
    """Trains ``ATARI_PRESET``'s settings on ``ALE/{game}-v5`` (a run dir under
    ``logdir`` when given, evaluations every ``eval_every`` steps); returns the final policy's
    whole-game scores, sampled (``score``) and with the mean action (``mode_score``)."""
    from batchppo.envs import make_env_fn

    env_id = f"ALE/{game}-v5"
    overrides = [f"env={env_id}", f"steps={steps}", f"seed={seed}"]
    run_dir = (f"s{seed}", f"{game.lower()}_atari")
    trained = _trained(ATARI_PRESET, overrides, logdir, eval_every, run_dir)
    with trained as (result, trainer, train_seconds):
        evaluation = trainer.evaluate(result.train_state, episodes, _key(seed))
        policy = trainer.policy(result.train_state, deterministic=False)
        with contextlib.closing(
            make_env_fn(env_id, normalize_ranges=False, preprocess="atari_game")()
        ) as env:
            returns = [_play_game(env, policy, seed + 10_007 + k) for k in range(episodes)]
    return {
        "score": float(sum(returns) / len(returns)),
        "returns": returns,
        "mode_score": float(evaluation["score"]),
        "train_seconds": train_seconds,
    }


def _play_game(env, policy, seed: int) -> float:
    """The raw score of one whole game of ``policy`` (a batch-of-one policy) on ``env``."""
    import numpy as np

    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = np.asarray(policy(np.asarray(obs)[None]))[0]
        obs, reward, terminated, truncated, _ = env.step(action)
        total, done = total + float(reward), terminated or truncated
    return total


def cleanrl_command(
    cleanrl_dir: str, game: str, steps: int, seed: int, model: str = CLEANRL_MODEL
) -> list[str]:
    """The command line of CleanRL's ``ppo_atari.py`` for ``game`` on the CPU, run by
    ``bench/cleanrl_atari.py``, which saves the trained agent to ``model`` when it ends."""
    script = Path(cleanrl_dir).expanduser() / "cleanrl" / "ppo_atari.py"
    runner = Path(__file__).with_name("cleanrl_atari.py")
    return [
        sys.executable, str(runner), "train", "--model", model, "--",
        str(script), "--env-id", f"{game}NoFrameskip-v4",
        "--total-timesteps", str(steps), "--seed", str(seed), "--no-cuda",
        "--exp-name", "bench",
    ]  # fmt: skip


def _games_in(
    returns: Sequence[tuple[int, float]], low: float, high: float = math.inf
) -> list[float]:
    """The returns of the games that ended after step ``low`` and by step ``high``."""
    return [value for step, value in returns if low < step <= high]


def final_training_score(
    returns: Sequence[tuple[int, float]], steps: int, fraction: float = FINAL_FRACTION
) -> tuple[float, int]:
    """The mean of the episode returns logged after ``(1 - fraction) * steps``, and their
    number.

    Raises:
        ValueError: No episode ended in that last fraction of the steps.
    """
    last = _games_in(returns, (1 - fraction) * steps)
    if not last:
        raise ValueError(f"no episode ended after step {(1 - fraction) * steps:,.0f}")
    return sum(last) / len(last), len(last)


def training_windows(
    returns: Sequence[tuple[int, float]], steps: int, every: int, fraction: float = FINAL_FRACTION
) -> list[dict]:
    """CleanRL's training games along the way: at every ``every``-th step up to ``steps``, the
    mean return and number of the games that ended in the ``fraction * steps`` steps up to it
    (the last window is ``final_training_score``'s games); ``mean_return`` is None where
    no game ended."""
    width, windows = fraction * steps, []
    for point in range(every, steps + 1, every):
        games = _games_in(returns, point - width, point)
        mean = sum(games) / len(games) if games else None
        windows.append({"step": point, "mean_return": mean, "games": len(games)})
    return windows


def run_cleanrl_atari(args: argparse.Namespace) -> dict:
    """Runs CleanRL's PPO Atari script in a fresh directory; its score, timed like ours."""
    from batchppo.experiment.artifacts.logging import read_scalars

    # Absolute: the script runs in a fresh directory, where a relative --cleanrl-dir fails.
    cleanrl_dir = Path(args.cleanrl_dir).expanduser().resolve()
    if not (cleanrl_dir / "cleanrl" / "ppo_atari.py").is_file():
        raise SystemExit(f"--cleanrl-dir {args.cleanrl_dir}: no cleanrl/ppo_atari.py in it")
    with tempfile.TemporaryDirectory(prefix="cleanrl-") as cwd:
        env = {**os.environ, "PYTHONPATH": str(cleanrl_dir)}
        command = cleanrl_command(str(cleanrl_dir), args.atari, args.steps, args.seed)
        finished = run_process(command, args.timeout, cwd=cwd, env=env)
        run = {"seconds": finished.seconds, "cpu_seconds": finished.cpu_seconds}
        if finished.failure():
            return {**run, **finished.failure()}
        (events,) = Path(cwd).glob("runs/*")
        returns = read_scalars(events)["charts/episodic_return"]
        if args.logdir:
            keep = Path(args.logdir) / f"cleanrl-{args.atari}-s{args.seed}"
            shutil.copytree(events, keep, dirs_exist_ok=True)
            shutil.copy2(Path(cwd) / CLEANRL_MODEL, keep / CLEANRL_MODEL)
            print(f"cleanrl: its TensorBoard events and final model kept in {keep}", flush=True)
    score, games = final_training_score(returns, args.steps)
    result = {**run, "score": score, "games": games}
    if args.eval_every:  # the games up to each of our evals, to set beside them
        result["windows"] = training_windows(returns, args.steps, args.eval_every)
    return result


def atari(args: argparse.Namespace) -> dict:
    """Prints CleanRL's and our Atari runs' scores, wall-clock and CPU time, and the ratios."""
    print(
        f"bench/learning.py --atari: {args.atari}, {args.steps:,} agent steps "
        f"({4 * args.steps:,} frames), seed {args.seed}, {os.cpu_count()} cores",
        flush=True,
    )
    worker_args = (args.atari, args.steps, args.seed, args.episodes, args.logdir, args.eval_every)
    sides = {
        "cleanrl": lambda: run_cleanrl_atari(args),
        "batchppo": lambda: _spawn("batchppo-atari", args, worker_args),
    }

    def describe(res: dict) -> str:
        what = (
            f"mean of its last {res['games']} training games"
            if res["side"] == "cleanrl"
            else f"{len(res['returns'])} games of the final policy; mean action "
            f"{res['mode_score']:.1f}"
        )
        return f"score {res['score']:.1f} ({what})"

    names = args.only.split(",") if args.only else ATARI_SIDES
    results = _sides({name: sides[name] for name in names}, _report(args, describe))
    _time_ratios(results, "batchppo", "cleanrl")
    return results


def _report(args: argparse.Namespace, describe: Callable[[dict], str]) -> Callable:
    """What each side's row does once run: every side's figures so far to ``--json``, then a
    line of its figures (``describe``'s, its wall-clock and CPU time) or of its failure."""

    def on_row(row: dict, result: Result) -> None:
        if args.json:
            write_json(args.json, {r["side"]: r for r in result.rows})
        name = row["side"]
        if "error" in row:
            print(f"{name}: FAILED after {row['seconds']:.0f} s: {row['error']}", flush=True)
            return
        print(
            f"{name}: {describe(row)}, wall-clock {row['seconds'] / 60:.1f} min, "
            f"CPU {row['cpu_seconds'] / 60:.1f} min",
            flush=True,
        )

    return on_row


def _time_ratios(results: dict[str, dict], ours: str, theirs: str) -> None:
    """Prints ``ours``' wall-clock and CPU time over ``theirs``', where both scored."""
    if all("score" in results.get(name, {}) for name in (ours, theirs)):
        a, b = results[ours], results[theirs]
        print(f"ratio wall-clock {ours} / {theirs} = {a['seconds'] / b['seconds']:.3f}")
        print(f"ratio CPU time {ours} / {theirs} = {a['cpu_seconds'] / b['cpu_seconds']:.3f}")


def extrapolate_seconds(
    warmup_seconds: float, warmup_steps: int, learn_seconds: float, learn_steps: int, total: int
) -> float:
    """Wall-clock of ``total`` steps: the warm-up as measured, then every further step at the
    measured learning rate (``learn_seconds / learn_steps``)."""
    return warmup_seconds + learn_seconds / learn_steps * (total - warmup_steps)


def first_crossing(records: list[dict], threshold: float) -> dict | None:
    """The first eval report (by step) whose score is at least ``threshold``; None if none.

    Args:
        records: A run's ``metrics.jsonl`` records.
        threshold: The return to reach.

    Raises:
        ValueError: The crossing report carries no ``wall_time``.
    """
    evals = sorted((r for r in records if r.get("phase") == "eval"), key=lambda r: r["step"])
    for record in evals:
        if record.get("score") is not None and record["score"] >= threshold:
            if "wall_time" not in record:
                raise ValueError(f"the eval at step {record['step']} carries no wall_time")
            return record
    return None


def against_sac(args: argparse.Namespace) -> dict:
    """Prints SAC's extrapolated 1M-step wall-clock, our run's time to SAC's 1M return, and
    their ratio; returns the figures."""
    from batchppo.experiment.artifacts.logging import read_metrics

    records = read_metrics(Path(args.against_sac))
    crossing = first_crossing(records, SAC_1M_RETURN)
    sac_args = (args.sac_steps, args.seed, args.sac_warmup, args.sac_threads)
    sac = _spawn("sac", args, sac_args)
    if "error" in sac:
        print(f"sac: FAILED after {sac['seconds']:.0f} s: {sac['error']}", flush=True)
        return {"sac": sac}
    sac_1m = extrapolate_seconds(
        sac["warmup_seconds"], sac["warmup_steps"], sac["learn_seconds"], sac["learn_steps"],
        SAC_BUDGET,
    )  # fmt: skip
    rate = sac["learn_seconds"] / sac["learn_steps"] * 1000
    cpu_rate = sac["learn_cpu_seconds"] / sac["learn_steps"] * 1000
    print(
        f"SAC (SB3, rl-zoo Hopper settings, {sac['threads']} torch thread(s)) on {SAC_ENV_ID}: "
        f"{sac['warmup_steps']:,} random steps in {sac['warmup_seconds']:.1f} s, "
        f"{sac['learn_steps']:,} learning steps in {sac['learn_seconds']:.1f} s ({rate:.2f} "
        f"ms/step, CPU {cpu_rate:.2f} ms/step); 1M steps EXTRAPOLATED linearly from these: "
        f"{sac_1m / 60:.1f} min",
        flush=True,
    )
    out = {"sac": {**sac, "extrapolated_1m_seconds": sac_1m}, "batchppo": None}
    if crossing is None:
        print(f"{args.against_sac}: no eval reached SAC's 1M return {SAC_1M_RETURN:.0f}")
        return out
    ours = crossing["wall_time"]
    print(
        f"{args.against_sac}: eval return {crossing['score']:.0f} >= {SAC_1M_RETURN:.0f} (SAC's "
        f"1M return) first at step {crossing['step']:,}, wall-clock {ours / 60:.1f} min"
    )
    print(f"ratio SAC 1M (extrapolated) / batchppo to SAC's 1M return = {sac_1m / ours:.1f}")
    out["batchppo"] = {"step": crossing["step"], "score": crossing["score"], "seconds": ours}
    return out


def _key(seed: int):
    import jax

    return jax.random.key(seed + 10_007)


def _spawn(runner: str, args: argparse.Namespace, worker_args: Sequence[Any] = ()) -> dict:
    """Runs ``runner``'s worker in a fresh process (its arguments: ``worker_args``, else
    steps, seed and eval episodes); its result with wall-clock and CPU seconds."""
    worker_args = list(worker_args or (args.steps, args.seed, args.episodes))
    command = ["_worker", runner, json.dumps(worker_args)]
    return spawn(__file__, command, args.timeout, timed=True)


def _sides(runs: dict[str, Any], on_row: Any) -> dict[str, dict]:
    """Each of ``runs`` (a side's name and its run) once, one after the other
    (``harness.compare``); each side's figures by name."""
    sides = [Side(name, lambda _, run=run: run()) for name, run in runs.items()]
    return {row["side"]: row for row in compare(sides, 1, on_row=on_row).rows}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        runner, worker_args = sys.argv[2:]
        worker = {
            "sb3": worker_sb3,
            "batchppo": worker_batchppo,
            "sac": worker_sac,
            "batchppo-atari": worker_batchppo_atari,
        }[runner]
        print(json.dumps(worker(*json.loads(worker_args))), flush=True)
        return
    # SIGTERM as SystemExit, so that _run_timed stops the run it is timing.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps of each run")
    parser.add_argument("--seed", type=int, default=0, help="seed of both runs")
    parser.add_argument("--episodes", type=int, default=10, help="final eval episodes")
    parser.add_argument(
        "--only", default="",
        help="runners: sb3,batchppo (default both); with --atari: cleanrl,batchppo",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="per-run timeout (s)")
    parser.add_argument("--json", default="", help="also write the results to this file")
    parser.add_argument(
        "--against-sac", metavar="RUN_DIR",
        help="instead: SB3 SAC's extrapolated 1M-step wall-clock on Hopper-v5 against this "
        "run's wall-clock to SAC's 1M return",
    )  # fmt: skip
    parser.add_argument(
        "--sac-steps", type=int, default=20_000,
        help="SAC learning steps timed after its warm-up (default 20000)",
    )  # fmt: skip
    parser.add_argument(
        "--sac-warmup", type=int, default=SAC_LEARNING_STARTS,
        help="SAC's random steps before it learns (default 10000, the zoo's learning_starts; "
        "fewer only for a smoke test)",
    )  # fmt: skip
    parser.add_argument(
        "--sac-threads", type=int, default=1,
        help="torch threads of SAC (default 1: its small matrices gain little from more, "
        "and threads that spin for cores other processes hold slow each step down badly)",
    )  # fmt: skip
    parser.add_argument(
        "--atari", metavar="GAME",
        help="instead: CleanRL's PPO Atari script against our Atari settings on GAME "
        "(e.g. Breakout, Pong); --steps counts agent steps; needs --cleanrl-dir (but for "
        "--only batchppo)",
    )  # fmt: skip
    parser.add_argument(
        "--cleanrl-dir", metavar="DIR",
        help="a checkout of CleanRL's gymnasium-v1.0 branch (holding cleanrl/ppo_atari.py)",
    )  # fmt: skip
    parser.add_argument(
        "--logdir", metavar="DIR",
        help="--atari: keep both runs' curves under DIR: our run dir (s<seed>-<game>_atari) "
        "and CleanRL's TensorBoard events (cleanrl-GAME-s<seed>)",
    )  # fmt: skip
    parser.add_argument(
        "--eval-every", type=int, default=0, metavar="STEPS",
        help="--atari: our run evaluates whole games every STEPS agent steps (its eval curve; "
        "the time counts in its wall-clock); 0 (default): no evaluation during training",
    )  # fmt: skip
    args = parser.parse_args()
    if args.atari:
        sides = args.only.split(",") if args.only else list(ATARI_SIDES)
        unknown = sorted(set(sides) - set(ATARI_SIDES))
        if unknown:
            parser.error(f"--only: unknown sides {unknown}; choose from {', '.join(ATARI_SIDES)}")
        if "cleanrl" in sides and not args.cleanrl_dir:
            parser.error(
                "--atari needs --cleanrl-dir DIR (a checkout of CleanRL's gymnasium-v1.0 "
                "branch), or --only batchppo"
            )
        atari(args)  # writes --json itself, after each side
        return
    if args.against_sac:
        if args.sac_steps < 1 or not 0 < args.sac_warmup < SAC_BUDGET:
            parser.error("--sac-steps must be >= 1 and --sac-warmup in 1..999999")
        results = against_sac(args)
        if args.json:
            write_json(args.json, results)
        return
    runners = args.only.split(",") if args.only else list(RUNNERS)
    unknown = sorted(set(runners) - set(RUNNERS))
    if unknown:
        parser.error(f"--only: unknown runners {unknown}; choose from {', '.join(RUNNERS)}")
    print(
        f"bench/learning.py: {ENV_ID}, {args.steps:,} steps, seed {args.seed}, "
        f"{os.cpu_count()} cores; wall-clock includes start-up",
        flush=True,
    )

    def describe(res: dict) -> str:
        spread = statistics.pstdev(res["returns"])
        return f"return {res['score']:.0f} (std over episodes {spread:.0f})"

    runs = {runner: lambda runner=runner: _spawn(runner, args) for runner in runners}
    results = _sides(runs, _report(args, describe))
    if all(r in results and "score" in results[r] for r in RUNNERS):
        sb3, ours = results["sb3"], results["batchppo"]
        print(f"ratio return batchppo / sb3 = {ours['score'] / sb3['score']:.2f}")
    _time_ratios(results, "batchppo", "sb3")


if __name__ == "__main__":
    main()

"""The ``batchppo`` command line: ``train``, ``evaluate``, ``visualize``, ``plot`` and ``list``.

Bad input (an unknown config, a bad ``--set``, a missing or corrupt run dir or checkpoint, an
unknown env id) prints one line ``batchppo: error: ...`` on stderr and exits with status 2; so
does a Ray cluster that cannot be joined or cannot place the env actors (``RaySetupError``), a
run dir that another process trains into (the line names it: pid, host, start time), and a
write into the run dir that failed, such as on a full disk (the previous checkpoint intact).

An env that fails during training (its exception or a dead worker, with ``max_env_restarts``
0 or spent) stops the run with a checkpoint of its last completed iteration: ``train`` prints
the checkpoint and the resume command on one line, then ``batchppo: error: the env raised
<type>: <message>``, and exits with status 1; the full error, the env's traceback included,
is in ``<run dir>/env_error.txt``. A ``--seeds`` run does the same for every seed's run dir
and prints the ``--seeds N --timestamp T`` command that resumes them all.

``train --timestamp T`` resumes the run ``T`` if it exists and starts it otherwise; the
resume commands ``train`` prints add ``--resume``, under which a run that is not there (a
typo, another ``--logdir``) is an error instead of a fresh run.

Examples::

    batchppo train --config pendulum_jax --logdir logdir
    batchppo train --config cartpole --logdir logdir --set steps=5e4 --set num_agents=8
    batchppo train --config pendulum_jax --logdir logdir --timestamp 20261121T113000 --resume
    batchppo train --config pendulum_jax --logdir logdir --seeds 4  # seeds 0-3, one program
    batchppo evaluate --logdir logdir/*-pendulum_jax --episodes 100
    batchppo visualize --logdir logdir/20261121T113000-pendulum_jax --outdir videos
    batchppo plot logdir/*-pendulum_jax --out curves.png --x hours
    batchppo list
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from batchppo.experiment.errors import UserError

if TYPE_CHECKING:
    from pathlib import Path

    from batchppo.experiment.loop import EnvFailure

EXIT_USAGE = 2
EXIT_FAILURE = 1


def _parser() -> argparse.ArgumentParser:
    from batchppo.experiment.configs import DEFAULT_PRESET

    parser = argparse.ArgumentParser(
        prog="batchppo", description="Batched PPO on JAX: train, evaluate, visualize and plot runs."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser(
        "train",
        help="train a preset (or resume a run)",
        description="Train a preset into <logdir>/<timestamp>-<config>/; an existing "
        "timestamp resumes that run from its last checkpoint with its stored config.",
    )
    train.add_argument(
        "--config", default=DEFAULT_PRESET, help=f"preset name (default {DEFAULT_PRESET}; "
        "see `batchppo list`)",
    )  # fmt: skip
    train.add_argument("--logdir", required=True, help="parent directory of runs")
    train.add_argument(
        "--timestamp", help="run name prefix, e.g. 20261121T113000; an existing one resumes"
    )
    train.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config field (repeatable), e.g. --set steps=2e5 --set "
        "policy_layers=[64,64]",
    )  # fmt: skip
    train.add_argument(
        "--resume", action="store_true",
        help="the run must exist (what the printed resume commands use): a missing run dir "
        "is an error instead of a new run",
    )  # fmt: skip
    train.add_argument(
        "--seeds", type=int, metavar="N",
        help="train N seeds together in one program: seeds are the config's seed + i for i "
        "in 0..N-1, each written to its own run dir <timestamp>-<config>-s<i>; with "
        "--timestamp, resumes all N (their checkpoints must be at one step); one seed's dir "
        "resumes alone with --config <config>-s<i>",
    )  # fmt: skip
    train.add_argument(
        "--progress", choices=("auto", "bar", "lines", "none"), default="auto",
        help="progress bar on a terminal, plain lines otherwise (default auto)",
    )  # fmt: skip

    ev = sub.add_parser(
        "evaluate",
        help="evaluate a trained policy over many episodes",
        description="Run episodes of a run's checkpoint with the mean action, in the run's own "
        "eval env (as its training evals), and print the mean return, its spread and its "
        "standard error; no videos.",
    )
    ev.add_argument(
        "--logdir", required=True, nargs="+", metavar="RUN",
        help="run directories <logdir>/<ts>-<config>; several (say the seeds of a config) "
        "also print the mean and std of their means",
    )  # fmt: skip
    ev.add_argument(
        "--checkpoint", type=int, help="env step of the checkpoint (default newest; one run only)"
    )
    ev.add_argument("--episodes", type=int, default=100, help="episodes per run (default 100)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the episode starts")
    ev.add_argument(
        "--json", help="also write each run's returns and lengths to this JSON file (a list)"
    )

    vis = sub.add_parser(
        "visualize",
        help="record videos of a trained policy",
        description="Run episodes with the mean action; write one MP4 per episode and "
        "stats.json (returns and lengths).",
    )
    vis.add_argument("--logdir", required=True, help="the run directory <logdir>/<ts>-<config>")
    vis.add_argument("--outdir", required=True, help="where to write the videos")
    vis.add_argument("--checkpoint", type=int, help="env step of the checkpoint (default newest)")
    vis.add_argument(
        "--num_episodes", "--num-episodes", type=int, default=3, help="episodes (default 3)"
    )
    vis.add_argument("--seed", type=int, default=0, help="seed of the episode starts")

    plot = sub.add_parser(
        "plot",
        help="plot learning curves of runs",
        description="Learning curves (eval and train score; mean and spread over the runs "
        "of each config) from the runs' metrics.jsonl: one panel per env (or per config), "
        "configs side by side, one shared legend.",
    )
    plot.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    plot.add_argument("--out", required=True, help="output PNG file")
    plot.add_argument("--x", choices=("steps", "hours"), default="steps", help="x-axis")
    plot.add_argument(
        "--panels", choices=("env", "config"), default="env",
        help="one panel per env (default; configs side by side) or per config",
    )  # fmt: skip
    plot.add_argument(
        "--phase", choices=("both", "eval", "train"), default="both",
        help="curves to draw: eval (mean action), train (sampled) or both (default)",
    )  # fmt: skip
    plot.add_argument("--columns", type=int, default=3, help="panels per row (default 3)")

    sub.add_parser("list", help="list the presets", description="List the presets.")
    return parser


def _cmd_train(args: argparse.Namespace) -> int:
    from batchppo.experiment import configs, loop

    configs.get_preset(args.config)  # Unknown names fail before anything is created.
    if os.environ.get("BATCHPPO_COMPILATION_CACHE", "1") != "0":
        # Repeat runs of a config then skip XLA compilation (most of a short run's start-up).
        from batchppo.algorithms.common.programs import enable_compilation_cache

        enable_compilation_cache()
    try:
        result = loop.train(
            args.config,
            args.logdir,
            timestamp=args.timestamp,
            overrides=args.overrides,
            progress=args.progress,
            seeds=args.seeds,
            resume=args.resume,
        )
    except Exception as error:
        failure = loop.env_failure(error)  # an env error that stopped the run
        if failure is None:
            raise
        return _report_env_failure(args, error, failure)
    if isinstance(result, list):
        return _report_seeds(args, result)
    if result.interrupted:
        where = f"checkpoint saved at step {result.step:,}" if result.run_dir else ""
        print(f"stopped at step {result.step:,}; {where}", file=sys.stderr)
        if result.run_dir:
            print(f"resume with: {_resume_command(args, result.run_dir)}")
        return 128 + (result.stop_signal or 2)
    score = "n/a" if result.score is None else f"{result.score:.2f}"
    print(f"done: {result.step:,} steps, eval score {score}, run dir {result.run_dir}")
    return 0


def _resume_command(args: argparse.Namespace, run_dir: Path) -> str:
    """The command that resumes a stopped ``train`` run, shell-quoted.

    Args:
        args: The ``train`` command's arguments.
        run_dir: The run's dir; with ``--seeds``, seed 0's (``<timestamp>-<config>-s0``),
            and the command resumes every seed (``--seeds N --timestamp T``).
    """
    from batchppo.experiment import configs, loop

    command = ["batchppo", "train", "--config", args.config, "--logdir", args.logdir]
    name = args.config
    if args.seeds is not None:
        name = configs.seed_run_name(args.config, 0)
        command += ["--seeds", str(args.seeds)]
    return shlex.join([*command, "--timestamp", loop.run_timestamp(run_dir, name), "--resume"])


def _report_seeds(args: argparse.Namespace, results: list) -> int:
    """Prints the outcome of a ``--seeds`` run (one line per seed); the exit status."""
    first = results[0]
    if first.interrupted:
        print(f"stopped at step {first.step:,}; checkpoints saved", file=sys.stderr)
        if first.run_dir:
            print(f"resume with: {_resume_command(args, first.run_dir)}")
        return 128 + (first.stop_signal or 2)
    for result in results:
        score = "n/a" if result.score is None else f"{result.score:.2f}"
        print(
            f"done: seed {result.config.seed}: {result.step:,} steps, eval score {score}, "
            f"run dir {result.run_dir}"
        )
    return 0


def _report_env_failure(args: argparse.Namespace, error: BaseException, failure: EnvFailure) -> int:
    """Prints where the checkpoint of a run that an env error stopped is, how to resume it and
    the error, each on one line; returns the exit status (1).

    With ``--seeds``, the first line names every seed's checkpoint and the command that
    resumes them all; the full text is in each seed's run dir (seed 0's is named).

    Args:
        args: The ``train`` command's arguments.
        error: The env's exception.
        failure: Its :class:`~batchppo.experiment.loop.EnvFailure`.
    """
    if failure.run_dir is not None:
        print(
            f"batchppo: stopped at step {failure.step:,} by an env error; "
            f"{failure.checkpoints()}; resume with: {_resume_command(args, failure.run_dir)}",
            file=sys.stderr,
        )
    lines = str(error).strip().splitlines()
    message = f"{type(error).__name__}: {lines[0] if lines else '(no message)'}"
    more = ""
    if failure.error_file is not None:
        others = " and the other seeds' run dirs" if len(failure.seeds) > 1 else ""
        more = f" (full text: {failure.error_file}{others})"
    print(f"batchppo: error: the env raised {message}{more}", file=sys.stderr)
    return EXIT_FAILURE


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from batchppo.experiment import evaluate

    if args.checkpoint is not None and len(args.logdir) > 1:
        raise UserError("--checkpoint picks one run's checkpoint: pass one --logdir with it")
    results = []
    for run_dir in args.logdir:
        stats = evaluate.evaluate_run(
            run_dir, checkpoint=args.checkpoint, num_episodes=args.episodes, seed=args.seed
        )
        results.append({"run_dir": str(run_dir), **stats})
        cut = f", {stats['cut']} cut by eval_max_steps" if stats["cut"] else ""
        print(
            f"{run_dir}: {stats['env']} checkpoint {stats['checkpoint']:,}: mean return "
            f"{stats['mean_return']:.2f} ± {stats['stderr_return']:.2f} (standard error; "
            f"episodes' std {stats['std_return']:.2f}) over {stats['episodes']} episodes, mean "
            f"length {stats['mean_length']:.1f}{cut}",
            flush=True,
        )
    if len(results) > 1:
        summary = evaluate.summarize(results)
        print(
            f"mean over {summary['runs']} runs: {summary['mean']:.2f} ± {summary['std']:.2f} "
            f"(std of the runs' means)"
        )
    if args.json:
        print(f"wrote {evaluate.write_stats(results, args.json)}")
    return 0


def _cmd_visualize(args: argparse.Namespace) -> int:
    from batchppo.experiment import visualize

    if args.num_episodes < 1:
        raise UserError(f"--num_episodes {args.num_episodes}: must be >= 1")
    stats = visualize.visualize(
        args.logdir, args.outdir, checkpoint=args.checkpoint, num_episodes=args.num_episodes,
        seed=args.seed,
    )  # fmt: skip
    for video, ret, length in zip(stats["videos"], stats["returns"], stats["lengths"], strict=True):
        print(f"{video}: return {ret:.2f}, length {length}")
    print(f"mean return {stats['mean_return']:.2f} over {len(stats['returns'])} episodes")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from batchppo.experiment import plot

    phases = plot.PHASES if args.phase == "both" else (args.phase,)
    out = plot.plot_runs(
        args.runs, args.out, x=args.x, panels=args.panels, phases=phases, columns=args.columns
    )
    print(f"wrote {out}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from batchppo.core.backends import get_backend
    from batchppo.experiment import configs

    print(f"{'config':<14} {'env':<16} {'backend':<8} {'steps':>12} {'algorithm':>9}")
    for name, config in configs.PRESETS.items():
        note = ""
        backend = get_backend(config.backend)
        if name == configs.DEFAULT_PRESET:
            note = "  (default)"
        elif not backend.available():
            note = f"  (needs {backend.requires})"
        print(configs.describe(name, config) + note)
    return 0


COMMANDS = {
    "train": _cmd_train,
    "evaluate": _cmd_evaluate,
    "visualize": _cmd_visualize,
    "plot": _cmd_plot,
    "list": _cmd_list,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status.

    Args:
        argv: Arguments without the program name; None: ``sys.argv[1:]``.

    Returns:
        0 on success, 2 for bad input (one-line message on stderr), 1 when an env error
        stopped training (after saving a checkpoint; the resume command and a one-line error
        on stderr), 128 + signal number when training was stopped by a signal (after saving
        a checkpoint).
    """
    # Headless rendering for pygame (classic control) before anything imports it.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UserError as error:
        print(f"batchppo: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("batchppo: aborted; the last checkpoint is kept (resume continues from it)",
              file=sys.stderr)  # fmt: skip
        return 130
    except RuntimeError as error:
        # Imported only here: the common path never pays for importing the Ray env module.
        from batchppo.envs.ray_env import RaySetupError

        if not isinstance(error, RaySetupError):
            raise
        print(f"batchppo: error: {error}", file=sys.stderr)  # a set-up problem: one line
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())

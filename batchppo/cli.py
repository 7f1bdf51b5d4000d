"""The ``batchppo`` command line: ``train``, ``evaluate``, ``visualize``, ``export``, ``plot``,
``list``, ``show`` and ``tune`` (docs/tune.md).

Bad input (an unknown config, a bad config file or ``--set``, a missing or corrupt run dir or
checkpoint, an env that fails its start-up check: its id, module, constructor, keyword
arguments, spaces or reset) prints one line ``batchppo: error: ...`` on stderr and exits with status
2, leaving no run dir behind; ``--debug`` prints the traceback instead. So does a Ray cluster
that cannot be joined or cannot place the env actors (``RaySetupError``), a run dir that
another process trains into (the line names it: pid, host, start time), and a write into the
run dir that failed, such as on a full disk (the previous checkpoint intact). The working
directory is importable, as under ``python -m``, so ``--env myenvs:MyEnv-v0`` finds
``./myenvs.py``.

An env that fails during training (its exception or a dead worker, with ``max_restarts``
0 or spent) stops the run with a checkpoint of its last completed iteration: ``train`` prints
the checkpoint and the resume command on one line, then ``batchppo: error: the env raised
<type>: <message>``, and exits with status 1; the full error, the env's traceback included,
is in ``<run dir>/env_error.txt``. A ``--seeds`` run does the same for every seed's run dir
and prints the ``--seeds N --timestamp T`` command that resumes them all.

The warnings of a run dir (a lock left by a process that died, taken over; a checkpoint
without a checksum, loaded unverified) print as one line ``batchppo: warning: ...`` on
stderr, without Python's file and source line.

``train --timestamp T`` resumes the run ``T`` if it exists and starts it otherwise; the
resume commands ``train`` prints add ``--resume``, under which a run that is not there (a
typo, another ``--logdir``) is an error instead of a fresh run; without ``--config`` it resumes
the one run at ``T`` in ``--logdir`` (several: ``--name`` says which). A run that is complete
already says so in one line (its step, its budget, its final checkpoint) and exits 0 without
building or compiling anything; a larger ``--set steps=N`` trains it on, but where the learning
rate anneals to 0 over its budget (``anneal_lr``): one line then names the new run that trains
the larger budget.

Examples:
    ```shell
    batchppo train --config pendulum_jax --logdir logdir
    batchppo train --config cartpole --logdir logdir --set steps=5e4 --set num_agents=8
    batchppo train --env myenvs:MyReach-v0 --logdir logdir  # a recipe from the env's spaces
    batchppo show pendulum_fast > my.yaml  # edit, then: batchppo train --config my.yaml ...
    batchppo train --config pendulum_jax --logdir logdir --timestamp 20261121T113000 --resume
    batchppo train --config pendulum_jax --logdir logdir --seeds 4  # seeds 0-3, one program
    batchppo evaluate logdir/*-pendulum_jax --episodes 100
    batchppo visualize logdir/20261121T113000-pendulum_jax --outdir videos
    batchppo evaluate logdir/*-hopper_fast-s* --compare old/*-hopper_fast-s* --csv s.csv
    batchppo export logdir/20261121T113000-pendulum_jax --out policy.onnx  # needs [onnx]
    batchppo plot logdir/*-pendulum_jax --out curves.png --x hours
    batchppo plot --profile results.json --reference sac-1m --out profile.png
    batchppo list
    batchppo show cheetah_fast
    batchppo tune --config cartpole_jax --space space.yaml --trials 30  # needs [tune]
    batchppo tune --show studies/cartpole_jax
    ```
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from batchppo.experiment.errors import UserError

if TYPE_CHECKING:
    from pathlib import Path

    from batchppo.experiment.run.training import EnvFailure

EXIT_USAGE = 2
EXIT_FAILURE = 1
# Warning classes defined here are the run dir's (StaleLockWarning, UnverifiedCheckpointWarning)
# and the registries' (EntryPointWarning): printed as one `batchppo: warning:` line, as the
# command line's errors are.
_ONE_LINE_WARNINGS_FROM = ("batchppo.experiment.", "batchppo.core.registry")


def _one_line_warnings(fallback: Callable[..., str]) -> Callable[..., str]:
    """A ``warnings.formatwarning`` that writes the run dir's warnings as one line
    ``batchppo: warning: <message>`` and leaves the others to ``fallback``."""

    def format_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if category.__module__.startswith(_ONE_LINE_WARNINGS_FROM):
            return f"batchppo: warning: {message}\n"
        return fallback(message, category, filename, lineno, line)

    return format_warning


def _parser() -> argparse.ArgumentParser:
    """The command line's parser: one subcommand for each entry of ``COMMANDS``."""
    parser = argparse.ArgumentParser(
        prog="batchppo", description="Batched PPO on JAX: train, evaluate, visualize and plot runs."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_train(sub)
    _add_evaluate(sub)
    _add_visualize(sub)
    _add_export(sub)
    _add_plot(sub)
    sub.add_parser("list", help="list the presets", description="List the presets.")
    _add_show(sub)
    _add_tune(sub)
    return parser


def _debug_argument(parser: argparse.ArgumentParser) -> None:
    """``--debug``: on bad input, the traceback instead of the one-line error."""
    parser.add_argument(
        "--debug", action="store_true",
        help="on bad input, print the traceback instead of the one-line error",
    )  # fmt: skip


def _checkpoint_argument(parser: argparse.ArgumentParser, default: str = "default newest") -> None:
    """``--checkpoint``: the env step of the run's checkpoint to load."""
    parser.add_argument("--checkpoint", type=int, help=f"env step of the checkpoint ({default})")


def _seed_argument(parser: argparse.ArgumentParser) -> None:
    """``--seed`` of the episode starts of ``evaluate`` and ``visualize``."""
    parser.add_argument("--seed", type=int, default=0, help="seed of the episode starts")


def _reference_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--reference``, repeatable: reference scores that normalise the scores of tasks."""
    parser.add_argument("--reference", action="append", default=[], metavar="SPEC", help=help)


def _overrides_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE``, repeatable, into ``overrides``: fields set on top of the config."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def _add_train(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``train`` command's arguments."""
    from batchppo.experiment.config.configs import DEFAULT_PRESET

    train = sub.add_parser(
        "train",
        help="train a preset, a config file or an env (or resume a run)",
        description="Train into <logdir>/<timestamp>-<name>/; an existing timestamp resumes "
        "that run from its last checkpoint with its stored config.",
    )
    _debug_argument(train)
    train.add_argument(
        "--config",
        help=f"a preset name (`batchppo list`; default {DEFAULT_PRESET}, or a recipe chosen "
        "from the env's spaces with --env), or a YAML config file: a full config (a run's "
        "config.yaml, `batchppo show PRESET`) or `base: PRESET` plus the keys that change",
    )  # fmt: skip
    train.add_argument(
        "--env",
        help="the env to train on: a Gymnasium id, module:EnvId (the module registers it) or "
        "module:factory (a callable returning a gymnasium.Env, or an env with gymnax's or "
        "Brax's API, which then runs fused); the working directory is importable. Without "
        "--config a starting recipe is chosen from its API and spaces",
    )  # fmt: skip
    train.add_argument(
        "--name",
        help="run dir name after the timestamp (default: the preset, the config file's stem, "
        "or <preset>-<env> with --env)",
    )  # fmt: skip
    train.add_argument("--logdir", required=True, help="parent directory of runs")
    train.add_argument(
        "--timestamp", help="run name prefix, e.g. 20261121T113000; an existing one resumes"
    )
    _overrides_argument(
        train,
        "override a config field (repeatable), e.g. --set steps=2e5 --set policy_layers=[64,64]",
    )
    train.add_argument(
        "--resume", action="store_true",
        help="the run must exist (what the printed resume commands use): a missing run dir "
        "is an error instead of a new run; without --config, the one run at --timestamp",
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


def _add_evaluate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``evaluate`` command's arguments: the runs, their groups and the statistics."""
    ev = sub.add_parser(
        "evaluate",
        help="evaluate a trained policy over many episodes",
        description="Run episodes of a run's checkpoint in the run's own eval env, by default "
        "as its periodic evaluations do (its config's eval_actions and eval_episodes; "
        "--mean-action, --sample and --episodes change them), and print the mean return with "
        "the protocol it was measured by, its spread and its standard error, the episodes that "
        "terminated and the task metrics the env's infos carry (forward velocity, distance); "
        "no videos. Over several runs (scored alike): mean, median, IQM and optimality gap "
        "with stratified-bootstrap 95% intervals (Agarwal et al. 2021).",
    )
    _run_dirs_argument(
        ev, "+",
        "run directories <logdir>/<ts>-<config>, or JSON files of an earlier --json "
        "(their runs are read, not evaluated again); several runs (say the seeds of a "
        "config) also print the mean and std of their means and their aggregate statistics",
    )  # fmt: skip
    ev.add_argument(
        "--compare", nargs="+", metavar="RUN",
        help="a second group of runs (run dirs or JSON files): both groups' statistics and "
        "the probability that a run of the first beats one of the second",
    )  # fmt: skip
    ev.add_argument(
        "--labels", nargs="+", metavar="NAME",
        help="names of the groups (default: their presets when they differ, else A and B)",
    )  # fmt: skip
    _reference_argument(
        ev,
        "a task's reference score for normalised aggregates: ENV=HIGH or ENV=LOW:HIGH "
        "(HIGH scores 1, LOW 0; default LOW 0), or a set: "
        "sac-1m (SAC's 1M-step returns), targets-1m (the MuJoCo targets at 1M steps); "
        "repeatable; the "
        "aggregates across the runs of several envs need one for each env",
    )
    ev.add_argument(
        "--bootstrap", type=int, default=50_000, metavar="N",
        help="bootstrap resamples of the confidence intervals (default 50000)",
    )  # fmt: skip
    ev.add_argument(
        "--bootstrap-seed", type=int, default=0, metavar="S",
        help="seed of the bootstrap (default 0)",
    )  # fmt: skip
    _checkpoint_argument(ev, "default newest; one run only")
    ev.add_argument(
        "--episodes", type=int, help="episodes per run (default: the run's eval_episodes)"
    )
    _seed_argument(ev)
    actions = ev.add_mutually_exclusive_group()
    actions.add_argument(
        "--mean-action", action="store_true",
        help="act with the mean (deterministic) action (protocol final-mean), whatever the "
        "run's eval_actions",
    )  # fmt: skip
    actions.add_argument(
        "--sample", action="store_true",
        help="act with sampled actions, as training does (protocol final-sampled), whatever "
        "the run's eval_actions; default: as the run's eval_actions says",
    )  # fmt: skip
    ev.add_argument(
        "--training-window", type=int, metavar="N",
        help="score each run by the mean return of its last N training episodes (sampled "
        "actions; CleanRL's and the PPO paper's protocol, N=100; Atari: whole games), read "
        "exactly from its episodes.jsonl, or approximated from the reports of metrics.jsonl "
        "for run dirs without one (with a warning): nothing is run",
    )  # fmt: skip
    ev.add_argument(
        "--max-eval-mean", nargs="?", type=int, const=-1, metavar="STEP",
        help="also print each group's maximum over its evaluation points of the mean over "
        "its runs of their training evals, up to env step STEP (Tianshou's protocol); "
        "written into --stats-json",
    )  # fmt: skip
    ev.add_argument(
        "--json", help="also write each run's results (returns, lengths, task metrics) to "
        "this JSON file (a list)",
    )  # fmt: skip
    ev.add_argument("--csv", help="also write one row per run to this CSV file")
    ev.add_argument("--stats-json", help="also write the aggregate statistics to this JSON file")


def _add_visualize(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``visualize`` command's arguments."""
    vis = sub.add_parser(
        "visualize",
        help="record videos of a trained policy",
        description="Run episodes with the mean action; write one MP4 per episode and "
        "stats.json (returns and lengths).",
    )
    _run_dirs_argument(vis, None, "the run directory <logdir>/<ts>-<config>")
    vis.add_argument("--outdir", required=True, help="where to write the videos")
    _checkpoint_argument(vis)
    vis.add_argument(
        "--num_episodes", "--num-episodes", type=int, default=3, help="episodes (default 3)"
    )
    _seed_argument(vis)


def _add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``export`` command's arguments."""
    exp = sub.add_parser(
        "export",
        help="export a run's policy to ONNX (needs the onnx extra)",
        description="Write the run's policy, from the env's own observation to the env's own "
        "action (range maps and observation normalisation inside), as one ONNX file, and "
        "check it in onnxruntime against load_policy on 3 x 256 observations.",
    )
    _debug_argument(exp)
    exp.add_argument("run_dir", metavar="RUN", help="the run directory <logdir>/<ts>-<config>")
    exp.add_argument(
        "--out", help="the ONNX file (default RUN/policy.onnx, or policy-sampled.onnx)"
    )
    _checkpoint_argument(exp)
    exp.add_argument(
        "--sampled", action="store_true",
        help="export the sampling policy: a second input `noise` (standard normal for a Box "
        "action, standard Gumbel per action for a Discrete one)",
    )  # fmt: skip


def _add_plot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``plot`` command's arguments: learning curves, or performance profiles."""
    plot = sub.add_parser(
        "plot",
        help="plot learning curves of runs",
        description="Learning curves (eval and train score; mean and spread over the runs "
        "of each config) from the runs' metrics.jsonl: one panel per env (or per config), "
        "configs side by side, one shared legend, which names each eval curve's protocol "
        "(the runs' eval_actions and eval_episodes). Runs evaluated by different protocols, "
        "or that share no steps, are drawn apart, each time with a warning line.",
    )
    plot.add_argument(
        "runs", nargs="+", metavar="RUN",
        help="run directories; with --profile, JSON files of `batchppo evaluate --json`",
    )  # fmt: skip
    plot.add_argument("--out", required=True, help="output PNG file")
    plot.add_argument("--x", choices=("steps", "hours"), default="steps", help="x-axis")
    plot.add_argument(
        "--panels", choices=("env", "config"), default="env",
        help="one panel per env (default; configs side by side) or per config",
    )  # fmt: skip
    plot.add_argument(
        "--phase", choices=("both", "eval", "train"), default="both",
        help="curves to draw: eval (as the runs' eval_actions and eval_episodes say), train "
        "(sampled actions) or both (default)",
    )  # fmt: skip
    plot.add_argument("--columns", type=int, default=3, help="panels per row (default 3)")
    plot.add_argument(
        "--profile", action="store_true",
        help="draw performance profiles instead (Agarwal et al. 2021): per group of evaluated "
        "runs (the entries' group, else the file's name), the fraction of runs whose score "
        "exceeds each threshold, with 95%% stratified-bootstrap bands (2000 resamples)",
    )  # fmt: skip
    _reference_argument(
        plot,
        "with --profile: normalise scores as `batchppo evaluate --reference` does "
        "(needed for runs of several envs)",
    )


def _add_show(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``show`` command's arguments."""
    show = sub.add_parser(
        "show",
        help="print a preset (or config file) as YAML",
        description="Print a config as the YAML of a run's config.yaml: a full config to "
        "copy, edit and train with --config FILE.",
    )
    _debug_argument(show)
    show.add_argument("config", metavar="CONFIG", help="a preset name or a YAML config file")


def _add_tune(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``tune`` command's arguments (docs/tune.md)."""
    tune = sub.add_parser(
        "tune",
        help="search hyperparameters with Optuna (needs the tune extra)",
        description="Run (or resume) an Optuna study: each trial takes values from the search "
        "space, trains --seeds seeds of the config with them into STUDY/trials/<number>/ and "
        "is scored by the IQM of their final evaluations (or --objective); periodic "
        "evaluations go to the pruner. Writes STUDY/best.yaml (train it with --config), "
        "history.png and importances.png.",
    )
    _debug_argument(tune)
    tune.add_argument(
        "--config", help="a preset or a YAML config file, as train's (default: the study's own)"
    )
    _overrides_argument(tune, "override a field of --config (repeatable), e.g. --set steps=1e5")
    tune.add_argument(
        "--space", metavar="FILE",
        help="the search space: a YAML file of config keys, e.g. learning_rate: "
        "{log_uniform: [1.0e-5, 1.0e-2]} (default: the study's own)",
    )  # fmt: skip
    tune.add_argument(
        "--trials", type=int, metavar="N",
        help="complete or pruned trials the study should have; a rerun runs the rest",
    )  # fmt: skip
    tune.add_argument("--seeds", type=int, metavar="K", help="seeds per trial (default 3)")
    tune.add_argument(
        "--batch", type=int, default=1, metavar="B",
        help="fused backends: ask for B trials at a time and train them (B x K runs) as one "
        "compiled program (default 1: one trial after another)",
    )  # fmt: skip
    tune.add_argument(
        "--study", metavar="DIR", help="the study's directory (default studies/<config name>)"
    )
    tune.add_argument(
        "--storage", metavar="URL",
        help="an Optuna storage URL (postgresql://..., mysql://..., sqlite:///...) or "
        "journal:PATH, which several processes share (default sqlite:///STUDY/study.db)",
    )  # fmt: skip
    tune.add_argument("--study-name", help="the study's name in the storage (default: DIR's)")
    tune.add_argument(
        "--objective", metavar="SPEC",
        help="iqm (default: the IQM of the seeds' final eval scores, maximised) or "
        "steps-to:VALUE (the first step at which their mean eval score reaches VALUE, "
        "minimised)",
    )  # fmt: skip
    tune.add_argument(
        "--pruner", choices=("median", "halving", "none"), default="median",
        help="Optuna's median pruner (default), successive halving, or none",
    )  # fmt: skip
    tune.add_argument("--sampler-seed", type=int, metavar="S", help="seed of the TPE sampler")
    tune.add_argument(
        "--heartbeat", type=int, default=60, metavar="SECONDS",
        help="database storages: a running trial's heartbeat; a trial silent for twice that "
        "is failed and retried (default 60)",
    )  # fmt: skip
    tune.add_argument(
        "--progress", choices=("auto", "bar", "lines", "none"), default="auto",
        help="a bar of trials on a terminal, a line per trial otherwise (default auto)",
    )  # fmt: skip
    tune.add_argument(
        "--show", metavar="DIR", help="print the table of the study in DIR's trials and exit"
    )


RUN_DIR_ALIAS = "--logdir"
"""The flag that named the run dirs of ``evaluate`` and ``visualize`` before they were
positional (``RUN``) as in ``export`` and ``plot``: still taken, with a warning."""


def _run_dirs_argument(parser: argparse.ArgumentParser, nargs: str | None, help: str) -> None:
    """The run dirs as the positional ``RUN`` (``nargs`` ``"+"`` or None: one), and
    ``RUN_DIR_ALIAS`` as an alias; ``_run_dirs`` reads them into ``args.logdir``."""
    parser.add_argument(
        "runs", nargs="*" if nargs == "+" else "?", metavar="RUN", help=help, default=None
    )
    parser.add_argument(
        RUN_DIR_ALIAS, dest="logdir_alias", nargs=nargs, metavar="RUN",
        help=argparse.SUPPRESS,  # the same as RUN, the old spelling: warns
    )  # fmt: skip


def _run_dirs(args: argparse.Namespace) -> None:
    """Sets ``args.logdir`` to the run dirs of a command with ``_run_dirs_argument``: the
    positional ones, or those of the alias (with a one-line warning on stderr).

    Raises:
        UserError: Both, or neither.
    """
    if not hasattr(args, "logdir_alias"):
        return
    given = args.runs if args.runs not in (None, []) else None
    alias = args.logdir_alias
    command = f"batchppo {args.command}"
    if given is not None and alias is not None:
        raise UserError(f"{command}: name the run dirs once, as RUN (not also {RUN_DIR_ALIAS})")
    if given is None and alias is None:
        raise UserError(f"{command}: the run dir is missing: {command} RUN ...")
    if alias is not None:
        print(
            f"batchppo: warning: {RUN_DIR_ALIAS} RUN is the old spelling of the positional "
            f"RUN: {command} RUN ...",
            file=sys.stderr,
        )
    args.logdir = given if given is not None else alias


def _run_name(args: argparse.Namespace, config_name: str | None) -> str | None:
    """The run dir's name: ``--name``; else the config's name, with the env's after it when
    ``--env`` replaced the config's env; None for a recipe (the env's name)."""
    if args.name:
        return args.name
    if config_name is None:
        return None
    if args.env:
        return f"{config_name}-{args.env.rpartition(':')[2]}"
    return config_name


def _train_config(args: argparse.Namespace) -> tuple[object, str | None]:
    """What ``train`` trains: a preset name, a config read from a file, or None (a recipe
    chosen from ``--env``'s spaces), and the run's name."""
    from batchppo.experiment.config import configs

    if args.config is None and args.env is None:
        args.config = configs.DEFAULT_PRESET
    if args.config is None:
        return None, _run_name(args, None)
    if configs.is_config_file(args.config):
        config, stem = configs.resolve_config(args.config)
        return config, _run_name(args, stem)
    configs.get_preset(args.config)  # Unknown names fail before anything is created.
    name = _run_name(args, args.config)
    return args.config, None if name == args.config else name


def _find_resumed_run(args: argparse.Namespace) -> None:
    """``--resume --timestamp T`` without ``--config`` or ``--env``: resumes the one run at
    ``T`` in ``--logdir`` (``rundir.find_run_name``; ``--name`` and ``--seeds`` narrow it),
    by its preset's name, else by its stored ``config.yaml`` under its name."""
    if not (args.resume and args.timestamp and args.config is None and args.env is None):
        return
    from pathlib import Path

    from batchppo.experiment.artifacts import rundir
    from batchppo.experiment.config import configs

    name = rundir.find_run_name(args.logdir, args.timestamp, args.name, args.seeds)
    if name in configs.PRESETS:
        args.config, args.name = name, None  # the preset's name is the run's
        return
    dir_name = configs.seed_run_name(name, 0) if args.seeds is not None else name
    args.config = str(Path(args.logdir) / f"{args.timestamp}-{dir_name}" / rundir.CONFIG_FILE)
    args.name = name


def _cmd_train(args: argparse.Namespace) -> int:
    from batchppo.experiment.artifacts.eval_protocol import score_text
    from batchppo.experiment.config.resume import ExtensionError
    from batchppo.experiment.errors import ConfigError
    from batchppo.experiment.run import training

    _find_resumed_run(args)
    config, name = _train_config(args)
    if os.environ.get("BATCHPPO_COMPILATION_CACHE", "1") != "0":
        # Repeat runs of a config then skip XLA compilation (most of a short run's start-up).
        from batchppo.algorithms.training.programs import enable_compilation_cache

        enable_compilation_cache()
    try:
        result = training.train(
            config,
            args.logdir,
            env=args.env,
            name=name,
            timestamp=args.timestamp,
            overrides=args.overrides,
            progress=args.progress,
            seeds=args.seeds,
            resume=args.resume,
        )
    except ExtensionError as error:  # the command that trains the longer budget instead
        raise ConfigError(
            f"cannot extend the run to steps={error.steps}: {error.reason}; train a new run "
            f"of that budget instead: {shlex.join(_train_command(args))}"
        ) from None
    except Exception as error:
        failure = training.env_failure(error)  # an env error that stopped the run
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
    score = score_text(result.score, result.protocol)
    print(f"done: {result.step:,} steps, eval score {score}, run dir {result.run_dir}")
    return 0


def _resume_command(args: argparse.Namespace, run_dir: Path) -> str:
    """The command that resumes a stopped ``train`` run, shell-quoted.

    Args:
        args: The ``train`` command's arguments.
        run_dir: The run's dir; with ``--seeds``, seed 0's (``<timestamp>-<config>-s0``),
            and the command resumes every seed (``--seeds N --timestamp T``).
    """
    from batchppo.experiment.config import configs
    from batchppo.experiment.run import training

    command = _train_command(args, overrides=False)
    name = _run_name(args, _config_name(args)) or args.env.rpartition(":")[2]
    if args.seeds is not None:
        name = configs.seed_run_name(name, 0)
    return shlex.join([*command, "--timestamp", training.run_timestamp(run_dir, name), "--resume"])


def _train_command(args: argparse.Namespace, overrides: bool = True) -> list[str]:
    """The ``train`` command of ``args`` without ``--timestamp`` and ``--resume`` (a new
    run), its ``--set`` overrides with ``overrides``, as a list of words."""
    command = ["batchppo", "train"]
    for flag, value in (("--config", args.config), ("--env", args.env), ("--name", args.name)):
        if value is not None:
            command += [flag, value]
    command += ["--logdir", args.logdir]
    if args.seeds is not None:
        command += ["--seeds", str(args.seeds)]
    for override in args.overrides if overrides else ():
        command += ["--set", override]
    return command


def _config_name(args: argparse.Namespace) -> str | None:
    from pathlib import Path

    from batchppo.experiment.config import configs

    if args.config is None:
        return None
    return Path(args.config).stem if configs.is_config_file(args.config) else args.config


def _report_seeds(args: argparse.Namespace, results: list) -> int:
    """Prints the outcome of a ``--seeds`` run (one line per seed); the exit status."""
    from batchppo.experiment.artifacts.eval_protocol import score_text

    first = results[0]
    if first.interrupted:
        print(f"stopped at step {first.step:,}; checkpoints saved", file=sys.stderr)
        if first.run_dir:
            print(f"resume with: {_resume_command(args, first.run_dir)}")
        return 128 + (first.stop_signal or 2)
    for result in results:
        score = score_text(result.score, result.protocol)
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
        failure: Its ``EnvFailure``.
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
    from batchppo.experiment.analysis import evaluate, stats

    inputs = [args.logdir] + ([args.compare] if args.compare else [])
    if args.checkpoint is not None and (
        len(args.logdir) > 1 or args.compare or evaluate.is_results_file(args.logdir[0])
    ):
        raise UserError("--checkpoint picks one run's checkpoint: pass one --logdir with it")
    if args.labels is not None and len(args.labels) != len(inputs):
        raise UserError(f"--labels: {len(args.labels)} names for {len(inputs)} groups")
    if args.labels is not None and len(set(args.labels)) != len(args.labels):
        raise UserError(f"--labels: the names {' '.join(args.labels)} must differ")
    if args.bootstrap < 1:
        raise UserError(f"--bootstrap {args.bootstrap}: must be >= 1")
    if args.training_window is not None and (
        args.sample or args.mean_action or args.checkpoint is not None or args.episodes is not None
    ):
        raise UserError(
            "--training-window reads the runs' training episodes: it takes none of --sample, "
            "--mean-action, --checkpoint and --episodes"
        )
    references = stats.parse_references(args.reference)
    loaded = [_load_group(runs, args) for runs in inputs]
    labels = args.labels or evaluate.default_labels(
        [[run.preset for run in group] for group in loaded]
    )
    evaluate.check_groups(
        {label: [run.env for run in g] for label, g in zip(labels, loaded, strict=True)}
    )
    evaluate.check_protocols(
        {label: [run.kind for run in g] for label, g in zip(labels, loaded, strict=True)}
    )
    if args.stats_json and sum(map(len, loaded)) < 2:
        raise UserError("--stats-json: aggregate statistics need at least 2 runs")
    groups: dict[str, list[dict]] = {}
    for label, group in zip(labels, loaded, strict=True):
        results = groups.setdefault(label, [])
        for run in group:
            saved = run.saved if run.saved is not None else _score_run(run.run_dir, args)
            results.append(saved)
            _print_run(saved, None if run.saved is not None else _protocol_source(args))
    runs = [r for results in groups.values() for r in results]
    for label, results in groups.items():
        if len(results) > 1:
            summary = evaluate.summarize(results)
            where = f"group {label}: " if len(groups) > 1 else ""
            print(
                f"{where}mean over {summary['runs']} runs: {summary['mean']:.2f} ± "
                f"{summary['std']:.2f} (std of the runs' means; each "
                f"{evaluate.group_protocol(results)})"
            )
    statistics = None
    if len(runs) > 1:
        statistics = evaluate.group_statistics(
            groups, references, resamples=args.bootstrap, seed=args.bootstrap_seed
        )
        print("\n".join(evaluate.format_statistics(statistics)))
    if args.max_eval_mean is not None:
        statistics = {**(statistics or {}), "max_eval_mean": _max_eval_means(groups, args)}
    if args.json:
        print(f"wrote {evaluate.write_stats(evaluate.results_document(groups), args.json)}")
    if args.csv:
        print(f"wrote {evaluate.write_csv(groups, args.csv)}")
    if args.stats_json:
        print(f"wrote {evaluate.write_stats(statistics, args.stats_json)}")
    return 0


def _score_run(run_dir: str, args: argparse.Namespace) -> dict:
    """One run's results entry by the protocol that ``args`` asks for."""
    from batchppo.experiment.analysis import evaluate, protocols
    from batchppo.experiment.artifacts import provenance

    if args.training_window is not None:
        entry = protocols.training_window(run_dir, args.training_window)
    else:
        entry = {"run_dir": str(run_dir), **evaluate.evaluate_run(
            run_dir, checkpoint=args.checkpoint, num_episodes=args.episodes, seed=args.seed,
            sample=_sample(args),
        )}  # fmt: skip
    return {**entry, **provenance.run_provenance(run_dir)}


def _sample(args: argparse.Namespace) -> bool | None:
    """``evaluate_run``'s ``sample``: True for ``--sample``, False for ``--mean-action``,
    None (the run's ``eval_actions``) for neither."""
    return True if args.sample else False if args.mean_action else None


def _protocol_source(args: argparse.Namespace) -> str | None:
    """What of a run dir's protocol came from the run itself rather than the command line,
    as a run's line says it; None where the command line gave it all."""
    if args.training_window is not None:
        return None
    own = [
        name for name, given in (("eval_episodes", args.episodes is not None),
                                 ("eval_actions", args.mean_action or args.sample))
        if not given
    ]  # fmt: skip
    if len(own) == 2:
        return "the run's own protocol"
    return f"the run's {own[0]}" if own else None


def _max_eval_means(groups: dict[str, list[dict]], args: argparse.Namespace) -> dict:
    """Prints and returns each group's and env's ``max-eval-mean`` (Tianshou's protocol)."""
    from batchppo.experiment.analysis import protocols

    max_step = None if args.max_eval_mean < 0 else args.max_eval_mean
    out: dict[str, dict] = {}
    for label, results in groups.items():
        by_env: dict[str, list[str]] = {}
        for r in results:
            by_env.setdefault(r["env"], []).append(r["run_dir"])
        for env, run_dirs in by_env.items():
            m = protocols.max_eval_mean(run_dirs, max_step)
            out.setdefault(label, {})[env] = m
            print(
                f"group {label}: {env} max-eval-mean {m['value']:.1f} at step {m['step']:,} "
                f"(std over {m['runs']} runs {m['std']:.1f}; {m['points']} evaluation points "
                f"of {'/'.join(map(str, m['episodes']))} episodes, {m['actions']} actions)"
            )
    return out


class _GroupRun(NamedTuple):
    """A run of an ``evaluate`` group, read before anything is evaluated."""

    run_dir: str
    preset: str
    env: str
    saved: dict | None
    """Its entry of an ``evaluate --json`` file; None: a run dir, to be scored."""
    kind: str
    """How it is (to be) scored: ``evaluate.protocol_kind``."""


def _load_group(runs: list[str], args: argparse.Namespace) -> list[_GroupRun]:
    """The runs of a group; an ``evaluate --json`` file stands for its runs, with their saved
    results; a run dir is to be scored as ``args`` say (``run_protocol``, checked here).
    """
    from batchppo.experiment.analysis import evaluate, plot
    from batchppo.experiment.run import training

    group: list[_GroupRun] = []
    for run in runs:
        if evaluate.is_results_file(run):
            for e in evaluate.load_results(run):
                preset = e.get("preset") or plot.run_group(e["run_dir"])
                kind = evaluate.protocol_kind(e.get("protocol"))
                group.append(_GroupRun(e["run_dir"], preset, e["env"], e, kind))
            continue
        config, _ = training.open_run_dir(run)
        if args.training_window is not None:
            kind = "training-window"
        else:
            protocol = evaluate.run_protocol(config, args.episodes, _sample(args), run)
            kind = "final-sampled" if protocol.actions == "sampled" else "final-mean"
        group.append(_GroupRun(run, plot.run_group(run), config.env, None, kind))
    return group


def _print_run(stats: dict, source: str | None = None) -> None:
    """One run's results line (and the line of its falls and task metrics).

    Args:
        stats: Its results entry.
        source: What of its protocol the run set (``_protocol_source``), for a run scored now.
    """
    from batchppo.experiment.analysis import evaluate

    if stats.get("protocol", "").startswith("training-window"):
        _print_window(stats)
        return
    cut = f", {stats['cut']} cut by eval_max_steps" if stats.get("cut") else ""
    how = "sampled actions" if stats.get("protocol") == "final-sampled" else "the mean action"
    how += f" ({source})" if source else ""
    print(
        f"{stats['run_dir']}: {stats['env']} checkpoint {stats['checkpoint']:,}: mean return "
        f"{stats['mean_return']:.2f} ± {stats['stderr_return']:.2f} (standard error; "
        f"episodes' std {stats['std_return']:.2f}) over {stats['episodes']} episodes with "
        f"{how}, mean length {stats['mean_length']:.1f}{cut}",
        flush=True,
    )
    if "terminated" in stats:
        print(evaluate.format_run(stats), flush=True)


def _print_window(stats: dict) -> None:
    """One run's training window: exact, or approximated from its reports (older run dirs and
    results files, whose protocol is ``training-window``)."""
    exact = stats["protocol"] == "training-window-exact"
    unit = stats.get("unit", "episodes")
    raw = "; all lives, raw scores" if unit == "games" else ""
    how = "exact" if exact else "approximated from its train reports' means"
    spread = f" ± {stats['stderr_return']:.2f} (standard error)" if exact else ""
    print(
        f"{stats['run_dir']}: {stats['env']} mean return {stats['mean_return']:.2f}{spread} "
        f"over its last {stats['episodes']} training {unit} (steps {stats['first_step']:,}-"
        f"{stats['checkpoint']:,}; sampled actions{raw}; {how})",
        flush=True,
    )


def _cmd_visualize(args: argparse.Namespace) -> int:
    from batchppo.experiment.artifacts import visualize

    if args.num_episodes < 1:
        raise UserError(f"--num_episodes {args.num_episodes}: must be >= 1")
    stats = visualize.visualize(
        args.logdir, args.outdir, checkpoint=args.checkpoint, num_episodes=args.num_episodes,
        seed=args.seed, progress=True,
    )  # fmt: skip
    print(
        f"mean return {stats['mean_return']:.2f} over {len(stats['returns'])} episodes with the "
        "mean action"
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from batchppo.experiment.artifacts import export

    info = export.export_run(
        args.run_dir, args.out, checkpoint=args.checkpoint, sampled=args.sampled
    )
    kind = "sampled" if info.sampled else "mean-action"
    print(f"wrote {info.path}: {kind} policy of step {info.step:,}")
    print(f"inputs: {'; '.join(info.inputs)}; outputs: {'; '.join(info.outputs)} (the env's own "
          "spaces)")  # fmt: skip
    print(f"checked against load_policy on {export.CHECK_STEPS} x {export.CHECK_BATCH} "
          f"observations: max abs difference {info.max_abs_diff:.3g}")  # fmt: skip
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from batchppo.experiment.analysis import plot

    if args.reference and not args.profile:
        raise UserError("--reference applies to --profile only")
    if args.profile:
        from batchppo.experiment.analysis import stats

        references = stats.parse_references(args.reference)
        print(f"wrote {plot.plot_profile(args.runs, args.out, references)}")
        return 0
    phases = plot.PHASES if args.phase == "both" else (args.phase,)
    out = plot.plot_runs(
        args.runs, args.out, x=args.x, panels=args.panels, phases=phases, columns=args.columns
    )
    print(f"wrote {out}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from batchppo.backends import get_backend
    from batchppo.experiment.config import configs

    rows = [("config", "env", "backend", "steps", "algorithm", "")]
    for name, config in configs.PRESETS.items():
        missing = get_backend(config.backend).missing(config.env)
        note = f"(needs {missing.name})" if missing is not None else ""
        if name == configs.DEFAULT_PRESET:
            note = " ".join(("(default)", note)).strip()
        rows.append((*configs.describe(name, config), note))
    print("\n".join(_table(rows, right=(3,))))
    return 0


def _table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """``rows`` as lines of aligned columns, each as wide as its widest cell, two spaces
    apart; the columns ``right`` aligned right, the others left; trailing spaces dropped."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _cmd_show(args: argparse.Namespace) -> int:
    from batchppo.experiment.config import configs

    config, _ = configs.resolve_config(args.config)
    print(configs.config_to_yaml(config), end="")
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from pathlib import Path

    from batchppo.experiment import tune

    if args.show is not None:
        rows, lines = tune.show(args.show, args.storage, args.study_name)
        print("\n".join([*lines, *_table(rows, right=(0, 2))]))
        return 0
    if args.trials is None:
        raise UserError("batchppo tune: give --trials N (or --show DIR)")
    if args.study is None and args.config is None:
        raise UserError("batchppo tune: give --config (a new study) or --study DIR (resume one)")
    study = args.study or str(Path("studies") / Path(args.config).stem)
    if os.environ.get("BATCHPPO_COMPILATION_CACHE", "1") != "0":
        from batchppo.algorithms.training.programs import enable_compilation_cache

        enable_compilation_cache()
    result = tune.tune(
        args.config, args.space, args.trials, study, seeds=args.seeds, overrides=args.overrides,
        storage=args.storage, study_name=args.study_name, objective=args.objective,
        pruner=args.pruner, sampler_seed=args.sampler_seed, heartbeat=args.heartbeat,
        progress=args.progress, batch=args.batch,
    )  # fmt: skip
    print(tune.summary_line(result))
    for line in result.lines:
        print(line)
    if result.best is not None:
        print(f"wrote {result.best}; train it: batchppo train --config {result.best} --logdir "
              "logdir")  # fmt: skip
    if result.stopped is not None:
        print(
            f"batchppo: stopped the study by {signal.Signals(result.stopped).name}; the trial "
            "is failed and queued again: rerun the command to go on",
            file=sys.stderr,
        )
        return 128 + result.stopped
    return 0


COMMANDS = {
    "train": _cmd_train,
    "evaluate": _cmd_evaluate,
    "visualize": _cmd_visualize,
    "export": _cmd_export,
    "plot": _cmd_plot,
    "list": _cmd_list,
    "show": _cmd_show,
    "tune": _cmd_tune,
}


def _shows_cause(args: argparse.Namespace, error: BaseException) -> bool:
    """Whether ``--debug`` would show more than ``error``: a command with the flag, and an
    error raised from another exception (an env's, say)."""
    return hasattr(args, "debug") and error.__cause__ is not None


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
    # Only printing changes: a caller that records warnings (catch_warnings) still gets them.
    # Set before the parser, whose presets read the backend registry (its entry points load).
    formatter: Any = warnings.formatwarning
    warnings.formatwarning = _one_line_warnings(formatter)
    try:
        args = _parser().parse_args(argv)
    except BaseException:
        warnings.formatwarning = formatter
        raise
    # The working directory is importable, as under `python -m`: `--env myenvs:MyEnv-v0` finds
    # ./myenvs.py (a console script's sys.path[0] is its bin directory instead).
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        _run_dirs(args)
        return COMMANDS[args.command](args)
    except UserError as error:
        if getattr(args, "debug", False):
            traceback.print_exception(error)
        else:
            # The traceback of what the env raised is one flag away.
            more = " (--debug shows the traceback)" if _shows_cause(args, error) else ""
            print(f"batchppo: error: {error}{more}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("batchppo: aborted; the last checkpoint is kept (resume continues from it)",
              file=sys.stderr)  # fmt: skip
        return 130
    except RuntimeError as error:
        # Imported only here: the common path never pays for importing the Ray env module.
        from batchppo.envs.adapters.ray_env import RaySetupError

        if not isinstance(error, RaySetupError):
            raise
        print(f"batchppo: error: {error}", file=sys.stderr)  # a set-up problem: one line
        return EXIT_USAGE
    finally:
        warnings.formatwarning = formatter
        if added and cwd in sys.path:
            sys.path.remove(cwd)


if __name__ == "__main__":
    raise SystemExit(main())

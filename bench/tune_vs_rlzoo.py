r"""Hyperparameter search side by side on Pendulum-v1: ``batchppo tune`` against
rl-baselines3-zoo's ``train.py --optimize`` (rl-zoo3 with Stable-Baselines3's PPO), trials per
hour and the best objective found, each side given the same wall-clock.

Each side is one study, run in a process of its own for ``--minutes`` of wall-clock and then
stopped with SIGINT (as Ctrl-C; killed after ``--grace`` seconds). Every side stores its study
in an SQLite file through Optuna; once it has stopped, the script reads that study and counts
the trials that ended, complete or pruned, within the allowance (a trial still running at the
deadline does not count, on any side). From them:

* ``trials/h``: those trials over the allowance, start-up and compilation included;
* ``trials/CPU-h``: the same trials over the CPU time of the side's process tree (sampled
  every half second up to the deadline), which depends far less than wall-clock on what else
  runs on the machine;
* ``best``: the best objective among the complete trials: the final evaluation's mean return
  (the higher the better);
* ``first``: seconds from the launch to the first trial's end (start-up, compilation and one
  trial); ``trial``: the median duration of the complete trials.

The ratios divide each batchppo side's figure by rl-zoo's, and each ``batchN`` side's by
``batch1``'s.

Sides (``--sides``):

* ``rlzoo``: ``python -m rl_zoo3.train --algo ppo --env Pendulum-v1 -optimize`` under
  ``--rlzoo-python`` (a virtualenv with rl-zoo3 and its SB3, torch on the CPU), its own search
  space (``rl_zoo3.hyperparams_opt.sample_ppo_params``) around its Pendulum-v1 entry of
  ``hyperparams/ppo.yml`` (4 envs, gSDE), torch on ``--rlzoo-threads`` threads (default one:
  for PPO's small networks a thread per core is slower, far slower where other processes
  share the cores, since torch's threads wait for each other);
* ``host``: ``batchppo tune --config pendulum_fast`` (the ``process`` backend: Gymnasium's
  Pendulum-v1 in worker processes);
* ``fused``: ``batchppo tune --config pendulum_jax`` (gymnax's Pendulum-v1 in one compiled
  program), one trial at a time;
* ``batchN``: the same with ``--batch N``: N trials trained as one compiled program. A
  checkout whose ``batchppo tune`` has no ``--batch`` refuses these sides in one line.

What every side shares: the step budget of a trial (``--steps``: rl-zoo's ``--n-timesteps``,
batchppo's ``steps``); one seed per trial (rl-zoo's objective trains one model, unseeded, per
trial, so batchppo's sides run ``--seeds 1`` and the script refuses another count beside
rl-zoo); ``--evaluations`` evaluations per trial at equal intervals, each of
``--eval-episodes`` episodes with the mean (deterministic) action, the last one the trial's
value; Optuna's TPE sampler seeded with ``--sampler-seed`` and its median pruner, which prunes
from the sixth trial on after the first third of a trial's evaluations (rl-zoo's
``--n-startup-trials 5``, batchppo's own setting). What differs is in ``DIFFERENCES``, and
the run's JSON records it.

Install the peer into a virtualenv of its own (rl-zoo3 pins its own SB3 and torch), then::

    python3 -m venv /work/venvs/rlzoo
    /work/venvs/rlzoo/bin/pip install rl_zoo3==2.9.2 stable-baselines3==2.9.2 torch==2.13.0 \
        optuna pandas   # pandas: the report rl-zoo writes when stopped
    python bench/tune_vs_rlzoo.py --rlzoo-python /work/venvs/rlzoo/bin/python --minutes 10 \
        --sides rlzoo,host,fused,batch1,batch8 --json docs/results/tune-vs-rlzoo-<date>.json
    # a smoke test: a few tiny trials a side
    python bench/tune_vs_rlzoo.py --rlzoo-python /work/venvs/rlzoo/bin/python --sides rlzoo,fused \
        --minutes 1 --steps 4096 --evaluations 2 --eval-episodes 2
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENV_ID = "Pendulum-v1"
HOST_CONFIG = "pendulum_fast"
FUSED_CONFIG = "pendulum_jax"
BASELINE = "rlzoo"
MAX_TRIALS = 100_000
"""The trials each study is asked for: more than any allowance runs, so the deadline ends it."""
STARTUP_TRIALS = 5
"""rl-zoo's ``--n-startup-trials``: its median pruner's warm-up in trials, batchppo's
(``batchppo.experiment.tune.MEDIAN_STARTUP_TRIALS``)."""

SPACE: dict[str, dict[str, list[Any]]] = {
    "learning_rate": {"log_uniform": [1.0e-5, 2.0e-3]},
    "discount": {"uniform": [0.97, 0.9999]},
    "gae_lambda": {"uniform": [0.9, 0.9999]},
    "entropy_coef": {"log_uniform": [1.0e-8, 0.1]},
    "clip_epsilon": {"choice": [0.1, 0.2, 0.3, 0.4]},
}
"""batchppo's search space: the keys of rl-zoo's PPO sampler that change no shape (so that a
batch of trials is one program), over its ranges."""

PROTOCOL = (
    "each side one Optuna study in its own process for the same wall-clock allowance, then "
    "SIGINT; counted: trials complete or pruned by the deadline (from the study's storage); "
    "one seed per trial; the value of a trial its last evaluation's mean return over "
    "--eval-episodes episodes with the mean action; TPE sampler, median pruner (5 startup "
    "trials, first third of a trial as warm-up)"
)
DIFFERENCES = [
    "Search space: rl-zoo searches its own sampler's 11 parameters (n_steps 2^5-2^12, batch "
    "size 2^2-2^10, gamma 1-[1e-4, 0.03] log, GAE lambda 1-[1e-4, 0.1] log, lr [1e-5, 2e-3] "
    "log, ent_coef [1e-8, 0.1] log, clip range {0.1..0.4}, epochs {1, 5, 10, 20}, max grad "
    "norm [0.3, 2], net arch tiny/small/medium, tanh/relu); batchppo's sides search the five "
    "of them that change no shape (SPACE) over the same ranges, discount and GAE lambda "
    "uniform rather than log-uniform in 1 - x, and keep the rest at the preset's values.",
    "Settings around the search: rl-zoo's Pendulum-v1 entry (4 envs, gSDE, no normalisation); "
    "batchppo's pendulum_jax / pendulum_fast (64 envs, 32-step rollouts, 10 epochs of 16 "
    "minibatches, observation and reward normalisation, annealed learning rate).",
    "TPE's random start-up: rl-zoo's --n-startup-trials sets both its sampler's and its "
    "pruner's (5 here); batchppo's sampler keeps Optuna's default of 10.",
    "Seeds: rl-zoo trains each trial's model unseeded (its objective passes seed=None); "
    "batchppo trains every trial with the config's seed 0.",
    "rl-zoo evaluates on one env, episode after episode; batchppo its eval episodes at once.",
    "A batchppo trial's budget is rounded up to whole iterations (2,048 steps), rl-zoo's to "
    "whole rollouts (n_steps x 4).",
]

RLZOO_PACKAGES = (
    "rl_zoo3", "stable_baselines3", "torch", "optuna", "gymnasium", "numpy", "pandas"
)  # fmt: skip
OUR_PACKAGES = ("batchppo", "jax", "jaxlib", "gymnax", "optuna", "gymnasium", "numpy")
BATCH_SIDE = re.compile(r"batch([1-9]\d*)")
DONE_STATES = ("COMPLETE", "PRUNED")


@dataclasses.dataclass(frozen=True)
class SideSpec:
    """A side of the comparison.

    Attributes:
        name: Its name in ``--sides`` and the rows.
        config: The batchppo preset it tunes; None for rl-zoo.
        batch: ``--batch`` (trials per program); None: no ``--batch``.
    """

    name: str
    config: str | None = None
    batch: int | None = None


def parse_sides(text: str) -> list[SideSpec]:
    """The sides of ``--sides`` (comma-separated: rlzoo, host, fused, batchN).

    Raises:
        SystemExit: An unknown or repeated side, in one line.
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    specs = []
    for name in names:
        if name == BASELINE:
            specs.append(SideSpec(name))
        elif name == "host":
            specs.append(SideSpec(name, HOST_CONFIG))
        elif name == "fused":
            specs.append(SideSpec(name, FUSED_CONFIG))
        elif match := BATCH_SIDE.fullmatch(name):
            specs.append(SideSpec(name, FUSED_CONFIG, int(match.group(1))))
        else:
            raise SystemExit(
                f"--sides: unknown side {name!r}; the sides: rlzoo, host, fused, batchN "
                "(N trials in one program, N >= 1)"
            )
    if not specs:
        raise SystemExit("--sides: name at least one side (rlzoo, host, fused, batchN)")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise SystemExit(f"--sides: {', '.join(repeated)} given twice: name each side once")
    return specs


def check_sides(specs: Sequence[SideSpec], seeds: int, tune_help: str) -> None:
    """Refuses, in one line, sides the checkout or the protocol cannot run: a ``batchN`` side
    where ``batchppo tune`` (its ``--help``: ``tune_help``) has no ``--batch``, and a seed count
    other than one beside rl-zoo, which trains one seed per trial.

    Raises:
        SystemExit: The first such side.
    """
    if seeds < 1:
        raise SystemExit(f"--seeds {seeds}: must be >= 1")
    if seeds != 1 and any(spec.name == BASELINE for spec in specs):
        raise SystemExit(
            f"--seeds {seeds}: rl-zoo's --optimize trains one seed per trial; keep --seeds 1 "
            "with the rlzoo side, or drop rlzoo from --sides"
        )
    has_batch = re.search(r"--batch\b", tune_help) is not None
    for spec in specs:
        if spec.batch is not None and not has_batch:
            raise SystemExit(
                f"--sides {spec.name}: this checkout's `batchppo tune` has no --batch (many "
                "trials in one program); drop the batchN sides from --sides"
            )


def tune_help() -> str:
    """``batchppo tune --help`` of this checkout (what it supports)."""
    from harness import python_env

    out = subprocess.run(
        [sys.executable, "-m", "batchppo", "tune", "--help"],
        capture_output=True, text=True, env=python_env(), check=True,
    )  # fmt: skip
    return out.stdout


def eval_every(steps: int, evaluations: int) -> int:
    """Env steps between a batchppo trial's evaluations: rl-zoo's ``n_timesteps //
    n_evaluations``."""
    if evaluations < 1 or steps < evaluations:
        raise SystemExit(f"--evaluations {evaluations}: must be between 1 and --steps ({steps:,})")
    return steps // evaluations


def rlzoo_command(args: argparse.Namespace, work: Path) -> list[str]:
    """rl-zoo's ``train.py --optimize`` for the study in ``work``."""
    return [
        args.rlzoo_python, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV_ID,
        "-optimize", "--n-trials", str(MAX_TRIALS), "--n-timesteps", str(args.steps),
        "--sampler", "tpe", "--pruner", "median", "--n-startup-trials", str(STARTUP_TRIALS),
        "--n-evaluations", str(args.evaluations), "--eval-episodes", str(args.eval_episodes),
        "--n-jobs", "1", "--storage", f"sqlite:///{work / 'study.db'}", "--study-name",
        BASELINE, "--seed", str(args.sampler_seed), "-f", str(work / "logs"),
        "--no-optim-plots", "--device", "cpu", "--num-threads", str(args.rlzoo_threads),
    ]  # fmt: skip


def tune_command(spec: SideSpec, args: argparse.Namespace, work: Path, space: Path) -> list[str]:
    """``batchppo tune`` of a batchppo side, its study in ``work``."""
    sets = [
        f"steps={args.steps}",
        f"eval_every={eval_every(args.steps, args.evaluations)}",
        f"eval_episodes={args.eval_episodes}",
        "eval_actions=mean",
    ]
    command = [
        sys.executable, "-m", "batchppo", "tune", "--config", spec.config, "--space",
        str(space), "--trials", str(MAX_TRIALS), "--seeds", str(args.seeds), "--study",
        str(work), "--objective", "iqm", "--pruner", "median", "--sampler-seed",
        str(args.sampler_seed), "--progress", "lines",
    ]  # fmt: skip
    for item in sets:
        command += ["--set", item]
    if spec.batch is not None:
        command += ["--batch", str(spec.batch)]
    return command


def study_location(spec: SideSpec, work: Path) -> tuple[str, str]:
    """The storage URL and study name a side's study is in."""
    if spec.name == BASELINE:
        return f"sqlite:///{work / 'study.db'}", BASELINE
    return f"sqlite:///{work / 'study.db'}", work.name


@dataclasses.dataclass(frozen=True)
class Launched:
    """A side's process, run for its allowance.

    Attributes:
        start: When it was launched (naive local time, as Optuna stores a trial's times).
        seconds: Its wall-clock allowance.
        cpu_s: Its process tree's CPU seconds by the deadline (or its end).
        exit: Its exit status (negative: the signal that ended it).
        early: It ended before the deadline (a failure: the study asks for more trials).
    """

    start: datetime.datetime
    seconds: float
    cpu_s: float
    exit: int | None
    early: bool


def _tree_cpu(root: Any, seen: dict[int, float]) -> None:
    """Records in ``seen`` the CPU seconds of ``root`` and its descendants (psutil)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                seen[proc.pid] = max(seen.get(proc.pid, 0.0), sum(proc.cpu_times()[:2]))


def _kill_tree(root: Any) -> None:
    import psutil

    with contextlib.suppress(psutil.Error):
        for child in [*root.children(recursive=True), root]:
            with contextlib.suppress(psutil.Error):
                child.kill()


def _sigint() -> None:
    """Gives a side SIGINT's default action (Python's KeyboardInterrupt): a shell without job
    control starts background commands with SIGINT ignored, and their children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_for_allowance(
    command: Sequence[str], seconds: float, grace: float, log: Path, env: Mapping[str, str]
) -> Launched:
    """Runs ``command`` (output to ``log``) for ``seconds``, then stops it with SIGINT, and
    kills its tree after ``grace`` seconds more."""
    import psutil

    cpu: dict[int, float] = {}
    start = datetime.datetime.now()
    begun = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_sigint
        )
        root = psutil.Process(proc.pid)
        try:
            while proc.poll() is None and time.monotonic() - begun < seconds:
                _tree_cpu(root, cpu)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(min(0.5, max(0.0, seconds - (time.monotonic() - begun))))
            early = proc.poll() is not None
            cpu_s = sum(cpu.values())
            if not early:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    _kill_tree(root)
                    proc.wait()
        except BaseException:  # the side must not outlive the bench
            _kill_tree(root)
            proc.wait()
            raise
    return Launched(start, seconds, cpu_s, proc.returncode, early)


@dataclasses.dataclass(frozen=True)
class TrialRecord:
    """A trial as its study stores it: its state, value and times (naive local)."""

    number: int
    state: str
    value: float | None
    start: datetime.datetime | None
    complete: datetime.datetime | None


def read_trials(url: str, name: str) -> list[TrialRecord]:
    """The trials of study ``name`` in the storage ``url``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=url)
    return [
        TrialRecord(t.number, t.state.name, t.value, t.datetime_start, t.datetime_complete)
        for t in study.get_trials(deepcopy=False)
    ]


def summarize(
    trials: Sequence[TrialRecord], start: datetime.datetime, seconds: float, cpu_s: float
) -> dict[str, Any]:
    """A side's figures from its study's trials (see the module docstring): those complete or
    pruned by ``start + seconds`` count."""
    deadline = start + datetime.timedelta(seconds=seconds)
    ended = sorted(
        (t for t in trials if t.state in DONE_STATES and t.complete and t.complete <= deadline),
        key=lambda t: t.complete,
    )
    complete = [t for t in ended if t.state == "COMPLETE" and t.value is not None]
    durations = [(t.complete - t.start).total_seconds() for t in complete if t.start]
    return {
        "trials": len(ended),
        "complete": len(complete),
        "pruned": sum(t.state == "PRUNED" for t in ended),
        "late": sum(t.state in DONE_STATES for t in trials) - len(ended),
        "seconds": seconds,
        "cpu_s": cpu_s,
        "trials_per_hour": len(ended) / seconds * 3600,
        "trials_per_cpu_hour": len(ended) / cpu_s * 3600 if cpu_s else None,
        "best": max((t.value for t in complete), default=None),
        "first_s": (ended[0].complete - start).total_seconds() if ended else None,
        "trial_s": statistics.median(durations) if durations else None,
        "ended": [
            {"number": t.number, "state": t.state, "value": t.value,
             "at_s": (t.complete - start).total_seconds()}
            for t in ended
        ],
    }  # fmt: skip


def ratios(figures: Mapping[str, Mapping[str, Any]], key: str) -> dict[str, float]:
    """Each side's ``key`` over rl-zoo's, and each ``batchN`` side's over ``batch1``'s, keyed
    ``side/rlzoo`` and ``side/batch1``, where both figures are there and the divisor is not 0."""
    out = {}
    for base in (BASELINE, "batch1"):
        theirs = (figures.get(base) or {}).get(key)
        for side, mine in figures.items():
            if side == base or (base == "batch1" and not BATCH_SIDE.fullmatch(side)):
                continue
            if mine.get(key) is not None and theirs:
                out[f"{side}/{base}"] = mine[key] / theirs
    return out


def versions(python: str, packages: Sequence[str]) -> dict[str, str]:
    """The versions of ``packages`` that ``python`` imports (absent ones left out)."""
    code = (
        "import importlib.metadata as m, json\n"
        "def v(p):\n"
        "    try:\n"
        "        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{p: v(p) for p in {tuple(packages)!r}}}))"
    )
    from harness import python_env

    out = subprocess.run(  # away from a checkout whose metadata sys.path's '' would find
        [python, "-c", code], check=True, capture_output=True, text=True,
        cwd=tempfile.gettempdir(), env=python_env(),
    )  # fmt: skip
    return {k: v for k, v in json.loads(out.stdout).items() if v is not None}


def rlzoo_setup(python: str) -> dict[str, Any]:
    """What the rl-zoo side runs with: its packages' versions and its ``Pendulum-v1`` entry of
    ``hyperparams/ppo.yml``.

    Raises:
        SystemExit: ``python`` has no rl-zoo3, in one line naming the install.
    """
    try:
        found = versions(python, RLZOO_PACKAGES)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"--rlzoo-python {python}: cannot run it ({error})") from None
    if "rl_zoo3" not in found:
        raise SystemExit(
            f"--rlzoo-python {python}: no rl_zoo3 there; make a virtualenv with `python3 -m venv "
            "DIR && DIR/bin/pip install rl_zoo3==2.9.2 stable-baselines3==2.9.2 torch==2.13.0 "
            "optuna pandas` and pass DIR/bin/python"
        )
    code = (
        "import json, pathlib, rl_zoo3, yaml\n"
        "path = pathlib.Path(rl_zoo3.__file__).parent / 'hyperparams' / 'ppo.yml'\n"
        f"print(json.dumps(yaml.safe_load(path.read_text())[{ENV_ID!r}], default=str))"
    )
    out = subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True,
        cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return {"versions": found, "hyperparams": json.loads(out.stdout)}


def run_side(spec: SideSpec, args: argparse.Namespace, root: Path, round_: int) -> dict[str, Any]:
    """One round of a side: its study for the allowance, and its figures (``summarize``)."""
    import yaml
    from harness import python_env

    work = root / f"{spec.name}-r{round_}"
    work.mkdir(parents=True)
    if spec.name == BASELINE:
        command = rlzoo_command(args, work)
    else:
        space = root / "space.yaml"
        space.write_text(yaml.safe_dump(SPACE, sort_keys=False))
        command = tune_command(spec, args, work, space)
    log = root / f"{spec.name}-r{round_}.log"
    print(f"[{spec.name}] round {round_ + 1}: {args.minutes:g} min: {' '.join(command)}",
          flush=True)  # fmt: skip
    launched = run_for_allowance(command, args.minutes * 60, args.grace, log, python_env())
    try:
        trials = read_trials(*study_location(spec, work))
    except Exception as error:  # no study: the side failed before its first trial
        tail = " | ".join(log.read_text().strip().splitlines()[-3:])
        return {"error": f"no study read ({error}); exit {launched.exit}: {tail}"}
    row = summarize(trials, launched.start, launched.seconds, launched.cpu_s)
    row["exit"] = launched.exit
    if launched.early:
        tail = " | ".join(log.read_text().strip().splitlines()[-3:])
        row["error"] = f"ended before the deadline, exit {launched.exit}: {tail}"
    return row


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else (
        format(value, fmt))  # fmt: skip


def table(figures: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The printed table: a row per side (its figures, the median over rounds), then the
    ratios."""
    head = (f"{'side':<8} {'config':<14} {'trials':>6} {'pruned':>6} {'trials/h':>9} "
            f"{'trials/CPU-h':>12} {'first s':>8} {'trial s':>8} {'best':>9}")  # fmt: skip
    lines = [head]
    for side, f in figures.items():
        lines.append(
            f"{side:<8} {f.get('config') or '-':<14} {_cell(f.get('trials'), '.0f'):>6} "
            f"{_cell(f.get('pruned'), '.0f'):>6} {_cell(f.get('trials_per_hour'), ',.1f'):>9} "
            f"{_cell(f.get('trials_per_cpu_hour'), ',.1f'):>12} "
            f"{_cell(f.get('first_s'), '.1f'):>8} {_cell(f.get('trial_s'), '.1f'):>8} "
            f"{_cell(f.get('best'), '.1f'):>9}"
        )
    for key, what in (("trials_per_hour", "trials/h"), ("trials_per_cpu_hour", "trials/CPU-h")):
        found = ratios(figures, key)
        if found:
            lines.append(f"{what}: " + ", ".join(f"{k} {v:.2f}x" for k, v in found.items()))
    base = (figures.get(BASELINE) or {}).get("best")
    if base is not None:
        diffs = [f"{side} {f['best'] - base:+.1f}" for side, f in figures.items()
                 if side != BASELINE and f.get("best") is not None]  # fmt: skip
        if diffs:
            lines.append("best return minus rl-zoo's: " + ", ".join(diffs))
    return lines


SUMMED = ("trials", "pruned", "trials_per_hour", "trials_per_cpu_hour", "first_s", "trial_s",
          "best")  # fmt: skip


def side_figures(result: Any, specs: Sequence[SideSpec]) -> dict[str, dict[str, Any]]:
    """Each side's figures, the median over the rounds that measured them."""
    return {
        spec.name: {"config": spec.config, "batch": spec.batch,
                    **{key: result.median(spec.name, key) for key in SUMMED}}
        for spec in specs
    }  # fmt: skip


def _print_row(row: Mapping[str, Any], _: Any) -> None:
    """A side's round as it ends: its figures as a JSON line (its trials left out)."""
    print(json.dumps({k: v for k, v in row.items() if k != "ended"}), flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the comparison, prints the table; returns (and with ``--json`` writes) the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default="rlzoo,host,fused,batch1,batch8",
                        help="comma-separated: rlzoo, host, fused, batchN")  # fmt: skip
    parser.add_argument("--rlzoo-python", default=sys.executable,
                        help="the interpreter with rl-zoo3 (its own virtualenv)")  # fmt: skip
    parser.add_argument("--rlzoo-threads", type=int, default=1,
                        help="torch threads of the rl-zoo side (its --num-threads; -1: torch's "
                        "default, a thread per core)")  # fmt: skip
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock per side")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per trial")
    parser.add_argument("--evaluations", type=int, default=10, help="evaluations per trial")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per trial (1 beside rlzoo)")
    parser.add_argument("--sampler-seed", type=int, default=0, help="seed of the TPE samplers")
    parser.add_argument("--rounds", type=int, default=1, help="studies per side, alternating")
    parser.add_argument("--grace", type=float, default=120.0,
                        help="seconds after SIGINT before a side is killed")  # fmt: skip
    parser.add_argument("--workdir", help="keep the studies and logs here (default: a temp dir)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    specs = parse_sides(args.sides)
    eval_every(args.steps, args.evaluations)
    if args.minutes <= 0 or args.rounds < 1:
        parser.error("--minutes must be > 0 and --rounds >= 1")
    check_sides(specs, args.seeds, tune_help())
    peer = rlzoo_setup(args.rlzoo_python) if any(s.name == BASELINE for s in specs) else None
    from harness import Side, compare, write_json

    with contextlib.ExitStack() as stack:
        if args.workdir:
            root = Path(args.workdir)
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tunebench-")))
        sides = [Side(s.name, lambda r, s=s: run_side(s, args, root, r)) for s in specs]
        result = compare(sides, args.rounds, on_row=_print_row)
    figures = side_figures(result, specs)
    print("\n".join(table(figures)))
    print(f"({args.minutes:g} min a side, {args.steps:,} steps a trial, {args.seeds} seed(s), "
          f"{args.evaluations} evaluations of {args.eval_episodes} episodes; load "
          f"{os.getloadavg()[0]:.1f})")  # fmt: skip
    record = {
        "args": vars(args),
        "env": ENV_ID,
        "protocol": PROTOCOL,
        "differences": DIFFERENCES,
        "space": SPACE,
        "versions": {"batchppo": versions(sys.executable, OUR_PACKAGES),
                     **({BASELINE: peer["versions"]} if peer else {})},
        "rlzoo_hyperparams": peer["hyperparams"] if peer else None,
        "rows": result.rows,
        "figures": figures,
        "ratios": {key: ratios(figures, key) for key in ("trials_per_hour",
                                                         "trials_per_cpu_hour")},
    }  # fmt: skip
    if args.json:
        return write_json(args.json, record)
    return record


if __name__ == "__main__":
    main()

r"""A study shown end to end: ``batchppo tune`` on a shipped preset, its best config frozen and
trained on fresh seeds beside the preset, published in the docs.

One command runs every stage; each resumes where it stopped (the study from its database, the
fresh runs from their checkpoints):

1. **tune** ``pendulum_jax`` on the tuning seeds 0-9 (``--seeds 10``: one program a trial) over
   ``docs/tune-demo/space.yaml`` (keys that change no shape, so ``--batch`` can train several
   trials at once), minimising the steps to a mean eval score of -200
   (``--objective steps-to:-200``), with the median pruner;
2. **freeze** the study's ``best.yaml`` into ``OUT/best.yaml``;
3. **train** the frozen best and the shipped preset on the fresh seeds 30-39, never used
   while tuning, each as one 10-seed program at the preset's budget (the same protocol:
   only the searched keys differ);
4. **evaluate** both groups with ``batchppo evaluate --compare`` (``--episodes`` mean-action
   episodes a run; IQM, mean and the probability of improvement with stratified-bootstrap
   95 % intervals; every seed's score), and the tuned objective on the fresh seeds: the steps
   to -200 of each group's mean eval curve and of each seed's, read from the runs'
   ``metrics.jsonl``;
5. **publish** into ``OUT`` (default ``docs/tune-demo``): the study's table (``batchppo tune
   --show``), its trials (``study.json``), ``history.png`` and ``importances.png``, the fresh
   seeds' files, and the generated section of ``docs/tune.md`` between its
   ``<!-- tune-demo -->`` markers (appended once where the page has none). Every figure on the
   page is read from those files; ``--check`` fails where the page differs from them.

    python bench/tune_demo.py                              # the study (--trials 30)
    python bench/tune_demo.py --batch 8                    # 8 trials a program (needs --batch)
    python bench/tune_demo.py --check                      # the page against docs/tune-demo
    # a smoke test, nothing written to docs/
    python bench/tune_demo.py --trials 3 --steps 8192 --tuning-seeds 2 --fresh-seeds 2 \
        --episodes 4 --work /tmp/demo --out /tmp/demo/out --page /tmp/demo/tune.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PRESET = "pendulum_jax"
TARGET = -200.0
FRESH_SEED = 30
GROUPS = ("best", "shipped")
SPACE = ROOT / "docs" / "tune-demo" / "space.yaml"
STUDY = "demo"
"""The study's directory under ``--work``, and its name."""
BEGIN, END = "<!-- tune-demo -->", "<!-- /tune-demo -->"
SECTION = "## A study, end to end"


def run(command: Sequence[str], log: Path | None = None, cwd: Path | None = None) -> None:
    """Runs a ``batchppo`` command of this checkout: its output to the terminal as it comes,
    or with ``log`` to that file (and the terminal once it ends).

    Raises:
        SystemExit: It failed, with its last lines.
    """
    from harness import python_env

    print("$ " + " ".join(command), flush=True)
    if log is None:
        code = subprocess.run(list(command), env=python_env(), cwd=cwd).returncode
        tail = "its output is above"
    else:
        done = subprocess.run(list(command), capture_output=True, text=True, env=python_env(),
                              cwd=cwd)  # fmt: skip
        log.write_text(done.stdout)
        print(done.stdout, end="")
        code = done.returncode
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    if code != 0:
        raise SystemExit(f"{' '.join(command[:4])}: exit {code}: {tail}")


def batchppo(*args: str) -> list[str]:
    """A ``python -m batchppo`` command line."""
    return [sys.executable, "-m", "batchppo", *args]


def sets(args: argparse.Namespace) -> list[str]:
    """The ``--set`` arguments of a smoke test's budget (none at the preset's own)."""
    return ["--set", f"steps={args.steps}"] if args.steps else []


def tune(args: argparse.Namespace, study: Path) -> None:
    """Stage 1: runs (or resumes) the study."""
    command = batchppo(
        "tune", "--config", PRESET, "--space", str(args.space), "--trials", str(args.trials),
        "--seeds", str(args.tuning_seeds), "--study", str(study), "--objective",
        f"steps-to:{TARGET:g}", "--sampler-seed", str(args.sampler_seed), "--progress", "lines",
        *sets(args),
    )  # fmt: skip
    if args.batch:
        command += ["--batch", str(args.batch)]
    run(command)


def train_fresh(args: argparse.Namespace, out: Path, logdir: Path) -> dict[str, list[Path]]:
    """Stage 3: the frozen best and the shipped preset on the fresh seeds; each group's run
    dirs (a finished group resumes to nothing)."""
    runs = {}
    for group, config in zip(GROUPS, (str(out / "best.yaml"), PRESET), strict=True):
        run(batchppo(
            "train", "--config", config, "--logdir", str(logdir), "--timestamp", "fresh",
            "--name", group, "--seeds", str(args.fresh_seeds), "--set", f"seed={FRESH_SEED}",
            "--progress", "none", *sets(args),
        ))  # fmt: skip
        runs[group] = [logdir / f"fresh-{group}-s{i}" for i in range(args.fresh_seeds)]
    return runs


def eval_curve(run_dir: Path) -> dict[int, float]:
    """A run's periodic evaluations, ``{step: score}`` (its ``metrics.jsonl``)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["score"] for r in rows if r.get("phase") == "eval"}


def steps_to(curves: Sequence[Mapping[int, float]], steps: int) -> dict[str, Any]:
    """The tuned objective on a group's curves: the first eval step at which the mean of the
    seeds' scores reaches ``TARGET`` (``steps + 1``: never), and each seed's own."""
    from batchppo.experiment.tune.objective import Objective

    objective = Objective(TARGET)
    return {
        "target": TARGET,
        "budget": steps,
        "mean_curve": objective.at(curves, steps),
        "seeds": [objective.at([curve], steps) for curve in curves],
    }


def evaluate(args: argparse.Namespace, out: Path, runs: Mapping[str, list[Path]]) -> None:
    """Stage 4: ``batchppo evaluate --compare`` of the groups, and their steps to ``TARGET``."""
    run(batchppo(
        "evaluate", *map(str, runs["best"]), "--compare", *map(str, runs["shipped"]),
        "--labels", *GROUPS, "--episodes", str(args.episodes), "--mean-action",
        "--json", str(out / "fresh-seeds.json"),
        "--stats-json", str(out / "fresh-seeds-stats.json"),
    ), out / "fresh-seeds.txt")  # fmt: skip
    found = {}
    for group, dirs in runs.items():
        steps = _run_steps(dirs[0])
        found[group] = steps_to([eval_curve(d) for d in dirs], steps)
    (out / "fresh-steps-to.json").write_text(json.dumps(found, indent=1) + "\n")


def _run_steps(run_dir: Path) -> int:
    """A run's budget, its config's ``steps``."""
    import yaml

    return int(yaml.safe_load((run_dir / "config.yaml").read_text())["steps"])


def study_record(study: Path) -> dict[str, Any]:
    """The study's trials (number, state, value, parameters, note) and its settings, for
    ``study.json``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    loaded = optuna.load_study(study_name=study.resolve().name,
                               storage=f"sqlite:///{study / 'study.db'}")  # fmt: skip
    settings = loaded.user_attrs.get("batchppo", {})
    return {
        "name": settings.get("name"),
        "seeds": settings.get("seeds"),
        "objective": settings.get("objective"),
        "space": settings.get("space"),
        "steps": (settings.get("config") or {}).get("steps"),
        "trials": [
            {"number": t.number, "state": t.state.name, "value": t.value, "params": t.params,
             "note": t.user_attrs.get("note", "")}
            for t in loaded.get_trials(deepcopy=False)
        ],
    }  # fmt: skip


def publish_study(study: Path, out: Path) -> None:
    """Stage 5 (the study): its table, its trials, its plots and ``best.yaml`` into ``out``."""
    # From the work dir: the table names the study's storage by a path relative to it.
    run(batchppo("tune", "--show", study.name), out / "study.txt", cwd=study.parent)
    from harness import provenance

    record = {**study_record(study), "made": provenance()}
    (out / "study.json").write_text(json.dumps(record, indent=1) + "\n")
    for name in ("history.png", "importances.png"):
        if (study / name).is_file():
            shutil.copyfile(study / name, out / name)


# --- The page's section, from the published files --------------------------------------------


def _steps(value: float, budget: int) -> str:
    return f"not reached in {budget:,}" if value > budget else f"{value:,.0f}"


def _reached(value: float, budget: int) -> str:
    if value > budget:
        return f"did not reach the target in {budget:,} steps"
    return f"reached the target at step {value:,.0f}"


def _made(made: Mapping[str, Any] | None) -> str:
    """When, where and from which code the study was published (``harness.provenance``)."""
    if not made:
        return ""
    machine = made.get("machine") or {}
    return (f" Published {str(made.get('date', ''))[:10]} from commit `{made.get('commit')}` on "
            f"{machine.get('cpus')} CPU cores ({machine.get('cpu')}).")  # fmt: skip


def _interval(entry: Mapping[str, float], digits: int = 1) -> str:
    return (f"{entry['value']:.{digits}f} [{entry['low']:.{digits}f}, "
            f"{entry['high']:.{digits}f}]")  # fmt: skip


def shown(path: Path) -> str:
    """``path`` as the page names it: from the repository's root where it lies inside."""
    path = path.resolve()
    return (path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).as_posix()


def render(out: Path, page: Path) -> str:
    """The generated section: the study (its table, plots, best trial) and the fresh seeds'
    comparison, every figure read from the files in ``out``."""
    record = json.loads((out / "study.json").read_text())
    states: dict[str, int] = {}
    for trial in record["trials"]:
        states[trial["state"]] = states.get(trial["state"], 0) + 1
    counted = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items()))
    complete = [t for t in record["trials"] if t["state"] == "COMPLETE"]
    if not complete:
        raise SystemExit(f"{out / 'study.json'}: no trial completed: nothing to publish")
    best = min(complete, key=lambda t: t["value"])
    params = ", ".join(f"`{k}={v:.4g}`" if isinstance(v, float) else f"`{k}={v}`"
                       for k, v in best["params"].items())  # fmt: skip
    lines = [
        BEGIN,
        f"<!-- generated by `python bench/tune_demo.py` from `{shown(out)}`: edit the "
        "script, not this block -->",
        "",
        f"`python bench/tune_demo.py` tuned `{record['name']}` over `{shown(out)}/space.yaml` "
        f"on the tuning seeds 0-{record['seeds'] - 1}, every trial training all of them, with "
        f"the objective `{record['objective']}` at {record['steps']:,} steps a run: "
        f"{len(record['trials'])} trials ({counted}). The best, trial {best['number']}, "
        f"{_reached(best['value'], record['steps'])}: {params}. Its config, frozen in "
        f"`{shown(out)}/best.yaml`, and the shipped preset then trained on fresh seeds by the "
        f"same protocol (below).{_made(record.get('made'))}",
        "",
        "```text",
        (out / "study.txt").read_text().rstrip(),
        "```",
        "",
    ]
    for name, what in (("history.png", "Optimization history"),
                       ("importances.png", "Parameter importances")):  # fmt: skip
        if (out / name).is_file():
            lines += [f"![{what}]({Path(os.path.relpath(out / name, page.parent)).as_posix()})", ""]
    lines += fresh_lines(out)
    lines.append(END)
    return "\n".join(lines) + "\n"


def fresh_lines(out: Path) -> list[str]:
    """The fresh seeds' table: each group's IQM and mean (95 % intervals), its steps to the
    target, and every seed's score; then the probability of improvement."""
    stats = json.loads((out / "fresh-seeds-stats.json").read_text())
    steps = json.loads((out / "fresh-steps-to.json").read_text())
    entries = json.loads((out / "fresh-seeds.json").read_text())["runs"]
    seeds = sorted({e["seed"] for e in entries})
    lines = [
        f"Fresh seeds {seeds[0]}-{seeds[-1]} (`{shown(out)}/fresh-seeds.json`, "
        f"`fresh-seeds-stats.json`, `fresh-steps-to.json`): "
        f"{entries[0]['episodes']} mean-action episodes a run at the end of training; steps "
        f"to {TARGET:g} from the runs' periodic evaluations.",
        "",
        f"| config | IQM [95 % CI] | mean [95 % CI] | steps to {TARGET:g} (mean curve) | "
        f"seeds reaching {TARGET:g} | every seed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for group in GROUPS:
        (agg,) = stats["groups"][group]["envs"].values()
        found = steps[group]
        reached = sum(s <= found["budget"] for s in found["seeds"])
        scores = ", ".join(f"{e['mean_return']:.0f}" for e in
                           sorted((e for e in entries if e.get("group") == group),
                                  key=lambda e: e["seed"]))  # fmt: skip
        lines.append(
            f"| {group} | {_interval(agg['iqm'])} | {_interval(agg['mean'])} | "
            f"{_steps(found['mean_curve'], found['budget'])} | {reached} of "
            f"{len(found['seeds'])} | {scores} |"
        )
    improvement = stats.get("improvement")
    if improvement:
        lines += ["", f"P({improvement['x']} > {improvement['y']}) = "
                  f"{_interval(improvement, 3)} (probability of improvement)."]  # fmt: skip
    return [*lines, ""]


def write_page(page: Path, block: str) -> None:
    """Replaces the page's generated section, or appends it under ``SECTION``."""
    text = page.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n", re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}"
    page.write_text(text)


def check(out: Path, page: Path) -> list[str]:
    """Where the page's section differs from the files in ``out``; one line each."""
    text = page.read_text()
    if BEGIN not in text:
        return [f"{page}: no {BEGIN} section: run `python bench/tune_demo.py`"]
    match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n", text, re.DOTALL)
    if match is None or match.group(0) != render(out, page):
        return [f"{page}: its {BEGIN} section differs from {out}; rerun `python "
                "bench/tune_demo.py` (its stages resume; nothing retrains)"]  # fmt: skip
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30, help="the study's trials")
    parser.add_argument("--batch", type=int, help="trials a program (batchppo tune --batch)")
    parser.add_argument("--tuning-seeds", type=int, default=10, help="seeds a trial (0..K-1)")
    parser.add_argument("--fresh-seeds", type=int, default=10,
                        help=f"fresh seeds a group ({FRESH_SEED}..)")  # fmt: skip
    parser.add_argument("--episodes", type=int, default=100, help="episodes a fresh run")
    parser.add_argument("--steps", type=int, help="a smoke test's budget (default the preset's)")
    parser.add_argument("--sampler-seed", type=int, default=0)
    parser.add_argument("--space", type=Path, default=SPACE, help="the search space")
    parser.add_argument("--work", type=Path, default=ROOT / "studies" / "tune-demo",
                        help="the study and the fresh runs")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "tune-demo",
                        help="what is published")  # fmt: skip
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "tune.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.out, args.page)
        print("\n".join(problems), file=sys.stderr, end="\n" if problems else "")
        return 1 if problems else 0
    if args.fresh_seeds < 2:
        parser.error("--fresh-seeds must be >= 2: the comparison's intervals need two runs")
    if args.batch is not None:
        from tune_vs_rlzoo import tune_help

        if not re.search(r"--batch\b", tune_help()):
            parser.error("--batch: this checkout's `batchppo tune` has no --batch; drop it")
    args.out.mkdir(parents=True, exist_ok=True)
    study = args.work / STUDY
    tune(args, study)
    shutil.copyfile(study / "best.yaml", args.out / "best.yaml")
    if args.space.resolve() != (args.out / "space.yaml").resolve():
        shutil.copyfile(args.space, args.out / "space.yaml")
    runs = train_fresh(args, args.out, args.work / "fresh")
    evaluate(args, args.out, runs)
    publish_study(study, args.out)
    write_page(args.page, render(args.out, args.page))
    print(f"wrote {args.out} and the section of {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The results, computed from `docs/results`: the README's headline table and figure, and
the blocks of docs/benchmarks.md (the MuJoCo tables, one per peer's protocol, MinAtar, Atari,
Craftax, the speed on a GPU and on a CPU, the `ale` backend's bound by env count, and
`batchppo tune` beside rl-baselines3-zoo's `--optimize`).

Every figure of ours in these blocks is recomputed here from what the runs and benches wrote
into `docs/results` (`batchppo evaluate --json` entries and the bootstrap intervals of the
`--stats-json` files beside them, whose IQM must agree with the entries'; `bench/gpu.py`'s
JSON and logs; the side-by-side benches' JSON) and `docs/runs`; the peers' figures are
constants below, each with its source and protocol. `--check PAGE...` fails when a generated
block of a page differs from what the files give, or, on a page that shows the figure, when
the data written beside the figure do (tests/bench/test_results.py runs it in CI), so a figure
cannot drift from its data, and a figure is changed by rerunning its measurement, not by
editing a page.

What the data supports decides the wording: a figure is bold only where its 95 % interval lies
wholly above the other side's (else the row says "tie"; one run a side is not compared); the
tuning seeds' column is never compared; a figure measured more than once lists every reading and
how many there were. Each block ends with its sources (`source_paragraph`): the files it read,
their dates and machines, the commits of the code that made them (`docs/manifest.json`:
recorded, or inferred from git history and marked) and whether `batchppo/` has changed since
(`git log COMMIT..HEAD -- batchppo/`); a run resumed mid-run is marked where a table names it.

    python bench/results.py                                      # print the blocks
    python bench/results.py --write README.md docs/benchmarks.md # replace their blocks
    python bench/results.py --figure     # draw docs/mujoco-fresh-seeds.png and write its data
    python bench/results.py --check README.md docs/benchmarks.md # exit 1 where one differs
    python bench/results.py --seeds-csv RESULTS.json RESULTS.csv  # `seed,score` rows
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import dataclasses
import functools
import json
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import harness
import numpy as np
import rundata
import scipy.stats
import tune_vs_rlzoo

from batchppo.experiment.analysis import evaluate
from batchppo.experiment.artifacts import provenance
from batchppo.experiment.artifacts.episode_log import EPISODES_FILE, read_episodes
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.fileio import jsonl_exists

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
RUNS = ROOT / "docs" / "runs"

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class FreshSet:
    """A fresh seed set of a task: its seeds, and the names its runs and results are kept
    under. Two sets on the same seeds (a preset changed and rerun on them) differ by their
    variants: the new recipe's runs by ``runs``, the former recipe's results, moved to history
    (`bench/fresh_seeds.sh history`), by ``results``.

    Attributes:
        seeds: Its seeds.
        runs: The variant of its runs' names: `docs/runs/s<seed>-<preset>-<runs>`, or
            `docs/runs/s<seed>-<preset>` where empty.
        results: The variant of its results' stem: `<preset>-<results>-1M-seeds<a>-<b>`, or
            `<preset>-1M-seeds<a>-<b>` where empty; the tables name the set with it.
    """

    seeds: range
    runs: str = ""
    results: str = ""

    @property
    def tag(self) -> str:
        """` (adam99)`: its results' variant as a table or note names it after a seed or its
        seeds; empty where it has none."""
        return f" ({self.results})" if self.results else ""

    @property
    def label(self) -> str:
        """`20-29`, or with its results' variant `30-39 (adam99)`: the set as a table names
        it."""
        return seeds_label(self.seeds) + self.tag

    def stem(self, preset: str) -> str:
        """The stem of its final-policy results in docs/results."""
        variant = f"-{self.results}" if self.results else ""
        return f"{preset}{variant}-1M-seeds{seeds_label(self.seeds)}"

    def run(self, preset: str, seed: int) -> str:
        """The name of its run of ``seed`` in docs/runs."""
        return f"s{seed}-{preset}" + (f"-{self.runs}" if self.runs else "")


FRESH_SEEDS = (FreshSet(range(20, 30)), FreshSet(range(10, 20)))
"""The fresh seeds of the frozen recipes (issue 56), newest first: 20-29, never run before the
recipes were frozen, which the protocol tables report; and 10-19, which an earlier recipe ran,
rerun on the same code. A task's own sets (`Task.fresh`) default to these."""


@dataclasses.dataclass(frozen=True)
class Task:
    """A MuJoCo task, its preset and where its results live.

    A preset that changes is published as its fresh set with its earlier sets kept as history
    (issue 70). The switch is its line in `TASKS`: the new set first in ``fresh``,
    ``earlier_recipe`` the number of sets its former recipes ran, and the new recipe's seeds
    0-9 stems in ``tuning`` and ``tuning_window``. Run on seeds no recipe has run, Humanoid's
    line reads ``fresh=(FreshSet(range(30, 40)), *FRESH_SEEDS), earlier_recipe=2``. Rerun on
    the seeds of its newest set, the new runs carry a variant in their names, and the former
    set's results move to a variant stem first (`bench/fresh_seeds.sh history humanoid_fast
    adam99`) so that the preset's own stem holds the shipped recipe's set:
    ``fresh=(FreshSet(range(30, 40), runs="v256"),
    FreshSet(range(30, 40), results="adam99"), *FRESH_SEEDS), earlier_recipe=3``. Every
    table, the figure and the guard read each task's own sets.

    Attributes:
        name: The task's name in the tables.
        preset: Our preset.
        tuning: The stem of its recipe's seeds 0-9 final-policy results (`<stem>.json`).
        tuning_window: The stem of their training-window results (`evaluate
            --training-window`).
        target: The IQM target over fresh seeds (issue 40); 70 % of it is every seed's bar.
        cleanrl: CleanRL's `ppo_continuous_action` (v4, 3 seeds): the mean and std over seeds
            of each seed's last 100 training episodes (sampled actions).
        rlzoo: rl-baselines3-zoo's SB3 PPO (v3, 1 run): the mean and std over the episodes of
            the final policy's deterministic evaluation.
        tianshou: Tianshou's PPO (v3, 10 seeds): the maximum over its evaluations (every 30k
            steps, 10 test episodes, sampled actions) within 1M steps of the 10 seeds' mean,
            and the std over seeds there.
        fresh: Its fresh seed sets, newest first: the protocol tables, the headline and the
            figure report the newest (`FreshSet.stem` results); the fresh-seed table shows
            every set.
        earlier_recipe: How many of the oldest sets of ``fresh`` ran an earlier recipe of the
            preset: history, which the guard (`shipped_differences`) does not hold to the
            preset as shipped. The newest set is always the shipped recipe's.

    Raises:
        ValueError: ``fresh`` is empty, two of its sets on overlapping seeds share their runs
            or their results, or ``earlier_recipe`` is negative or counts the newest set.
    """

    name: str
    preset: str
    tuning: str
    tuning_window: str
    target: float
    cleanrl: tuple[float, float] | None
    rlzoo: tuple[float, float] | None
    tianshou: tuple[float, float]
    fresh: tuple[FreshSet, ...] = FRESH_SEEDS
    earlier_recipe: int = 0

    def __post_init__(self) -> None:
        if not self.fresh:
            raise ValueError(f"{self.name}: no fresh seed set; give `fresh` one, newest first")
        for i, newer in enumerate(self.fresh):
            for older in self.fresh[i + 1 :]:
                shared = [what for what in ("runs", "results")
                          if getattr(newer, what) == getattr(older, what)]  # fmt: skip
                if set(newer.seeds) & set(older.seeds) and shared:
                    raise ValueError(
                        f"{self.name}: fresh sets {newer.label} and {older.label} share seeds "
                        f"and their {' and '.join(shared)} variant; give each its own"
                    )
        if not 0 <= self.earlier_recipe < len(self.fresh):
            raise ValueError(
                f"{self.name}: earlier_recipe={self.earlier_recipe} of {len(self.fresh)} fresh "
                "sets; give a count from 0 up to all but the newest set"
            )

    def shipped(self, fresh: FreshSet) -> bool:
        """Whether ``fresh``, one of its sets, ran the preset as shipped (not an earlier
        recipe)."""
        return self.fresh.index(fresh) < len(self.fresh) - self.earlier_recipe


TASKS = (
    Task("HalfCheetah", "cheetah_fast", "cheetah_fast-std03-1M-seeds0-9",
         "cheetah_fast-std03-1M-seeds0-9-training-window", 6000,
         (1443, 46), (5819, 664), (5783.9, 1244.0)),
    Task("Hopper", "hopper_fast", "hopper_fast-ln-1M-seeds0-9",
         "hopper_fast-ln-1M-seeds0-9-training-window", 2800,
         (2383, 272), (2410, 10), (2609.3, 700.8)),
    Task("Walker2d", "walker_fast", "walker_fast-recompute-1M-10seeds",
         "walker_fast-1M-seeds0-9-training-window", 4600,
         (2288, 572), (3479, 822), (3588.5, 756.6)),
    Task("Ant", "ant_fast", "ant_fast-1M-10seeds", "ant_fast-1M-seeds0-9-training-window", 4500,
         None, (1327, 452), (3258.4, 1079.3)),
    Task("Humanoid", "humanoid_fast", "humanoid_fast-adam99-1M-seeds0-9",
         "humanoid_fast-adam99-1M-seeds0-9-training-window", 5500,
         (716, 49), None, (787.1, 193.5),
         fresh=(FreshSet(range(30, 40)), *FRESH_SEEDS), earlier_recipe=2),
)  # fmt: skip
"""The five `*_fast` tasks. Sources of the peers' figures: vwxyzjn/cleanrl's benchmark docs
(ppo_continuous_action), DLR-RM/rl-baselines3-zoo benchmark.md, thu-ml/tianshou
examples/mujoco/README.md (its PPO table at 1M steps and footnote on the reward metric)."""

_READING: list[set[str]] = []
"""The names of docs/results read by each block being generated (`reading`)."""


def results_path(name: str) -> Path:
    """`docs/results/<name>`, noted as read by each block being generated (`reading`)."""
    for names in _READING:
        names.add(name)
    return RESULTS / name


def read_json(name: str) -> Any:
    """A JSON file of docs/results (`results_path`)."""
    return json.loads(results_path(name).read_text())


@contextlib.contextmanager
def reading() -> Iterator[set[str]]:
    """The names of the files of docs/results that the code inside the block reads."""
    names: set[str] = set()
    _READING.append(names)
    try:
        yield names
    finally:
        _READING.remove(names)


def load_entries(path: Path) -> list[dict] | None:
    """The run entries of an `evaluate --json` file, each with its run's provenance (`commit`,
    `note`, `config`: `batchppo.experiment.analysis.evaluate.load_results`); None where it is not
    there (yet)."""
    return evaluate.load_results(path) if path.is_file() else None


def scores(entries: Sequence[dict]) -> np.ndarray:
    """The runs' scores (`mean_return`) in seed order."""
    return np.array([e["mean_return"] for e in sorted(entries, key=lambda e: e["seed"])])


def iqm(values: np.ndarray) -> float:
    """The interquartile mean (a quarter cut at each end), as batchppo's stats compute it."""
    return float(scipy.stats.trim_mean(values, 0.25))


Interval = tuple[float, float]


def stats_interval(
    path: Path, env: str | None, values: np.ndarray, statistic: str = "iqm"
) -> Interval:
    """The bootstrap interval of the runs' IQM (or ``statistic="mean"``: their mean) from a
    `--stats-json` file (its one group; ``env`` None: its one env), checked against the runs."""
    group = next(iter(json.loads(path.read_text())["groups"].values()))
    envs = group["envs"]
    saved = (envs[env] if env is not None else next(iter(envs.values())))[statistic]
    ours = iqm(values) if statistic == "iqm" else float(values.mean())
    if not np.isclose(saved["value"], ours, rtol=1e-9):
        raise SystemExit(f"{path}: {statistic} {saved['value']} but its runs give {ours}")
    return saved["low"], saved["high"]


def t_interval(mean: float, std: float, runs: int) -> Interval:
    """The 95 % t-interval of a published mean over ``runs`` runs, its ± read as the sample
    std; one run gives the point itself (its spread over episodes says nothing of other runs)."""
    if runs == 1:
        return mean, mean
    half = scipy.stats.t.ppf(0.975, runs - 1) * std / np.sqrt(runs)
    return mean - half, mean + half


def mean_interval(values: Sequence[float]) -> Interval:
    """The 95 % t-interval of the mean of runs' scores (their sample std), as a peer's
    published mean gets (`t_interval`): both sides of a comparison computed alike. Over a
    few seeds a percentile bootstrap of the mean only spans the lowest to the highest."""
    values = np.asarray(values, float)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return t_interval(float(values.mean()), std, values.size)


def higher(intervals: Sequence[Interval | None]) -> int | None:
    """The index of the interval that lies wholly above every other one, or None: a tie (or
    fewer than two sides to compare)."""
    known = [(i, iv) for i, iv in enumerate(intervals) if iv is not None]
    if len(known) < 2:
        return None
    for i, (low, _) in known:
        if all(low > high for j, (_, high) in known if j != i):
            return i
    return None


def _verdict(
    names: Sequence[str], intervals: Sequence[Interval | None], digits: int
) -> tuple[int | None, str]:
    """Which side is higher (its index, or None) and the cell that says so from the
    intervals: `[a, b] / [c, d]: tie`; a point (a peer's one run) shows as published. Points
    alone (one run on every side) are not compared: nothing says how far another run lands."""
    best = higher(intervals)
    if sum(iv is not None for iv in intervals) < 2:
        return None, "—"
    shown = " / ".join(
        "—" if iv is None
        else f"{iv[0]:g}" if iv[0] == iv[1]
        else f"[{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]"
        for iv in intervals
    )  # fmt: skip
    if all(iv[0] == iv[1] for iv in intervals if iv is not None):
        return None, f"{shown}: {NOT_COMPARED}"
    return best, f"{shown}: " + ("tie" if best is None else f"{names[best]} higher")


NOT_COMPARED = "not compared (one run a side, so no interval)"
"""The verdict where every side is one run."""


def _bold_at(texts: Sequence[str], best: int | None) -> list[str]:
    """The texts, the one at ``best`` in bold."""
    return [f"**{t}**" if i == best else t for i, t in enumerate(texts)]


def seeds_label(seeds: range) -> str:
    """`20-29`: a range of seeds as the tables and file names write it."""
    return f"{seeds[0]}-{seeds[-1]}"


def fresh_stem(task: Task, fresh: FreshSet | None = None) -> str:
    """The stem of a task's final-policy results over its set ``fresh`` (None: its newest)."""
    return (task.fresh[0] if fresh is None else fresh).stem(task.preset)


def window_stem(task: Task, fresh: FreshSet | None = None) -> str:
    """The stem of a task's training-window results (which hold its max-eval-mean too) over
    its set ``fresh`` (None: its newest)."""
    return f"{fresh_stem(task, fresh)}-training-window"


def _shared(values: Iterable[T]) -> T | None:
    """The one value of ``values`` where all are equal; None where they differ."""
    distinct = set(values)
    return next(iter(distinct)) if len(distinct) == 1 else None


def shared_newest() -> FreshSet | None:
    """The newest fresh set where every task's is the same (a table's header then names it);
    None where they differ (each row names its own)."""
    return _shared(task.fresh[0] for task in TASKS)


def newest_seeds_text() -> str:
    """`seeds 20-29` where every task's newest fresh set is the same; else each set with its
    tasks, in the order of `TASKS`: `seeds 20-29 (HalfCheetah and Hopper) and 30-39
    (Humanoid)`."""
    shared = shared_newest()
    if shared is not None:
        return f"seeds {shared.label}"
    by_set: dict[FreshSet, list[str]] = {}
    for task in TASKS:
        by_set.setdefault(task.fresh[0], []).append(task.name)
    return "seeds " + _join([f"{s.label} ({_join(names)})" for s, names in by_set.items()])


def _group_scores(stem: str) -> np.ndarray | None:
    entries = load_entries(results_path(f"{stem}.json"))
    return None if entries is None else scores(entries)


def _env(stem: str) -> str | None:
    entries = load_entries(results_path(f"{stem}.json"))
    return None if entries is None else entries[0]["env"]


def _finished(task: Task, fresh: FreshSet) -> int:
    """How many seeds of its set ``fresh`` have a finished run in docs/runs (by its
    summary)."""
    return sum(rundata.finished(RUNS / fresh.run(task.preset, s)) for s in fresh.seeds)


def _fresh_cells(task: Task, fresh: FreshSet, env: str | None) -> list[str]:
    """Two cells of the fresh-seed table, one per target: the IQM with its interval and
    whether it reaches the task's target, and the seeds below 70 % of it (the weakest where
    none is) and whether at most one is."""
    stem = fresh_stem(task, fresh)
    entries = load_entries(results_path(f"{stem}.json"))
    if entries is None:
        return [f"pending ({_finished(task, fresh)} of {len(fresh.seeds)} run)", "pending"]
    values = scores(entries)
    low, high = stats_interval(results_path(f"{stem}-stats.json"), env, values)
    by_seed = sorted((e["seed"], e["mean_return"]) for e in entries)
    return [
        f"{iqm(values):.0f} [{low:.0f}, {high:.0f}]: "
        + ("met" if iqm(values) >= task.target else "missed"),
        below_cell(by_seed, 0.7 * task.target, resumed(task, fresh)),
    ]


RESUMED_MARK = "†"
"""The mark of a seed whose run was resumed mid-run (`resumed`), where a table names it."""


def resumed(task: Task, fresh: FreshSet) -> dict[int, int]:
    """The seeds of its set ``fresh`` whose published run was resumed mid-run from its own
    checkpoint, each with the step it resumed at (its summary's first ``resumed_at``)."""
    found = {}
    for seed in fresh.seeds:
        run = RUNS / fresh.run(task.preset, seed)
        steps = rundata.load_summary(run)["resumed_at"] if run.is_dir() else []
        if steps:
            found[seed] = steps[0]
    return found


def resumed_note(tasks: Sequence[Task]) -> str:
    """The footnote of the mark: each resumed run of ``tasks`` over their fresh sets (every
    task's newest set first), named with its set's results variant where it has one, and where
    it resumed; empty where none was."""
    runs = [f"{task.name} seed {seed}{fresh.tag} at {step / 1000:.0f}k steps"
            for i in range(max(len(task.fresh) for task in tasks))
            for task in tasks if i < len(task.fresh)
            for fresh in [task.fresh[i]]
            for seed, step in resumed(task, fresh).items()]  # fmt: skip
    if not runs:
        return ""
    return (f"{RESUMED_MARK} Resumed mid-run from its own checkpoint, on the same code: "
            f"{_join(runs)}.")  # fmt: skip


def below_cell(
    by_seed: Sequence[tuple[int, float]], bar: float, marked: Mapping[int, int] | None = None
) -> str:
    """The seeds scoring below ``bar``, each with its score, and the failure target's verdict
    (met where at most one seed of the set is below); the weakest seed where none is.

    Args:
        by_seed: ``(seed, score)`` pairs in seed order.
        bar: 70 % of the task's target.
        marked: Seeds named with `RESUMED_MARK` (those resumed mid-run).
    """
    marked = marked or {}

    def seed(s: int) -> str:
        return f"{s}{RESUMED_MARK if s in marked else ''}"

    below = [(s, v) for s, v in by_seed if v < bar]
    if not below:
        weakest = min(by_seed, key=lambda sv: sv[1])
        return f"none (weakest: {seed(weakest[0])}, {weakest[1]:.0f}): met"
    named = ", ".join(f"{seed(s)} ({v:.0f})" for s, v in below)
    return f"{named}: {'met' if len(below) <= 1 else 'missed'}"


def earlier_recipe_note(tasks: Sequence[Task]) -> str:
    """The note naming the fresh sets of ``tasks`` that ran an earlier recipe of their preset
    (`Task.earlier_recipe`); empty where none did."""
    named = [f"{task.name}'s seeds "
             + _join([s.label for s in task.fresh if not task.shipped(s)])
             for task in tasks if task.earlier_recipe]  # fmt: skip
    if not named:
        return ""
    return (f"Run by an earlier recipe of the preset, kept as history: {_join(named)}. Each "
            "task's newest set is its preset as shipped.")  # fmt: skip


def _fresh_columns(shared: tuple[FreshSet, ...] | None, depth: int) -> tuple[list[str], str]:
    """The fresh-seed table's columns of the sets, newest first, and their alignment: named by
    their seeds where every task has the same sets (``shared``); else each set's columns start
    with its seeds (`newest fresh set`, then `earlier set 1`, `earlier set 2`...)."""
    if shared is not None:
        labels = [f"seeds {fresh.label}" for fresh in shared]
        heads = [h for label in labels for h in (f"{label}: IQM [95 % CI]", f"{label} below 70 %")]
        return heads, "---:|---|" * len(shared)
    heads = []
    for i in range(depth):
        name = "newest fresh set" if i == 0 else f"earlier set {i}"
        heads += [f"{name}: seeds", f"{name}: IQM [95 % CI]", f"{name}: below 70 %"]
    return heads, "---|---:|---|" * depth


def _fresh_row(task: Task, depth: int, labelled: bool) -> str:
    """A task's row of the fresh-seed table: its ``depth`` sets' cells (`—` past its own sets),
    each set's led by its seeds where ``labelled``, then its tuning seeds' IQM."""
    env = _env(task.tuning)
    cells = []
    for i in range(depth):
        if i >= len(task.fresh):
            cells += ["—"] * 3
            continue
        cells += [task.fresh[i].label] if labelled else []
        cells += _fresh_cells(task, task.fresh[i], env)
    tuning = _group_scores(task.tuning)
    low, high = stats_interval(results_path(f"{task.tuning}-stats.json"), env, tuning)
    return (f"| {task.name} | {task.target:g}; {0.7 * task.target:.0f} | " + " | ".join(cells)
            + f" | {iqm(tuning):.0f} [{low:.0f}, {high:.0f}] |")  # fmt: skip


def fresh_table() -> list[str]:
    """Each preset on its fresh seed sets, newest first: the IQM with its interval and whether
    it reaches the target, the seeds below 70 % of it and whether at most one is (the issue's
    two targets, each with its own verdict); and its tuning seeds 0-9. The header names the
    sets where every task has the same; else each row names its own (`_fresh_columns`)."""
    shared = _shared(task.fresh for task in TASKS)
    depth = max(len(task.fresh) for task in TASKS)
    heads, rule = _fresh_columns(shared, depth)
    lines = [
        f"| task (v5) | target (IQM); 70 % of it | {' | '.join(heads)} | seeds 0-9 (tuning): "
        "IQM [95 % CI] |",
        f"|---|---:|{rule}---:|",
        *(_fresh_row(task, depth, shared is None) for task in TASKS),
    ]
    notes = [note for note in (resumed_note(TASKS), earlier_recipe_note(TASKS)) if note]
    return [*lines, *(line for note in notes for line in ["", *_paragraph(note)])]


class Ours(NamedTuple):
    """Our cell of a protocol table.

    Attributes:
        text: The cell (`mean ± std`).
        interval: The 95 % interval it is compared by (None: not compared).
        value: The mean the interval is about (None where there is none yet).
    """

    text: str
    interval: Interval | None = None
    value: float | None = None


def _runs_mean(stem: str) -> Ours:
    """`mean ± std` of the runs' scores in `<stem>.json` (the population std over seeds) and the
    t-interval of their mean (`mean_interval`)."""
    values = _group_scores(stem)
    if values is None:
        return Ours("pending")
    return Ours(f"{values.mean():.0f} ± {values.std():.0f}", mean_interval(values),
                float(values.mean()))  # fmt: skip


def _training_window(task: Task, fresh: bool) -> Ours:
    return _runs_mean(window_stem(task) if fresh else task.tuning_window)


def _final_mean(task: Task, fresh: bool) -> Ours:
    return _runs_mean(fresh_stem(task) if fresh else task.tuning)


TIANSHOU_EVALUATION = {"actions": "sampled", "episodes": [10]}
"""What each of Tianshou's periodic evaluations is (every 30k steps: the presets'
``eval_every``, which the guard holds to the runs')."""


def _tianshou(task: Task, fresh: bool) -> Ours:
    """The max-eval-mean of the fresh runs and the population std over seeds at its step, with
    the 95 % t-interval of that mean (the std read back as the sample std); compared only
    where the runs' evaluations were Tianshou's."""
    path = results_path(f"{window_stem(task)}-stats.json")
    if not fresh or not path.is_file():
        return Ours("pending")
    m = next(iter(json.loads(path.read_text())["max_eval_mean"].values()))[_env(task.tuning)]
    text = f"{m['value']:.0f} ± {m['std']:.0f}"
    if any(m[key] != value for key, value in TIANSHOU_EVALUATION.items()):
        return Ours(f"{text} (other evaluations: {m['episodes']} {m['actions']})")
    runs = m["runs"]
    interval = t_interval(m["value"], m["std"] * np.sqrt(runs / (runs - 1)), runs)
    return Ours(text, interval, m["value"])


@dataclasses.dataclass(frozen=True)
class Protocol:
    """A peer's protocol table: the peer's figure beside ours, and how they are compared.

    Attributes:
        intro: The sentence above the table.
        peer: The peer's column header.
        name: The peer's name where a row says which side is higher.
        figure: The peer's published (mean, ±) for a task; None where it publishes none.
        runs: The runs behind the peer's mean, for its interval (`t_interval`).
        score: Our cell, ``(task, fresh)`` for the task's newest fresh set or the tuning
            seeds.
        statistic: The peer's statistic in a few words (the figure's legend).
        tuning: Whether the table shows the tuning seeds too (not where their runs were
            evaluated by another protocol).
    """

    intro: str
    peer: str
    name: str
    figure: Callable[[Task], tuple[float, float] | None]
    runs: int
    score: Callable[[Task, bool], Ours]
    statistic: str
    tuning: bool = True


PROTOCOLS = (
    Protocol(
        "By CleanRL's protocol (and the PPO paper's): the mean return of each run's last 100 "
        "training episodes, sampled actions; mean ± std over seeds (ours the population std). "
        "Compared: the 95 % t-intervals of both means (ours over its seeds' sample std; "
        "CleanRL's over its 3 seeds, its ± read as their sample std).",
        "CleanRL PPO (v4, 3 seeds)", "CleanRL", lambda task: task.cleanrl, 3, _training_window,
        "the last 100 training episodes, sampled",
    ),
    Protocol(
        "By rl-baselines3-zoo's protocol: the final policy's episodes with the deterministic "
        "(mean) action. rl-zoo: one run, ± the std over its episodes, compared as a point; "
        "ours: 100 episodes a seed, mean ± population std over seeds, compared by the 95 % "
        "t-interval of the mean.",
        "rl-zoo SB3 PPO (v3, 1 run)", "rl-zoo", lambda task: task.rlzoo, 1, _final_mean,
        "the final policy, mean action",
    ),
    Protocol(
        "By Tianshou's protocol: 10 test episodes with sampled actions every 30k steps (the "
        "presets' periodic evaluations), the maximum over the first 1M steps of the mean over "
        "seeds, ± the std over seeds there (ours the population std). Compared: the 95 % "
        "t-intervals of both means (10 seeds each, each ± read back as a sample std). The "
        "tuning seeds were evaluated otherwise and are not shown.",
        "Tianshou PPO (v3, 10 seeds)", "Tianshou", lambda task: task.tianshou, 10, _tianshou,
        "the best periodic evaluation, sampled",
        tuning=False,
    ),
)  # fmt: skip
"""The three peers' tables, in their order on the page."""


def protocol_tables() -> list[str]:
    """Three tables: ours on each task's newest fresh seeds by each peer's protocol beside the
    peer's figure, with which side is higher where the intervals say so. The header names the
    seeds where every task's newest set is the same; else each row does (`_marked_name`)."""
    shared = shared_newest()
    ours = "batchppo, the row's seeds" if shared is None else f"batchppo seeds {shared.label}"
    lines: list[str] = []
    for table in PROTOCOLS:
        head = f"| task | {table.peer} | {ours} | 95 % intervals, peer / ours |"
        rule = "|---|---:|---:|---|"
        if table.tuning:
            head += " batchppo seeds 0-9 (tuning, not compared) |"
            rule += "---:|"
        lines += [*([""] if lines else []), *_paragraph(table.intro), "", head, rule]
        for task in TASKS:
            figure = table.figure(task)
            mine, interval, _ = table.score(task, True)
            cells = ["—" if figure is None else f"{figure[0]:g} ± {figure[1]:g}", mine]
            theirs = None if figure is None else t_interval(*figure, table.runs)
            best, verdict = _verdict([table.name, "batchppo"], [theirs, interval], 0)
            cells = [*_bold_at(cells, best), verdict]
            if table.tuning:
                cells.append(table.score(task, False).text)
            lines.append(f"| {_marked_name(task)} | " + " | ".join(cells) + " |")
    if any(resumed(task, task.fresh[0]) for task in TASKS):
        seeds = "the seeds its row names" if shared is None else f"its seeds {shared.label}"
        lines += ["", *_paragraph(
            f"{RESUMED_MARK} One of {seeds} was resumed mid-run from its own checkpoint (the "
            "fresh-seed table names it).")]  # fmt: skip
    return lines


def _marked_name(task: Task) -> str:
    """The task's name in a protocol table: with its newest fresh seeds where the tasks' differ
    (`shared_newest`), marked where one of them was resumed mid-run."""
    seeds = "" if shared_newest() is not None else f" (seeds {task.fresh[0].label})"
    return task.name + seeds + (RESUMED_MARK if resumed(task, task.fresh[0]) else "")


def _scored(stem: str, protocol: str, episodes: int) -> dict[int, float] | None:
    """The runs' scores of `<stem>.json` by seed, checked to be ``episodes`` episodes a run
    under ``protocol`` (`final-mean`, `final-sampled`); None where the file is not there.

    `evaluate --json` wrote no protocol before it had `--sample`: such entries are the mean
    action's.
    """
    entries = load_entries(results_path(f"{stem}.json"))
    if entries is None:
        return None
    for e in entries:
        got = (e.get("protocol", "final-mean"), e["episodes"])
        if got != (protocol, episodes):
            raise SystemExit(
                f"{stem}.json: seed {e['seed']} was scored {got[0]} over {got[1]} episodes, "
                f"the table needs {protocol} over {episodes}"
            )
    return {e["seed"]: e["mean_return"] for e in entries}


def _seeds(
    by_seed: dict[int, float] | None, seeds: Sequence[int], over: Sequence[int] | None = None
) -> tuple[float | None, str]:
    """`a / b / c (mean m)`: the runs' scores at ``seeds`` (`—` for a seed with none), valued by
    their mean over ``over`` (default ``seeds``), which the text names where it is fewer."""
    if by_seed is None:
        return None, "pending"
    over = seeds if over is None else over
    each = " / ".join(f"{by_seed[s]:.1f}" if s in by_seed else "—" for s in seeds)
    mean = float(np.mean([by_seed[s] for s in over]))
    which = "mean" if list(over) == list(seeds) else f"mean of seeds {', '.join(map(str, over))}:"
    return mean, f"{each} ({which} {mean:.1f})"


def _seeds_interval(by_seed: dict[int, float] | None) -> Interval | None:
    """The t-interval of the mean over the runs' scores ``by_seed`` (as `_scored` read them:
    `mean_interval`); None where there are none."""
    return None if by_seed is None else mean_interval(list(by_seed.values()))


@dataclasses.dataclass(frozen=True)
class MinAtarGame:
    """A MinAtar game, its results stem and gymnax's published PPO return.

    Attributes:
        name: The game's name in the table.
        preset: Our preset; its runs' results are `<preset>-10M-3seeds*.json`.
        gymnax: The PPO return of gymnax's README (gymnax-blines' checkpoint: one run of 10M
            steps, the mean of 164 episodes with sampled actions, on the same gymnax env).
    """

    name: str
    preset: str
    gymnax: float


MINATAR = (
    MinAtarGame("Breakout", "breakout_minatar", 28),
    MinAtarGame("Asterix", "asterix_minatar", 15),
    MinAtarGame("Freeway", "freeway_minatar", 58),
    MinAtarGame("SpaceInvaders", "space_invaders_minatar", 131),
)
"""Source: RobertTLange/gymnax README (its table of PPO returns, since commit bb236c1) and
the checkpoints and configs of RobertTLange/gymnax-blines (benchmarks journal, 6b and 6c)."""
MINATAR_SEEDS = (0, 1, 2)


def minatar_table() -> list[str]:
    """Ours by gymnax's protocol (164 episodes, sampled) beside gymnax's, and by the mean action."""
    lines = [
        *_paragraph(
            "By gymnax's protocol (its README's PPO return, gymnax-blines: one run's final policy "
            "at 10M steps, the mean of 164 episodes with sampled actions): ours the same, seeds "
            "0-2 (seed 0 also screened Breakout's learning rate; the runs shuffle minibatches by "
            "`sort`, from before the `index` default); beside it our 100-episode evaluation with "
            "the mean action. Compared by gymnax's protocol: its one run as a point against the "
            "95 % t-interval of our mean over the seeds."
        ),
        "",
        "| game | gymnax PPO (1 run) | batchppo, 164 episodes sampled: seeds 0 / 1 / 2 | "
        "gymnax / ours, 95 % interval | batchppo, 100 episodes mean action: seeds 0 / 1 / 2 |",
        "|---|---:|---:|---|---:|",
    ]
    for game in MINATAR:
        stem = f"{game.preset}-10M-3seeds"
        sampled = _scored(f"{stem}-sampled164", "final-sampled", 164)
        best, verdict = _verdict(
            ["gymnax", "batchppo"],
            [(game.gymnax, game.gymnax), _seeds_interval(sampled)], 1,
        )  # fmt: skip
        cells = _bold_at([f"{game.gymnax:g}", _seeds(sampled, MINATAR_SEEDS)[1]], best)
        mean_action = _seeds(_scored(stem, "final-mean", 100), MINATAR_SEEDS)[1]
        lines.append(f"| {game.name} | " + " | ".join([*cells, verdict, mean_action]) + " |")
    return lines


ATARI_SEEDS = (0, 1, 2)
ATARI_FINAL = (
    ("final policy, 30 games, sampled actions", "final-sampled", "sampled"),
    ("final policy, 30 games, mean action", "final-mean", "mean"),
)
"""The Atari table's rows scored by our evaluator: label, protocol, file suffix."""


def _cleanrl_training_games() -> tuple[float | None, str]:
    """CleanRL's own figure per seed: its training games of the last 50k steps (the bench's
    last window, `docs/results/breakout_cleanrl-2M-seed<s>-rerun.json`)."""
    values = []
    for seed in ATARI_SEEDS:
        path = results_path(f"breakout_cleanrl-2M-seed{seed}-rerun.json")
        if not path.is_file():
            return None, "pending"
        values.append(json.loads(path.read_text())["cleanrl"]["windows"][-1]["mean_return"])
    return _seeds(dict(zip(ATARI_SEEDS, values, strict=True)), ATARI_SEEDS)


ATARI_SIDES = (
    ("CleanRL `ppo_atari.py`", "CleanRL", "breakout_cleanrl_model-2M-3seeds"),
    ("batchppo, process backend", "process", "breakout_atari-2M-rerun"),
    ("batchppo, `backend=ale` (fused)", "ale", "breakout_atari_ale-2M-3seeds"),
)
"""The Atari table's sides: column header, name in a verdict, results stem (`<stem>-<suffix>`)."""

ATARI_ALE_RUNS = "s{seed}-breakout_atari-ale2M"
"""The run dirs (in docs/runs) of `breakout_atari` on the ale backend at 2M frames."""

GAMES_WINDOW = 50_000
"""CleanRL's own figure's window: the training games that ended in the last 50k steps."""


def _training_games(run_dir: Path) -> float:
    """The mean raw score of the training games (all lives) that ended in a run's last
    `GAMES_WINDOW` steps, from its episodes log (the `game_score` records)."""
    games = [g for g in read_episodes(run_dir) if "game_score" in g]
    last = max(g["step"] for g in games)
    return float(np.mean([g["game_score"] for g in games if g["step"] > last - GAMES_WINDOW]))


def _ale_training_games() -> tuple[float | None, str]:
    """Ours by CleanRL's own protocol: the ale runs' training games of their last 50k steps."""
    dirs = {seed: RUNS / ATARI_ALE_RUNS.format(seed=seed) for seed in ATARI_SEEDS}
    if not all(jsonl_exists(d / EPISODES_FILE) for d in dirs.values()):
        return None, "pending"
    return _seeds({seed: _training_games(d) for seed, d in dirs.items()}, ATARI_SEEDS)


def atari_table() -> list[str]:
    """Breakout at 2M frames: CleanRL's final model and ours on both Atari backends, scored
    alike, per seed."""
    heads = " | ".join(f"{header}: seeds 0 / 1 / 2" for header, _, _ in ATARI_SIDES)
    names = [name for _, name, _ in ATARI_SIDES]
    lines = [
        *_paragraph(
            "Breakout at 2M frames (500k agent steps), CleanRL's `ppo_atari.py` and our "
            "`breakout_atari` at its settings, on the process backend and on ALE's own vector env "
            "(`backend=ale`, its env step inside the compiled rollout), all on a 2-core CPU (its "
            "minibatches shuffled by `sort`, from before the `index` default). The final policies' "
            "rows: 30 whole games a seed (all lives, raw rewards, `ALE/Breakout-v5` without sticky "
            "actions) by our evaluator, each game from the same start on CleanRL's side and the "
            "process backend's, the ale side's on ALE's own env (its own no-op draws); CleanRL's "
            "model imported by `bench/cleanrl_atari.py`. Per seed, and the mean over the seeds "
            "every side has, compared by the 95 % t-intervals of the means."
        ),
        "",
        f"| protocol | {heads} | 95 % intervals, {' / '.join(names)} |",
        "|---|" + "---:|" * len(ATARI_SIDES) + "---|",
    ]
    for label, protocol, suffix in ATARI_FINAL:
        stems = [f"{stem}-{suffix}" for _, _, stem in ATARI_SIDES]
        sides = [_scored(stem, protocol, 30) for stem in stems]
        both = [s for s in ATARI_SEEDS if all(s in side for side in sides if side)]
        intervals = [
            _seeds_interval(side) if len(both) == len(ATARI_SEEDS) else None for side in sides
        ]
        best, verdict = _verdict(names, intervals, 1)
        cells = _bold_at([_seeds(side, ATARI_SEEDS, both)[1] for side in sides], best)
        lines.append(f"| {label} | " + " | ".join([*cells, verdict]) + " |")
    lines.append(
        "| CleanRL's own: its training games of the last 50k steps, sampled | "
        f"{_cleanrl_training_games()[1]} | not logged (these runs counted lives, clipped) | "
        f"{_ale_training_games()[1]} | — |"
    )
    return lines


WIDTH = 100
"""The longest line of a generated paragraph (where no word, code span or link is longer)."""

_UNBROKEN = re.compile(r"`[^`]*`|\*\*[^*]*\*\*|\[[^\]]*\]\([^)]*\)")
"""What a line never breaks inside: a code span, a bold span, a link."""

_BLOCK_START = re.compile(r"([-+*>#|]|\d+[.)])(\s|$)")
"""A line start that Markdown would read as a list item, quote, heading or table row."""


def _paragraph(text: str, width: int = WIDTH) -> list[str]:
    """A paragraph as the pages hold it: lines of at most ``width`` characters, broken between
    words, never inside a code span, a bold span or a link, and never where the next line
    would start a Markdown block (its first word then stays on the line before)."""
    glued = _UNBROKEN.sub(lambda m: m.group(0).replace(" ", "\0"), text)
    lines: list[str] = []
    for line in textwrap.wrap(glued, width, break_long_words=False, break_on_hyphens=False):
        while lines and _BLOCK_START.match(line):
            first, _, line = line.partition(" ")
            lines[-1] += f" {first}"
        if line:
            lines.append(line)
    return [line.replace("\0", " ") for line in lines]


def _join(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _count(n: int, what: str) -> str:
    """`one round`, `3 rounds`."""
    return f"one {what}" if n == 1 else f"{n} {what}s"


def _ratios(values: Sequence[float], what: str = "round") -> str:
    """Every reading of a ratio and how many there are: `1.02x (one round)`, `1.04x and 1.10x
    (2 rounds)`."""
    return f"{_join([f'{v:.2f}x' for v in values])} ({_count(len(values), what)})"


def _minutes(run_dirs: Sequence[Path]) -> str:
    """The range of the runs' wall-clock to their last logged record, in minutes (from their
    summaries)."""
    times = [rundata.load_summary(run_dir)["wall_time"] / 60 for run_dir in run_dirs]
    return f"{min(times):.1f}-{max(times):.1f} minutes"


def fresh_block() -> list[str]:
    """The fresh-seed table, after the wall-clock of the runs published in it."""
    runs = [
        RUNS / Path(entry["run_dir"]).name  # evaluated where the checkpoint was
        for task in TASKS
        for fresh in task.fresh
        for entry in load_entries(results_path(f"{fresh_stem(task, fresh)}.json")) or []
    ]
    timing = (
        f"Each of the {len(runs)} runs published so far took {_minutes(runs)} to its final "
        "evaluation on a 2-core CPU shared with other work."
        if runs
        else "No fresh-seed run of the recipes as frozen is published yet."
    )
    return [*_paragraph(timing), "", *fresh_table()]


def minatar_block() -> list[str]:
    """The MinAtar table, after the runs' wall-clock."""
    runs = [RUNS / f"s{seed}-{game.preset}-10M" for game in MINATAR for seed in MINATAR_SEEDS]
    return [
        *_paragraph(
            f"Each of these {len(runs)} runs took {_minutes(runs)} to its final evaluation on "
            "a 2-core CPU, under differing load (benchmarks journal, 6b and 6c)."
        ),
        "",
        *minatar_table(),
    ]


def _leads(theirs: dict[int, float], ours: dict[int, float], action: str) -> str:
    """Which side scores higher on which seeds, and by how much."""
    parts = []
    for side, sign in (("CleanRL's", 1), ("ours", -1)):
        seeds = [s for s in ATARI_SEEDS if sign * (theirs[s] - ours[s]) > 0]
        if seeds:
            by = _join([f"{abs(theirs[s] - ours[s]):.1f}" for s in seeds])
            parts.append(f"{side} on seed{'s' * (len(seeds) > 1)} {_join(list(map(str, seeds)))} "
                         f"(by {by} points)")  # fmt: skip
    return f"with {action} " + _join(parts)  # "with sampled actions CleanRL's on seeds 0, 1 ..."


ATARI_TIMED = {
    1: ("breakout_atari-2M-seed1.json", "breakout_atari-2M-seed1.json"),
    2: ("breakout_atari-2M-seed2-rerun.json", "breakout_cleanrl-2M-seed2-rerun.json"),
}
"""The Breakout seeds whose two runs were timed each alone on the machine: our file and
CleanRL's (benchmarks journal, 8e and 10h; seed 0's shared the machine)."""


def _atari_times() -> str:
    """Our whole runs' wall-clock and CPU time over CleanRL's, per seed timed alone."""
    wall, cpu = [], []
    for ours, theirs in ATARI_TIMED.values():
        a = read_json(ours)
        b = read_json(theirs)
        a, b = a.get("bench", a)["batchppo"], b.get("bench", b)["cleanrl"]
        wall.append(a["seconds"] / b["seconds"])
        cpu.append(a["cpu_seconds"] / b["cpu_seconds"])
    seeds = _join([str(s) for s in ATARI_TIMED])
    return (
        f"Time of a whole run (start-up and evaluations included), each side alone on the "
        f"machine, ours over CleanRL's, seeds {seeds}: wall-clock "
        f"{_join([f'{v:.2f}x' for v in wall])}, CPU time {_join([f'{v:.2f}x' for v in cpu])} "
        f"(one run a seed; benchmarks journal, 8e and 10h)."
    )


def _pong() -> str:
    """Pong's final scores on both sides, three seeds."""
    values = [e["mean_return"] for e in load_entries(results_path("pong_atari-2M-3seeds.json"))]
    for seed in ATARI_SEEDS:
        bench = read_json(f"pong_atari-2M-seed{seed}.json")["bench"]
        values += [bench["cleanrl"]["score"], bench["batchppo"]["score"]]
    # Within two points of a game lost 0-21, as benchmarks journal 8f reads "not learned".
    learned = "" if max(values) > -19 else "neither side learned "
    return (
        f"Pong at 2M frames, seeds {_join([str(s) for s in ATARI_SEEDS])} a side: {learned}(every "
        f"final score between {min(values):.1f} and {max(values):.1f}, where -21 is a game lost "
        "0-21; benchmarks journal, 8f)."
    )


def atari_block() -> list[str]:
    """The Atari table, then what it says per seed, the time, and Pong."""
    actions = ("sampled actions", "the mean action")
    leads = "; ".join(
        _leads(
            _scored(f"breakout_cleanrl_model-2M-3seeds-{suffix}", protocol, 30),
            _scored(f"breakout_atari-2M-rerun-{suffix}", protocol, 30),
            action,
        )
        for (_, protocol, suffix), action in zip(ATARI_FINAL, actions, strict=True)
    )
    return [
        *atari_table(),
        "",
        *_paragraph(f"The higher score per seed: {leads}. {_atari_times()} {_pong()}"),
    ]


CRAFTAX = ("craftax-cpu-2026-11-26.json", "craftax-speed-cpu-2026-11-27.json")
"""`bench/craftax_side_by_side.py`'s runs: the learning run at 1M steps, the speed rounds."""


def _craftax_sides(name: str) -> dict[str, list[dict]]:
    """A Craftax bench file's rows by side, in round order."""
    rows = read_json(name)["rows"]
    by_side: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: r["round"]):
        by_side.setdefault(row["side"], []).append(row)
    return by_side


def craftax_block() -> list[str]:
    """Craftax beside the baselines' `ppo.py`: return at 1M steps, speed at equal steps."""
    learning, speed = (read_json(name)["args"] for name in CRAFTAX)
    if learning["rounds"] != 1:
        raise SystemExit(f"{CRAFTAX[0]}: {learning['rounds']} runs a side: compare by intervals")
    final = {side: rows[0]["final_return"] for side, rows in _craftax_sides(CRAFTAX[0]).items()}
    points = [(final[side], final[side]) for side in ("baseline", "batchppo")]
    _, verdict = _outcome(["the baseline", "batchppo"], points)
    runs = _craftax_sides(CRAFTAX[1])

    def ratios(side: str) -> str:
        pairs = zip(runs[side], runs["baseline"], strict=True)
        return _join([f"{a['sps'] / b['sps']:.2f}x" for a, b in pairs])

    return _paragraph(
        "**Craftax-Classic-Symbolic** (`craftax_symbolic`: the Craftax baselines' `ppo.py` "
        "settings, fused) beside that `ppo.py` itself, on 2 CPU cores, by its protocol (the "
        f"mean return of the sampled training episodes of the last {learning['window']} "
        f"updates): {final['batchppo']:.2f} against {final['baseline']:.2f} at "
        f"{learning['steps']:,} steps, seed {learning['seed']}: {verdict}. Speed "
        f"at equal steps ({speed['steps']:,} a run, each side in its own process, "
        f"{_count(len(runs['baseline']), 'round')} in alternating order): {ratios('batchppo')} "
        f"the baseline's steps/s ({ratios('batchppo_lean')} without the per-minibatch "
        "diagnostics; benchmarks journal, 13)."
    )


def bench_rows(*names: str) -> dict[str, list[dict]]:
    """`bench/gpu.py`'s rows (one a side and round: `side`, `round`, `sps`, `setup_s`, ...) by
    workload, from its JSON files and the logs it printed (a `<workload> <side> round <n>:
    {...}` line a row), the JSON's row where both hold one."""
    by_key: dict[tuple[str, str, int], dict] = {}
    for name in names:
        path = results_path(name)
        if path.suffix == ".json":
            workloads = json.loads(path.read_text())["workloads"]
            found = [(w, row) for w, load in workloads.items() for row in load["rows"]]
        else:
            found = [
                (m.group(1), ast.literal_eval(m.group(2)))
                for m in re.finditer(r"^(\S+) \S+ round \d+: (\{.*\})$", path.read_text(), re.M)
            ]
        for workload, row in found:
            by_key.setdefault((workload, row["side"], row["round"]), row)
    rows: dict[str, list[dict]] = {}
    for (workload, _, _), row in by_key.items():
        rows.setdefault(workload, []).append(row)
    return rows


def side_ratio(rows: Sequence[dict], side: str, peer: str) -> tuple[float, int] | None:
    """``side``'s median steps/s over ``peer``'s in one run's rows, and its rounds; None where
    the run has no row of either."""
    sps = {s: [r["sps"] for r in rows if r["side"] == s] for s in (side, peer)}
    if not all(sps.values()):
        return None
    return float(np.median(sps[side]) / np.median(sps[peer])), len(sps[side])


def run_ratios(
    runs: Sequence[Sequence[str]], workload: str, side: str, peer: str
) -> list[tuple[float, int]]:
    """Each run's ratio of ``side`` to ``peer`` on ``workload`` (a run: its files) and its
    rounds, for the runs that have both sides."""
    found = [side_ratio(bench_rows(*run).get(workload, []), side, peer) for run in runs]
    return [f for f in found if f is not None]


def _readings(found: Sequence[tuple[float, int]]) -> str:
    """Every run's ratio, how many runs and, where a run has several, its rounds."""
    rounds = {n for _, n in found}
    if rounds == {1}:
        return _ratios([r for r, _ in found], "round")
    each = f"{'each ' if len(found) > 1 else ''}of {_count(max(rounds), 'round')}"
    return _ratios([r for r, _ in found], "run").replace(")", f", {each})")


GPU_RUNS = {
    "cartpole": (
        ("gpu-h200-cartpole-2026-11-27.json", "gpu-h200-cartpole-2026-11-27.log"),
        ("gpu-h200-cartpole2048-2026-11-27-c.json",),
    ),
    "brax": (
        ("gpu-h200-brax-2026-11-27.json", "gpu-h200-brax-2026-11-27.log"),
        ("gpu-h200-humanoid-2026-11-27-b.json",),
        ("gpu-h200-humanoid-2026-11-27-c.json",),
    ),
    "setup": (("gpu-h200-humanoid-setup-2026-11-27-d5.json",),),
}
"""`bench/gpu.py`'s runs on the H200 on 2026-11-27 (benchmarks journal, 11e, 11i,
11j), each a call's files: its JSON and, where the call was cut short, the log that kept the
rest."""
ATARI_TARGET = 9600
"""Issue 41's Atari rate at 8 envs: twice the 4.8k agent steps/s of CleanRL's runtime table
for `ppo_atari_envpool_xla_jax_scan.py`."""


def _setup() -> str:
    """The range of batchppo's set-up before compiling per preset, over every process."""
    runs = [run for group in GPU_RUNS.values() for run in group]
    times: dict[str, list[float]] = {}
    for run in runs:
        for workload, rows in bench_rows(*run).items():
            preset = "CartPole" if workload.startswith("cartpole") else f"`{workload[5:]}_brax`"
            times.setdefault(preset, []).extend(
                r["setup_s"] for r in rows if r["side"].startswith("batchppo")
            )
    return _join([
        f"{preset} {min(t):.1f}-{max(t):.1f} s ({len(t)} processes)" for preset, t in times.items()
    ])  # fmt: skip


def _atari_gpu() -> str:
    """`breakout_atari`'s rates on the GPU machines, the env alone, and the lockstep model."""
    readings = read_json("gpu-h200-atari-train-2026-11-27.json")
    loop = [r for r in readings["readings"] if r["host_loop"]]
    graph = [r for r in readings["readings"] if not r["host_loop"]]
    env = read_json("gpu-h200-envs-atari-2026-11-27.json")
    lock = read_json("gpu-h200-lockstep-2026-11-27-d1.json")
    alone = env["ALE/Breakout-v5"]["8"]["batch_arr"]
    bound = lock["sizes"]["8"]["lockstep_sps"]

    def rates(found: list[dict]) -> str:
        return _join([f"{r['agent_steps_per_s']:,}" for r in found])

    return (
        "**Atari on that GPU**: Breakout at CleanRL's settings (`breakout_atari`, 8 envs in "
        f"worker processes) trained at {rates(loop)} agent steps/s with the rollout a Python "
        f"loop ({_count(len(loop), 'run')}, one a call; {rates(graph)} with the rollout inside "
        "the compiled program; benchmarks journal, 11i, 11j). In the first of those calls the 8 "
        "envs "
        f"alone (BatchEnv, no learner) stepped at {alone:,.0f} agent steps/s (best of 2 "
        "rounds). A model, not a measurement: `bench/lockstep.py` draws 8 independent step "
        "times from one env's step times, measured on the machine of another call, and "
        f"counts the slowest, so 8 envs stepped together make at most {bound:,.0f} agent "
        f"steps/s there with no learner at all, under the target of {ATARI_TARGET:,} (2x "
        "CleanRL's reported rate)."
    )


ALE_GPU_CALLS = (
    ("gpu-h200-cleanrl-ale-2026-11-28.json", "the old fused step"),
    (
        "gpu-h200-cleanrl-ale-fused-2026-11-28.json",
        "another machine, a fused step with no host call",
    ),
    (
        "gpu-h200-cleanrl-ale-2026-11-28-call3.json",
        "a third machine, the GPU programs compiled without dynamic-slice fusion",
    ),
)
"""`bench/cleanrl_envpool.py`'s calls on the H200 on 2026-11-28 (benchmarks journal, 14 and
18), in the order run, and what each call's README line says of it besides its code version."""
ALE_RAW = (
    "gpu-h200-ale-fused-2026-11-28-call3.json",
    "gpu-h200-ale-fused-32envs-2026-11-28-call3.json",
)
"""`bench/ale_fused.py` in the last CleanRL call: ALE's raw step at 8 and 32 envs."""
ALE_ENV_COUNTS = (
    "gpu-h200-ale-fused-2026-11-28-call3.json",
    "gpu-h200-ale-fused-16envs-2026-11-28-call4.json",
    "gpu-h200-ale-fused-32envs-2026-11-28-call3.json",
    "gpu-h200-ale-fused-64envs-2026-11-28-call4.json",
    "gpu-h200-ale-fused-128envs-2026-11-28-call4.json",
)
"""`bench/ale_fused.py` on the last call's machine (that call and the next): the trainer's
fused iteration by env count."""
ALE_SIDES = {
    "batchppo": "batchppo on the process backend",
    "ale-host": "`ale` host mode",
    "ale-fused": "`ale` fused mode",
}
"""The names the GPU paragraph gives `bench/cleanrl_envpool.py`'s sides, in the order it gives
them."""


def _rounds(rows: Sequence[dict], side: str) -> list[float]:
    """``side``'s agent steps/s in a `bench/cleanrl_envpool.py` file's rows, by round."""
    found = sorted((r for r in rows if r["side"] == side), key=lambda r: r["round"])
    return [r["agent_steps_per_s"] for r in found]


def _code_version(data: dict) -> str:
    """The code a bench file was made from: ``code_version`` where set by hand in the first
    files, else the harness's ``commit`` (``-dirty`` there: files beside the code, such as
    the run dirs, were left out of the transfer; the journal says which)."""
    return data.get("code_version") or data["commit"].removesuffix("-dirty")


def _ale_call(name: str, what: str, number: int) -> tuple[str, float]:
    """One call's readings, each side's rounds and its median over CleanRL's median in the
    call; and that CleanRL median."""
    data = read_json(name)
    rows = data["rows"]
    theirs = _rounds(rows, "cleanrl")
    median = float(np.median(theirs))

    def rates(values: Sequence[float]) -> str:
        return _join([f"{v:,.0f}" for v in values])

    sides = [
        f"{label} {rates(_rounds(rows, side))} "
        f"({float(np.median(_rounds(rows, side))) / median:.2f}x)"
        for side, label in ALE_SIDES.items()
        if _rounds(rows, side)
    ]
    text = (
        f"call {number} (code {_code_version(data)}, {what}, "
        f"{_count(len(theirs), 'round')}): CleanRL {rates(theirs)} (median {median:,.0f}), "
        f"{_join(sides)}"
    )
    return text, median


def _ale_env_counts() -> str:
    """The fused iteration's agent steps/s by env count, and its ALE step calls."""
    found = [read_json(name) for name in ALE_ENV_COUNTS]
    calls = {c for r in found for c in r["step_calls"]["package"].values()}
    rates = _join(
        [
            f"{r['variants']['package']['iteration']['agent_steps_per_s']:,.0f} at {r['envs']}"
            for r in found
        ]
    )
    return (
        f"The trainer's fused iteration there (policy, env and update; `bench/ale_fused.py`, "
        f"median of {found[0]['repeats']} calls of {found[0]['steps']} steps) made {rates} "
        f"envs, each compiled program holding "
        f"{'one' if calls == {1} else _join(sorted(map(str, calls)))} ALE step call"
        f"{'' if calls == {1} else 's'} per agent step"
    )


def _atari_ale_gpu() -> str:
    """Breakout on the `ale` backend beside CleanRL's EnvPool script, call by call, ALE's raw
    step alone on the last call's machine, and the fused iteration by env count there."""
    calls = [_ale_call(name, what, i + 1) for i, (name, what) in enumerate(ALE_GPU_CALLS)]
    raw = [read_json(name) for name in ALE_RAW]
    last_median = calls[-1][1]
    eight, more = (r["raw_step"]["agent_steps_per_s"] for r in raw)
    steps = f"{eight:,.0f} agent steps/s at {raw[0]['envs']} envs ({more:,.0f} at {raw[1]['envs']}"
    return (
        "**Atari on ALE's own vector env on that GPU** (`breakout_atari` with `backend=ale`, an "
        "H200, 2026-11-28; agent steps/s at CleanRL's settings, each side's median over its "
        "iterations after the first, beside CleanRL's `ppo_atari_envpool_xla_jax_scan.py` in "
        "the same call; ratios: a side's median over CleanRL's median in that call; "
        f"benchmarks journal, 14 and 18): {'; '.join(text for text, _ in calls)}. In calls 1 "
        "and 2 XLA's GPU compiler cloned ALE's step into a dynamic-slice fusion, so each agent "
        "step called it twice (a trace, journal 14). On the last call's machine ALE's own "
        "`xla()` step alone, with no learner, fixed actions and its own autoreset "
        f"(`bench/ale_fused.py`, median of {raw[0]['repeats']} calls of {raw[0]['steps']} "
        f"steps), made {steps} envs): a measurement of the env library alone, under twice "
        f"that call's CleanRL median ({2 * last_median:,.0f}). {_ale_env_counts()}."
    )


def gpu_block() -> list[str]:
    """Our fused PPO against PureJaxRL's and Brax's on the H200, then Atari there."""
    cartpole, brax = GPU_RUNS["cartpole"], GPU_RUNS["brax"]

    def pjx(envs: int, side: str = "batchppo") -> str:
        return _readings(run_ratios(cartpole, f"cartpole-{envs}", side, "purejaxrl"))

    def bx(env: str, side: str = "batchppo") -> str:
        return _readings(run_ratios(brax, f"brax-{env}", side, "brax"))

    speed = _paragraph(
        "**Speed on one GPU** (an NVIDIA H200 with 16 CPU cores, 2026-11-27, the sides of a "
        "figure in one call; env steps/s by wall clock with compilation excluded, each side in "
        "its own process; benchmarks journal, 11e, 11i, 11j): batchppo's fused PPO against "
        f"PureJaxRL's `ppo.py` on CartPole with its own settings, {pjx(4)} at 4 envs and "
        f"{pjx(2048)} at 2048 "
        f"({pjx(4, 'batchppo-lean')} and {pjx(2048, 'batchppo-lean')} with "
        "`minibatch_diagnostics: false`); against Brax's own PPO at the `ant_brax` settings "
        "with Brax's restart to each env's cached first state (`autoreset: first`), "
        f"{bx('ant', 'batchppo-first')} on `ant` and {bx('humanoid', 'batchppo-first')} on "
        "`humanoid`; with batchppo's default, a fresh initial state for every episode, "
        f"{bx('ant')} on `ant` and {bx('humanoid')} on `humanoid`. Set-up before compiling: "
        f"{_setup()}."
    )
    return [*speed, "", *_paragraph(_atari_gpu()), "", *_paragraph(_atari_ale_gpu())]


CPU_RUNS = {
    "default": (
        ("cpu-cartpole-shuffle-2026-11-27-two-cores.json", ""),
        ("cpu-cartpole-threads-2026-11-27-a-default.json", ""),
        ("cpu-cartpole-threads-2026-11-27-default.json", ""),
        ("cpu-cartpole-threads-2026-11-27-c.json", ""),
    ),
    "one thread": (
        ("cpu-cartpole-threads-2026-11-27-a-one-thread.json", ""),
        ("cpu-cartpole-threads-2026-11-27-one-thread.json", ""),
        ("cpu-cartpole-threads-2026-11-27-c.json", "-threads1"),
    ),
}
"""`bench/gpu.py`'s CartPole runs on this project's 2-core CPU on 2026-11-27 (benchmarks
journal, 11d, 11g), in the order run, with XLA's default thread pool and with one thread
(`PJRT_NPROC=1`): each run's file and the suffix of its sides (`-c.json` ran both pools, its
one-thread sides named `batchppo-threads1` and `purejaxrl-threads1`)."""


def cpu_block() -> list[str]:
    """Our fused PPO against PureJaxRL's on CartPole on the 2-core CPU, by XLA's thread pool."""

    def pjx(envs: int, pool: str) -> str:
        found = [
            ratio
            for name, suffix in CPU_RUNS[pool]
            for ratio in run_ratios([[name]], f"cartpole-{envs}", f"batchppo{suffix}",
                                    f"purejaxrl{suffix}")
        ]  # fmt: skip
        return _readings(found)

    cartpole = _paragraph(
        "**Speed on a 2-core CPU** (CartPole at PureJaxRL's settings, env steps/s by wall clock, "
        "each side in its own process, 3 calls a round; benchmarks journal, 11d, 11g): "
        f"batchppo's default against PureJaxRL's `ppo.py`, {pjx(64, 'default')} at 64 envs and "
        f"{pjx(4, 'default')} at 4 envs, where XLA's CPU runtime hops the 4-env program between "
        "its threads from run to run; with XLA's pool at one thread on both sides "
        f"(`PJRT_NPROC=1`), {pjx(4, 'one thread')} at 4 envs and {pjx(64, 'one thread')} at 64."
    )
    return [*cartpole, "", *_paragraph(_cpu_atari())]


CPU_ATARI = ("cpu-atari-ale-2026-11-28.json", "cpu-cleanrl-envpool-2026-11-27.json")
"""`bench/train.py --only atari` (the process backend against the `ale` backend's modes) and
`bench/cleanrl_envpool.py` (beside CleanRL's EnvPool script), both on the 2-core CPU."""

CPU_ATARI_SIDES = {"process": "process", "ale_host": "`ale` host", "ale_fused": "`ale` fused"}
"""The sides of `bench/train.py --only atari`, as the paragraph names them."""


def _cpu_atari() -> str:
    """`breakout_atari` on the CPU: the process backend against the `ale` backend's modes by
    env count, and beside CleanRL's EnvPool script."""
    data = read_json(CPU_ATARI[0])
    sides = data["atari"]
    best_of = int(re.search(r"--rounds (\d+)", data["command"]).group(1))

    def at(envs: str) -> str:
        base = sides[envs]["process"]["sps"]
        return _join([
            f"{label} {sides[envs][side]['sps']:,.0f}"
            + ("" if side == "process" else f" ({sides[envs][side]['sps'] / base:.2f}x)")
            for side, label in CPU_ATARI_SIDES.items()
        ])  # fmt: skip

    counts = sorted(sides, key=int, reverse=True)
    envpool = read_json(CPU_ATARI[1])
    rows = envpool["rows"]
    ours = float(np.median([r["agent_steps_per_s"] for r in rows if r["side"] == "batchppo"]))
    theirs = float(np.median([r["agent_steps_per_s"] for r in rows if r["side"] == "cleanrl"]))
    rounds = len({r["round"] for r in rows})
    return (
        "**`breakout_atari` on that CPU** (agent steps/s after start-up, each side's best of "
        f"{_count(best_of, 'round')}, the sides alternating; `bench/train.py --only atari`): "
        + "; ".join(f"at {n} envs {at(n)}" for n in counts)
        + ". Beside CleanRL's `ppo_atari_envpool_xla_jax_scan.py` (`bench/cleanrl_envpool.py`, "
        f"{envpool['steps']:,} agent steps a run, the median of {_count(rounds, 'round')}): "
        f"`breakout_atari` {ours:,.0f} against {theirs:,.0f} ({ours / theirs:.1f}x; on this CPU "
        "CleanRL's update's convolution gradients are the slow part, benchmarks journal 11k)."
    )


def ale_bound_block() -> list[str]:
    """The fused `ale` iteration by env count on the GPU machine of the last CleanRL call,
    beside ALE's own step alone: a table of `bench/ale_fused.py`'s phases, and what it bounds."""
    found = [read_json(name) for name in ALE_ENV_COUNTS]
    parts = ("env", "rollout", "update")
    lines = [
        *_paragraph(
            f"**The bound by env count** (`bench/ale_fused.py --envs N --variants package "
            f"--repeats {found[0]['repeats']}`, ms per {found[0]['steps']}-step call, the median "
            "of the calls, agent steps/s in brackets): ALE's raw `xla()` step alone (its own "
            "autoreset, fixed actions, no learner) beside the trainer's fused phases."
        ),
        "",
        "| envs | ALE's raw `xla()` step alone | the env's step | the rollout | the update | "
        "the iteration |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in found:
        phase = r["variants"]["package"]
        cells = [
            f"{r['raw_step']['ms']:,.0f} ({r['raw_step']['agent_steps_per_s']:,.0f})",
            *(f"{phase[p]['ms']:,.0f}" for p in parts),
            f"{phase['iteration']['ms']:,.0f} ({phase['iteration']['agent_steps_per_s']:,.0f})",
        ]
        lines.append(f"| {r['envs']} | " + " | ".join(cells) + " |")  # fmt: skip
    eight = found[0]
    ratio = eight["variants"]["package"]["iteration"]["ms"] / eight["raw_step"]["ms"]
    slower = [str(r["envs"]) for r in found
              if r["raw_step"]["ms"] > r["variants"]["package"]["env"]["ms"]]  # fmt: skip

    def minutes(r: Mapping[str, Any]) -> str:
        return f"{1e7 / r['variants']['package']['iteration']['agent_steps_per_s'] / 60:.0f}"

    best = max(found, key=lambda r: r["variants"]["package"]["iteration"]["agent_steps_per_s"])
    text = (
        f"At {eight['envs']} envs the fused iteration takes {ratio:.2f}x ALE's raw step alone. "
        f"Breakout at 10M agent steps at these rates: about {minutes(eight)} minutes at "
        f"{eight['envs']} envs, {minutes(best)} at {best['envs']} (the fastest here; that "
        "recipe's learning not measured)."
    )
    if slower:
        text += (f" At {_join(slower)} envs ALE's raw step (its own autoreset inside the step) "
                 "is slower than the env's step with batchppo's explicit resets; not "
                 "investigated.")  # fmt: skip
    return [*lines, "", *_paragraph(text)]


# --- Hyperparameter search: `batchppo tune` beside rl-zoo's `--optimize` ---------------------

TUNE_RLZOO = "tune-vs-rlzoo-2026-12-02.json"
"""`bench/tune_vs_rlzoo.py`'s run: rl-zoo's `--optimize` and `batchppo tune`'s sides on
Pendulum-v1, each given the same wall-clock."""

FUSED_GOAL = 10.0
"""Issue 69's goal: the fused path's trials per hour at least this many times rl-zoo's."""

BATCH_GOAL = ("batch8", "batch1", 4.0)
"""Issue 69's goal: `--batch 8`'s trials per hour at least this many times `--batch 1`'s."""

TUNE_SIDES = {
    tune_vs_rlzoo.BASELINE: "rl-zoo's `train.py -optimize` (SB3's PPO)",
    "host": f"`batchppo tune --config {tune_vs_rlzoo.HOST_CONFIG}`",
    "fused": f"`batchppo tune --config {tune_vs_rlzoo.FUSED_CONFIG}`",
}
"""What each side of the run is, as the table names it (a `batchN` side: `fused` with
`--batch N`)."""


def _tune_side(side: str, figures: Mapping[str, Any]) -> str:
    """A side of the rl-zoo run as the table names it."""
    if figures.get("batch") is not None:
        return f"`batchppo tune --config {figures['config']} --batch {figures['batch']}`"
    return TUNE_SIDES[side]


def _tune_cell(result: harness.Result, side: str, key: str, fmt: str) -> str:
    """A side's median of ``key`` and, where it ran more than one round, every round's reading
    (`186.0 (180.0, 192.0)`); `—` where no round measured it."""
    values = result.values(side, key)
    if not values:
        return "—"
    median = format(result.median(side, key), fmt)
    return median if len(values) == 1 else f"{median} ({', '.join(format(v, fmt) for v in values)})"


def _tune_counts(result: harness.Result, side: str) -> str:
    """A side's trials counted in each round, the pruned ones in brackets: `13 (4), 14 (5)`."""
    return ", ".join(f"{r['trials']} ({r['pruned']})" for r in result.readings(side)) or "—"


def _tune_ratio(result: harness.Result, side: str, base: str, key: str) -> float | None:
    """``side``'s median ``key`` over ``base``'s; None where either has none or ``base``'s is
    0."""
    mine, theirs = result.median(side, key), result.median(base, key)
    return mine / theirs if mine is not None and theirs else None


def _times(ratio: float | None) -> str:
    """`7.50x`; `—` for no ratio."""
    return "—" if ratio is None else f"{ratio:.2f}x"


def _met(ratio: float | None, goal: float) -> str:
    """`met` where ``ratio`` reaches ``goal``, else `not met`."""
    return "met" if ratio is not None and ratio >= goal else "not met"


def _tune_goal_row(result: harness.Result, goal: str, side: str, base: str, times: float) -> str:
    """A row of the goals' table: ``side``'s trials per hour over ``base``'s (the medians'
    ratio, which the verdict judges), round by round and how many rounds reach ``times``, and
    the medians' ratio by trials per CPU-hour with its own verdict."""
    ratio = _tune_ratio(result, side, base, "trials_per_hour")
    rounds = result.round_ratios(side, base, "trials_per_hour")
    cpu = _tune_ratio(result, side, base, "trials_per_cpu_hour")
    reached = sum(r >= times for r in rounds)
    cells = [goal, side, _times(ratio),
             f"{', '.join(_times(r) for r in rounds) or '—'} ({reached} of {len(rounds)})",
             f"{_times(cpu)} ({_met(cpu, times)})", _met(ratio, times)]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def _tune_goals(result: harness.Result, fused: Sequence[str]) -> list[str]:
    """Issue 69's two goals, a row for each side that they judge, with their verdicts computed
    from the run's readings; then the fused path's verdict over its sides."""
    base = tune_vs_rlzoo.BASELINE
    fused_goal = f"the fused path (`{tune_vs_rlzoo.FUSED_CONFIG}`) >= {FUSED_GOAL:g}x rl-zoo's"
    side, peer, times = BATCH_GOAL
    rows = [_tune_goal_row(result, fused_goal, s, base, FUSED_GOAL) for s in fused]
    if {side, peer} <= set(result.names):
        rows.append(_tune_goal_row(result, f"`--batch 8` >= {times:g}x `--batch 1`'s", side,
                                   peer, times))  # fmt: skip
    met = [s for s in fused if _met(_tune_ratio(result, s, base, "trials_per_hour"),
                                    FUSED_GOAL) == "met"]  # fmt: skip
    verdict = (f"met by {_join(met)}" if met else "not met by any of its sides" if fused
               else "not measured: the run has no fused side")  # fmt: skip
    return [
        *_paragraph(
            "Issue 69's goals, in trials per hour (the verdict judges the medians' ratio; the "
            "rounds' ratios pair the sides' studies of each round; by trials per CPU-hour, the "
            "same goal on CPU time):"
        ),
        "",
        "| goal | side | trials/h ratio | round by round (at the goal) | by trials/CPU-h | "
        "verdict |",
        "|---|---|---:|---:|---:|---|",
        *rows,
        "",
        *_paragraph(f"The fused path's goal: {verdict}."
                    + ("" if {side, peer} <= set(result.names)
                       else f" The `--batch` goal: not measured (no {side} or {peer} side).")),
    ]  # fmt: skip


def _tune_versions(data: Mapping[str, Any]) -> str:
    """The packages each side ran with, and rl-zoo's Pendulum-v1 entry."""
    versions = data["versions"]

    def listed(found: Mapping[str, str]) -> str:
        return ", ".join(f"{name} {version}" for name, version in found.items())

    entry = ", ".join(f"`{k}: {v}`" for k, v in (data.get("rlzoo_hyperparams") or {}).items())
    threads = data["args"]["rlzoo_threads"]
    return (
        f"rl-zoo's side ran {listed(versions[tune_vs_rlzoo.BASELINE])} (torch on "
        f"{'a thread per core' if threads == -1 else _count(threads, 'thread')}) around its "
        f"`hyperparams/ppo.yml` entry for {data['env']} ({entry}); batchppo's sides ran "
        f"{listed(versions['batchppo'])}."
    )


def _tune_command(command: str) -> list[str]:
    """The run's recorded command as a shell block, `python bench/...`, broken between options
    at `WIDTH`."""
    script, *words = shlex.split(command)
    chunks = [f"python bench/{script}"]
    for word in map(shlex.quote, words):
        if word.startswith("-") or chunks[-1].startswith("python"):
            chunks.append(word)
        else:
            chunks[-1] += f" {word}"
    lines = [chunks[0]]
    for chunk in chunks[1:]:
        if len(lines[-1]) + len(chunk) + 3 > WIDTH:
            lines.append("   ")
        lines[-1] += f" {chunk}"
    return ["```shell", " \\\n".join(lines), "```"]


def tune_rlzoo_block() -> list[str]:
    """`batchppo tune` beside rl-baselines3-zoo's `--optimize` on Pendulum-v1 at equal
    wall-clock: a row a side, the ratios, issue 69's goals with their verdicts, what differs
    between the sides and the command (`bench/tune_vs_rlzoo.py`'s JSON)."""
    data = read_json(TUNE_RLZOO)
    args = data["args"]
    sides = list(data["figures"])
    result = harness.Result(sides, data["rows"])
    base = tune_vs_rlzoo.BASELINE
    fused = [s for s in sides if data["figures"][s].get("config") == tune_vs_rlzoo.FUSED_CONFIG]
    lines = [
        *_paragraph(
            f"**Hyperparameter search on {data['env']}** (`bench/tune_vs_rlzoo.py`): each side "
            f"one Optuna study in a process of its own for {args['minutes']:g} minutes of "
            f"wall-clock, {_count(args['rounds'], 'round')} in alternating order, "
            f"{args['steps']:,} env steps and {_count(args['seeds'], 'seed')} a trial, "
            f"{args['evaluations']} evaluations of {args['eval_episodes']} episodes with the mean "
            "action, the last one the trial's value. Counted: the trials complete or pruned by "
            "the deadline; trials per CPU-hour divide them by the CPU time of the side's "
            "processes. Each figure is the median of the rounds, each round's reading in "
            "brackets; best: the highest value of a complete trial (mean return, higher is "
            "better); median trial: the complete trials' durations; first trial: from the launch "
            "to the first trial's end, start-up and compilation included."
            + _tune_failures(data["rows"])
        ),
        "",
        "| side | trials (pruned) a round | trials/h | trials/CPU-h | best return | median trial s "
        "| first trial s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for side in sides:
        cells = [_tune_counts(result, side)] + [
            _tune_cell(result, side, key, fmt)
            for key, fmt in (("trials_per_hour", ",.1f"), ("trials_per_cpu_hour", ",.1f"),
                             ("best", ".1f"), ("trial_s", ".1f"), ("first_s", ".1f"))
        ]  # fmt: skip
        lines.append(f"| {side}: {_tune_side(side, data['figures'][side])} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    ratios = "; ".join(
        f"{what}: "
        + ", ".join(f"{s} {_times(_tune_ratio(result, s, base, key))}" for s in sides if s != base)
        for key, what in (("trials_per_hour", "trials/h"), ("trials_per_cpu_hour", "trials/CPU-h"))
    )
    return [
        *lines,
        "",
        *_paragraph(f"Against rl-zoo (the medians' ratio): {ratios}."),
        "",
        *_tune_goals(result, fused),
        "",
        *_paragraph(_tune_versions(data)),
        "",
        "What differs between the sides (as the run records it):",
        "",
        *[line for item in data["differences"] for line in _item(item)],
        "",
        *_tune_command(data["command"]),
    ]


def _tune_failures(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rounds that measured nothing, each with its error, as a sentence (none: empty)."""
    failed = [f"{r['side']} round {r['round'] + 1} ({r['error']})" for r in rows if "error" in r]
    return f" Rounds left out, having failed: {'; '.join(failed)}." if failed else ""


def _item(text: str) -> list[str]:
    """A list item, wrapped as a paragraph and indented under its dash."""
    first, *rest = _paragraph(text, WIDTH - 2)
    return [f"- {first}", *(f"  {line}" for line in rest)]


# --- The front page: one row a family, and the figure of the fresh seeds ----------------------


def strongest_peer(task: Task) -> Protocol:
    """The peer whose published figure for ``task`` is the highest of the three (CleanRL,
    rl-zoo, Tianshou, each by its own protocol): the one the headline row compares with."""
    published = [p for p in PROTOCOLS if p.figure(task) is not None]
    return max(published, key=lambda p: p.figure(task)[0])


def _estimate(value: float | None, interval: Interval | None, digits: int) -> str:
    """`5608 [5110, 5966]`: a figure and its 95 % interval; `(1 run)` where the interval is a
    point (a peer's one run); `pending` where there is no figure yet."""
    if value is None:
        return "pending"
    text = f"{value:.{digits}f}"
    if interval is None:
        return text
    if interval[0] == interval[1]:
        return f"{text} (1 run)"
    return f"{text} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def _bold(text: str, bold: bool) -> str:
    return f"**{text}**" if bold else text


def _outcome(names: Sequence[str], intervals: Sequence[Interval | None]) -> tuple[int | None, str]:
    """Which side is higher (its index, or None) and the verdict alone: `tie`, `X higher`, or
    `—` where a side has no interval yet (`_verdict`'s rule)."""
    best, cell = _verdict(names, intervals, 0)
    return best, cell.rpartition(": ")[2]


def _headline_mujoco(task: Task) -> list[str]:
    """A MuJoCo row: the IQM over the task's newest fresh seeds, and ours beside the strongest
    peer by the peer's protocol."""
    stem = fresh_stem(task)
    values = _group_scores(stem)
    own = None
    if values is not None:
        interval = stats_interval(results_path(f"{stem}-stats.json"), _env(task.tuning), values)
        own = _estimate(iqm(values), interval, 0)
    peer = strongest_peer(task)
    figure = peer.figure(task)
    assert figure is not None  # strongest_peer picks among the published figures
    theirs = t_interval(*figure, peer.runs)
    ours = peer.score(task, True)
    best, verdict = _outcome([peer.name, "batchppo"], [theirs, ours.interval])
    return [
        task.name,
        own or "pending",
        f"{peer.name} {_bold(_estimate(figure[0], theirs, 0), best == 0)}",
        _bold(_estimate(ours.value, ours.interval, 0), best == 1),
        verdict,
    ]


def _tally(verdicts: Sequence[str]) -> str:
    """`batchppo higher on 4 of 4`, `tie on 3 of 4, batchppo higher on 1 of 4`."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    return ", ".join(f"{what} on {n} of {len(verdicts)}" for what, n in counts.items())


def _headline_minatar() -> list[str]:
    """The MinAtar row: per game, our mean action's mean over seeds 0-2, and ours by gymnax's
    protocol beside gymnax's published return."""
    own, peer, ours, verdicts = [], [], [], []
    for game in MINATAR:
        stem = f"{game.preset}-10M-3seeds"
        mean_action = _seeds(_scored(stem, "final-mean", 100), MINATAR_SEEDS)[0]
        sampled = _scored(f"{stem}-sampled164", "final-sampled", 164)
        interval = _seeds_interval(sampled)
        best, verdict = _outcome(["gymnax", "batchppo"], [(game.gymnax, game.gymnax), interval])
        own.append(_estimate(mean_action, None, 1))
        peer.append(_bold(f"{game.gymnax:g}", best == 0))
        ours.append(_bold(_estimate(_seeds(sampled, MINATAR_SEEDS)[0], None, 1), best == 1))
        verdicts.append(verdict)
    games = " / ".join(game.name for game in MINATAR)
    return [
        f"MinAtar: {games}",
        " / ".join(own),
        f"gymnax {' / '.join(peer)} (1 run each)",
        " / ".join(ours),
        _tally(verdicts),
    ]


def _headline_atari() -> list[str]:
    """The Atari row: our final policies' mean action, and ours beside CleanRL's final
    policies, both scored alike with sampled actions."""
    (_, theirs_name, theirs_stem), (_, _, ours_stem) = ATARI_SIDES[:2]
    sampled, mean = ATARI_FINAL  # each (label, protocol, file suffix)

    def side(stem: str, row: tuple[str, str, str]) -> tuple[float | None, Interval | None]:
        _, protocol, suffix = row
        by_seed = _scored(f"{stem}-{suffix}", protocol, 30)
        return _seeds(by_seed, ATARI_SEEDS)[0], _seeds_interval(by_seed)

    own = side(ours_stem, mean)
    theirs = side(theirs_stem, sampled)
    ours = side(ours_stem, sampled)
    best, verdict = _outcome([theirs_name, "batchppo"], [theirs[1], ours[1]])
    return [
        "Atari: Breakout",
        _estimate(*own, 1),
        f"{theirs_name} {_bold(_estimate(*theirs, 1), best == 0)}",
        _bold(_estimate(*ours, 1), best == 1),
        verdict,
    ]


SpeedRuns = Sequence[tuple[Sequence[str], str]]
"""A speed comparison's runs: each run's files and the suffix of its sides' names."""


def _speed_readings(runs: SpeedRuns, envs: int, side: str) -> list[float]:
    """Every round's env steps/s of ``side`` (with its run's suffix) at ``envs`` envs."""
    return [
        row["sps"]
        for files, suffix in runs
        for row in bench_rows(*files).get(f"cartpole-{envs}", [])
        if row["side"] == f"{side}{suffix}"
    ]


def _rate(value: float) -> str:
    """`24.2M`, `412k`: env steps/s."""
    return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"


def _headline_speed(label: str, runs: SpeedRuns, envs: Sequence[int]) -> list[str]:
    """A speed row: CartPole at PureJaxRL's settings, our median env steps/s and PureJaxRL's
    over every round, our ratio to it in each run (the median of its rounds), and in how
    many runs ours was the faster."""
    own, peer, ratios, faster = [], [], [], []
    for n in envs:
        found = [
            ratio
            for files, suffix in runs
            for ratio in run_ratios([files], f"cartpole-{n}", f"batchppo{suffix}",
                                    f"purejaxrl{suffix}")
        ]  # fmt: skip
        unit = "round" if {rounds for _, rounds in found} == {1} else "run"
        own.append(_rate(float(np.median(_speed_readings(runs, n, "batchppo")))))
        peer.append(_rate(float(np.median(_speed_readings(runs, n, "purejaxrl")))))
        ratios.append(", ".join(f"{r:.2f}x" for r, _ in found))
        faster.append((sum(r > 1 for r, _ in found), len(found), unit))
    if len({unit for _, _, unit in faster}) == 1:  # `2 of 2 / 1 of 1 rounds`
        counts = " / ".join(f"{k} of {n}" for k, n, _ in faster) + f" {faster[0][2]}s"
    else:
        counts = " / ".join(f"{k} of {n} {unit}s" for k, n, unit in faster)
    return [
        f"{label}: CartPole, {' / '.join(map(str, envs))} envs",
        " / ".join(own),
        f"PureJaxRL `ppo.py` {' / '.join(peer)}",
        " / ".join(ratios),
        f"faster in {counts}",
    ]


HEADLINE_CAPTION = (
    "MuJoCo (v5, 1M env steps): the final policy's 100 episodes with the mean action, the IQM "
    "over the fresh {seeds} [95 % bootstrap interval]. MinAtar (10M steps, 100 episodes) "
    "and Atari (2M frames, 30 games): the mean action, the mean of seeds 0-2 (Atari's with its "
    "95 % t-interval). The peer: the highest published PPO figure by its own protocol (MuJoCo: "
    "of CleanRL, rl-zoo and Tianshou; MinAtar: gymnax) with its 95 % t-interval (one run: a "
    "point), beside ours by that protocol on the same runs with the t-interval of our mean over "
    "the seeds (both sides alike); Atari: CleanRL's `ppo_atari.py` run at the same settings, both "
    "final policies scored alike with sampled actions. Bold only where the two 95 % intervals "
    "separate, else a tie. Speed: env steps/s, the median over rounds, and "
    "ours over PureJaxRL's in each run, the sides taking turns in one call."
)
"""The headline table's caption: what each row measures (`docs/benchmarks.md` has the
protocols in full); ``{seeds}``: the MuJoCo rows' (`newest_seeds_text`)."""


def headline_block() -> list[str]:
    """The front page's table: one row per MuJoCo task, MinAtar, Atari and the speed on a GPU
    and on a CPU, each beside its strongest peer by the peer's protocol, with the verdict."""
    rows = [
        *(_headline_mujoco(task) for task in TASKS),
        _headline_minatar(),
        _headline_atari(),
        _headline_speed(
            "Speed, one H200 GPU", [(files, "") for files in GPU_RUNS["cartpole"]], (2048, 4)
        ),
        _headline_speed(
            "Speed, 2-core CPU",
            [((name,), suffix) for name, suffix in CPU_RUNS["default"]],
            (64, 4),
        ),
    ]
    return [
        *_paragraph(HEADLINE_CAPTION.format(seeds=newest_seeds_text())),
        "",
        "| task | batchppo | strongest peer, by its protocol | batchppo, by the peer's protocol "
        "| verdict |",
        "|---|---:|---|---:|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


FIGURE = ROOT / "docs" / "mujoco-fresh-seeds.png"
"""The front page's figure: each fresh seed's final score per MuJoCo task."""
FIGURE_DATA = FIGURE.with_suffix(".json")
"""What `FIGURE` was drawn from, written beside it; `--check` compares it with `figure_data`."""


def figure_data() -> dict[str, Any]:
    """The figure's data from docs/results: per MuJoCo task its target, its newest fresh seeds,
    each one's final score, their IQM, and the peers' published figures (each by its own
    protocol); ``seeds``: the newest set where every task's is the same, else None."""
    shared = shared_newest()
    tasks = []
    for task in TASKS:
        entries = load_entries(results_path(f"{fresh_stem(task)}.json")) or []
        by_seed = {
            str(e["seed"]): e["mean_return"] for e in sorted(entries, key=lambda e: e["seed"])
        }
        tasks.append({
            "task": task.name,
            "target": task.target,
            "seeds": task.fresh[0].label,
            "scores": by_seed,
            "iqm": round(iqm(np.array(list(by_seed.values()))), 1) if by_seed else None,
            "peers": {p.name: p.figure(task)[0] for p in PROTOCOLS if p.figure(task) is not None},
        })  # fmt: skip
    return {
        "seeds": None if shared is None else shared.label,
        "score": "the final policy's mean return over 100 episodes of the mean action",
        "peers": {p.name: f"{p.peer}: {p.statistic}" for p in PROTOCOLS},
        "tasks": tasks,
    }


def draw_figure(data: Mapping[str, Any], out: Path) -> None:
    """Draws `figure_data`'s scores, each over its task's target: a dot a seed (red below 70 %
    of the target), a bar at their IQM, the target and its 70 % line, and the peers' points.

    Args:
        data: `figure_data()`, or the JSON it was written to.
        out: The PNG to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = data["tasks"]
    # Seeds shared by every task are named in the legend, else beside each task.
    shared = data["seeds"]
    seeds = "each task's newest fresh seeds" if shared is None else f"seeds {shared}"
    markers = dict(zip(data["peers"], ("v", "s", "D"), strict=True))
    fig, ax = plt.subplots(figsize=(9, 5.6))
    ax.axvline(1.0, color="tab:green", lw=1.5, label="the task's target (for the IQM)")
    ax.axvline(0.7, color="tab:red", lw=1, ls="--", label="70 % of it (every seed's bar)")
    for row, task in enumerate(tasks):
        y = len(tasks) - 1 - row
        scaled = np.array(list(task["scores"].values())) / task["target"]
        first = row == 0
        ax.scatter(
            scaled,
            y + 0.1 + np.linspace(-0.2, 0.2, len(scaled)),
            s=24,
            c=["tab:red" if v < 0.7 else "tab:blue" for v in scaled],
            zorder=3,
            label=f"batchppo, {seeds}: a dot a run" if first else None,
        )
        if task["iqm"] is not None:
            iqm_x = task["iqm"] / task["target"]
            ax.plot([iqm_x] * 2, [y - 0.15, y + 0.35], color="black", lw=2,
                    label="their IQM" if first else None)  # fmt: skip
        for name, value in task["peers"].items():
            ax.scatter(value / task["target"], y - 0.3, marker=markers[name], s=34,
                       facecolors="none", edgecolors="0.25", zorder=2,
                       label=data["peers"][name] if first else None)  # fmt: skip
    ax.set_yticks(range(len(tasks)), [_figure_tick(t, shared is None) for t in reversed(tasks)])
    ax.set_ylim(-0.6, len(tasks) - 0.4)
    ax.set_xlabel("score over the task's target; peers' figures as published (v3/v4)")
    ax.set_title(
        "batchppo on MuJoCo v5 at 1M steps: each fresh seed's final policy "
        "(100 episodes, mean action)",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _figure_tick(task: Mapping[str, Any], seeds: bool) -> str:
    """A task's label on the figure: its name and target, and its seeds where ``seeds`` (on a
    line of their own: a wider label would squeeze the plot and cut off the legend)."""
    label = f"{task['task']}\n(target {task['target']:g})"
    return f"{label}\nseeds {task['seeds']}" if seeds else label


def figure_differs() -> bool:
    """Whether `FIGURE_DATA` differs from what docs/results give now (or is missing)."""
    if not FIGURE_DATA.is_file():
        return True
    return json.loads(FIGURE_DATA.read_text()) != json.loads(json.dumps(figure_data()))


def write_figure() -> None:
    """Writes `FIGURE_DATA` and draws `FIGURE` from it."""
    data = figure_data()
    FIGURE_DATA.write_text(json.dumps(data, indent=1) + "\n")
    draw_figure(json.loads(FIGURE_DATA.read_text()), FIGURE)


# --- The presets as shipped against the runs behind the figures ------------------------------

ATARI_RUN: dict[str, Any] = {"steps": 500_000, "eval_every": 100_000}
"""What our Atari runs at 2M frames set on top of their preset (`bench/learning.py --atari
--steps 500000 --eval-every 100000`)."""


@dataclasses.dataclass(frozen=True)
class Source:
    """A results file the generated blocks read, and the recipe its runs must be.

    Attributes:
        stem: The file, `docs/results/<stem>.json`.
        preset: The preset its runs trained; None where no preset of ours as shipped describes
            them: a peer's runs (CleanRL's models, imported into run dirs of ours), or a fresh
            set of an earlier recipe (`Task.earlier_recipe`).
        overrides: What the runs' command set on top of the preset.
        periodic: Whether a table reads the runs' periodic evaluations from it; where none
            does, their fields (`provenance.PERIODIC_EVALUATION`) may differ from the preset's.
    """

    stem: str
    preset: str | None
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    periodic: bool = True


def sources() -> list[Source]:
    """Every `evaluate --json` file behind the generated blocks (tests/bench/test_results.py
    checks that rendering reads no other)."""
    out = []
    for task in TASKS:
        out += [
            Source(task.tuning, task.preset, periodic=False),
            Source(task.tuning_window, task.preset, periodic=False),
            Source(window_stem(task), task.preset),
        ]
        out += [Source(fresh_stem(task, fresh), task.preset if task.shipped(fresh) else None,
                       periodic=False) for fresh in task.fresh]  # fmt: skip
    for game in MINATAR:
        stem = f"{game.preset}-10M-3seeds"
        out += [Source(stem, game.preset), Source(f"{stem}-sampled164", game.preset)]
    for _, _, suffix in ATARI_FINAL:
        out.append(Source(f"breakout_atari-2M-rerun-{suffix}", "breakout_atari", ATARI_RUN))
        ale = {**ATARI_RUN, "backend": "ale"}
        out.append(Source(f"breakout_atari_ale-2M-3seeds-{suffix}", "breakout_atari", ale, False))
        out.append(Source(f"breakout_cleanrl_model-2M-3seeds-{suffix}", None))
    out.append(Source("pong_atari-2M-3seeds", "pong_atari", ATARI_RUN))
    for name in CRAFTAX:  # a side-by-side bench: its batchppo side's config
        args = json.loads((RESULTS / name).read_text())["args"]
        changes = {"num_agents": args["envs"], "steps": args["steps"]}
        out.append(Source(name.removesuffix(".json"), "craftax_symbolic", changes, False))
    return out


def recorded_configs(stem: str) -> list[dict | None] | None:
    """The distinct configs recorded for the runs of `docs/results/<stem>.json`: its entries'
    (an `evaluate --json` file), or its ``config`` (a side-by-side bench's file: its batchppo
    side's; None where it records none); None where the file is not there."""
    path = RESULTS / f"{stem}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if isinstance(data, dict) and "args" in data:
        return [data.get("config")]
    found: list[dict | None] = []
    for entry in evaluate.load_results(path):
        if entry["config"] not in found:
            found.append(entry["config"])
    return found


def shipped_differences() -> list[str]:
    """Where a preset as the package builds it differs from the recorded config of the runs
    behind the published figures (the seed, and fields that change neither what a run learns nor
    how it is measured, aside): one line per results file and config, naming the preset, each
    field with both values, and the fix."""
    lines = []
    for source in sources():
        found = recorded_configs(source.stem)
        if found is None or source.preset is None:
            continue
        preset = dataclasses.replace(configs.PRESETS[source.preset], **source.overrides)
        shipped = provenance.effective_config(preset)
        where = f"{source.preset}: docs/results/{source.stem}.json"
        for recorded in found:
            if recorded is None:
                lines.append(f"{where} records no config of its runs: rerun its evaluation")
                continue
            try:  # fields added since it was recorded at the values that repeat the code then
                recorded = provenance.loaded(recorded, where)
            except ConfigError as error:
                lines.append(f"{error}: rerun its figures")
                continue
            aside = frozenset() if source.periodic else provenance.PERIODIC_EVALUATION
            diffs = provenance.config_differences(shipped, recorded, aside)
            if diffs:
                fields = "; ".join(f"{k}: shipped {a!r}, its runs {b!r}" for k, a, b in diffs)
                pins = ", ".join(f"{k}={b!r}" for k, _, b in diffs)
                lines.append(f"{where}: {fields}. Rerun, or pin {pins} in the preset")
    return lines


# --- Where each block's figures come from: files, dates, machines, code --------------------

CODE_PATH = "batchppo/"
"""The code a figure measures: where it changed since the figure's commit, the page says so."""


@functools.cache
def changed_since(commit: str) -> bool:
    """Whether `CODE_PATH` has changed between ``commit`` and HEAD (`git log
    COMMIT..HEAD -- batchppo/` lists a commit)."""
    git = ["git", "-C", str(ROOT), "log", "--format=%h", f"{commit}..HEAD", "--", CODE_PATH]
    try:
        out = subprocess.run(git, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(
            f"git log {commit}..HEAD -- {CODE_PATH}: {error}; the figures' code check needs the "
            "repository's history (a full clone)"
        ) from None
    return bool(out.strip())


class Code(NamedTuple):
    """A commit a figure was made at, and whether it is inferred (the commit that added its
    file: `rundata.ADDED`) rather than recorded."""

    commit: str
    inferred: bool

    def __str__(self) -> str:
        return self.commit[:7] + ("*" if self.inferred else "")


@functools.cache
def _manifest(path: Path) -> dict[str, dict[str, Any]]:
    return rundata.load_manifest() if path == rundata.MANIFEST else {}


def manifest_entry(rel: str) -> dict[str, Any]:
    """The manifest's entry of a file or run dir (`rundata`), by its path in the repository.

    Raises:
        SystemExit: The manifest has none.
    """
    entry = _manifest(rundata.MANIFEST).get(rel)
    if entry is None or not entry.get("commit"):
        raise SystemExit(f"{rel}: no entry with a commit in docs/manifest.json; commit the file "
                         "and rerun `python bench/rundata.py manifest --write`")  # fmt: skip
    return entry


def _code(entry: Mapping[str, Any]) -> Code:
    return Code(entry["commit"], entry["commit_source"] != "recorded")


def _platform(p: Mapping[str, Any]) -> str:
    """An evaluation's `platform` in a few words."""
    return f"{p['cpu']} ({p['isa']}), JAX {p['jax']}"


def _bench_machine(data: Mapping[str, Any]) -> str | None:
    """A bench file's machine in a few words: its rows' accelerator, its CPU and cores, JAX's
    version; a hand-written one as it is; None where it records none."""
    machine = data.get("machine")
    if machine is None or isinstance(machine, str):
        return machine
    rows = data.get("rows") or [r for w in data.get("workloads", {}).values() for r in w["rows"]]
    devices = sorted({r.get("device") for r in [*rows, data]} - {None, "cpu"})
    cpu = f" ({machine['cpu']})" if machine.get("cpu") else " (CPU model not recorded)"
    jax = f", JAX {machine['jax']}" if machine.get("jax") else ""
    return ", ".join([*devices, f"{machine['cpus']} CPU cores{cpu}{jax}"])


def file_source(name: str) -> tuple[set[Code], Code, set[str], str]:
    """Where a file of docs/results comes from: the commits its runs trained at (an `evaluate
    --json` file's entries, or their run dirs'), the commit it was made at, the machines it
    records, and its date (its own, else the day it was committed)."""
    path = RESULTS / name
    entry = manifest_entry(f"docs/results/{name}")
    made = _code(entry)
    data = json.loads(path.read_text()) if path.suffix == ".json" else None
    if path.suffix == ".log" and path.with_suffix(".json").is_file():
        data = json.loads(path.with_suffix(".json").read_text())
    trained: set[Code] = set()
    machines: set[str] = set()
    if data is not None and rundata.is_evaluate_file(data):
        for run in evaluate.load_results(path):
            if run.get("commit"):
                trained.add(Code(run["commit"], False))
            else:
                run_dir = f"docs/runs/{Path(run['run_dir']).name}"
                known = _manifest(rundata.MANIFEST).get(run_dir)
                trained.add(_code(known) if known else made)
            if run.get("platform"):
                machines.add(_platform(run["platform"]))
    elif isinstance(data, dict) and _bench_machine(data):
        machines.add(_bench_machine(data))
    day = str((data or {}).get("date") or (data or {}).get("when") or "")[:10] if isinstance(
        data, dict) else ""  # fmt: skip
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", day):
        day = entry["added"]
    return trained, made, machines, day


def _codes_text(codes: Sequence[Code]) -> str:
    return _join([str(c) for c in sorted(codes)])


def _changed_text(codes: set[Code]) -> str:
    """Whether `CODE_PATH` has changed since each commit of ``codes``."""
    changed = sorted(c for c in codes if changed_since(c.commit))
    kept = sorted(c for c in codes if not changed_since(c.commit))
    if not kept:
        return (f"`{CODE_PATH}` has changed since each of these commits: the figures are of that "
                "code, not rerun since")  # fmt: skip
    if not changed:
        return f"`{CODE_PATH}` is unchanged since these commits"
    return (f"`{CODE_PATH}` has changed since {_codes_text(changed)}, not since "
            f"{_codes_text(kept)}")  # fmt: skip


def source_paragraph(names: set[str]) -> list[str]:
    """Where a block's figures come from: its files (a `-stats.json` beside its evaluation
    left out), their dates, machines and code, and whether the code changed since."""
    files = sorted(n for n in names if not (n.endswith("-stats.json")
                   and f"{n.removesuffix('-stats.json')}.json" in names))  # fmt: skip
    trained: set[Code] = set()
    made: set[Code] = set()
    machines: set[str] = set()
    days = []
    unrecorded = 0
    for name in files:
        runs, at, where, day = file_source(name)
        trained |= runs
        made.add(at)
        machines |= where
        unrecorded += not where
        days.append(day)
    on = "; ".join(sorted(machines)) or "machines not recorded"
    if machines and unrecorded:
        on += f" (and {_count(unrecorded, 'file')} recording none)"
    code = (f"runs trained at {_codes_text(list(trained))}; made at {_codes_text(list(made))}"
            if trained else f"made at {_codes_text(list(made))}")  # fmt: skip
    inferred = any(c.inferred for c in trained | made)
    return _paragraph(
        f"Sources: {', '.join(f'`{n}`' for n in files)} (`docs/results`; each one's command, "
        f"sha256 and code in `docs/manifest.json`), {_days(days)}, on {on}. Code: "
        f"{code}{' (*: inferred, the commit that added the file)' if inferred else ''}; "
        f"{_changed_text(trained | made)}."
    )


def resumed_newest() -> str:
    """The headline's sentence on the runs of the tasks' newest fresh sets resumed mid-run: `4
    fresh runs of seeds 20-29 were resumed ...`; empty where none was."""
    by_set: dict[str, int] = {}
    for task in TASKS:
        if count := len(resumed(task, task.fresh[0])):
            label = f"seeds {task.fresh[0].label}"
            by_set[label] = by_set.get(label, 0) + count
    runs = sum(by_set.values())
    if not runs:
        return ""
    sets = _join([f"{count} of {label}" for label, count in by_set.items()])
    where = (f"{_count(runs, 'fresh run')} of {next(iter(by_set))}" if len(by_set) == 1
             else f"{_count(runs, 'fresh run')} ({sets})")  # fmt: skip
    return (f"{where[0].upper()}{where[1:]} "
            f"{'was' if runs == 1 else 'were'} resumed mid-run from "
            f"{'its own checkpoint' if runs == 1 else 'their own checkpoints'} "
            f"(docs/benchmarks.md marks {'it' if runs == 1 else 'them'}).")  # fmt: skip


def headline_sources(names: set[str]) -> list[str]:
    """The headline's short source line: how many files, their dates, and whether the code
    changed since any of their commits (each block of docs/benchmarks.md names its own)."""
    codes: set[Code] = set()
    days = []
    for name in names:
        runs, at, _, day = file_source(name)
        codes |= runs | {at}
        days.append(day)
    again = resumed_newest()
    return _paragraph(
        f"Sources: {_count(len(names), 'file')} of `docs/results`, {_days(days)} "
        "(docs/benchmarks.md names each under its block, with its machine and code); "
        f"{_changed_text(codes)}." + (f" {again}" if again else "")
    )


def _days(days: Sequence[str]) -> str:
    """`2026-11-27`, `2026-11-25 to 2026-11-28`: the range of ``days``."""
    return min(days) if min(days) == max(days) else f"{min(days)} to {max(days)}"


TABLES = {
    "headline": headline_block,
    "mujoco-fresh": fresh_block,
    "mujoco-protocols": protocol_tables,
    "minatar": minatar_block,
    "atari": atari_block,
    "craftax": craftax_block,
    "speed-gpu": gpu_block,
    "speed-cpu": cpu_block,
    "ale-bound": ale_bound_block,
    "tune-rlzoo": tune_rlzoo_block,
}
"""Each generated block by its marker name: the headline in the README, the others in
docs/benchmarks.md."""

PAGES = {
    "README.md": ("headline",),
    "docs/benchmarks.md": tuple(name for name in TABLES if name != "headline"),
}
"""Which page holds which blocks, in their order there (tests/bench/test_results.py holds
the pages to it): each block is on one page."""

_MARKER = re.compile(r"<!-- table:(\S+) -->")


def _block(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- table:{name} -->\n)(.*?)(<!-- /table:{name} -->)", re.DOTALL)


def blocks(text: str) -> list[str]:
    """The names of the generated blocks in ``text``, in order."""
    return _MARKER.findall(text)


def render(text: str) -> str:
    """``text`` with each generated block it holds replaced by what the results files give."""
    names = blocks(text)
    if not names:
        raise SystemExit("no <!-- table:NAME --> block to fill")
    for name in names:
        if name not in TABLES:
            raise SystemExit(
                f"<!-- table:{name} -->: no such block; the blocks: {', '.join(TABLES)}"
            )
        with reading() as read:
            lines = TABLES[name]()
        source = headline_sources(read) if name == "headline" else source_paragraph(read)
        body = "\n".join([*lines, "", *source]) + "\n"
        text = _block(name).sub(lambda m, body=body: m.group(1) + body + m.group(3), text)
    return text


def seeds_csv(results_json: Path, out: Path) -> None:
    """Writes `seed,score` (one row a seed, seed order) from an `evaluate --json` file."""
    entries = sorted(evaluate.load_results(results_json), key=lambda e: e["seed"])
    with out.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["seed", "score"])
        for e in entries:
            writer.writerow([e["seed"], e["mean_return"]])


def check(path: Path) -> list[str]:
    """What differs from docs/results on the page at ``path``: its generated blocks and, where
    it shows `FIGURE`, the data the figure was drawn from; one line each, naming the fix."""
    text = path.read_text()
    problems = []
    if render(text) != text:
        problems.append(f"{path}: its generated results differ from docs/results; rerun "
                        f"`python bench/results.py --write {path}`")  # fmt: skip
    if FIGURE.name in text and figure_differs():
        problems.append(f"{FIGURE_DATA}: the figure's data differ from docs/results; rerun "
                        "`python bench/results.py --figure`")  # fmt: skip
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", nargs="+", metavar="PAGE", help="exit 1 if a page differs")
    parser.add_argument("--write", nargs="+", metavar="PAGE", help="replace its blocks")
    parser.add_argument("--figure", action="store_true", help=f"write {FIGURE.name} and its data")
    parser.add_argument("--seeds-csv", nargs=2, metavar=("JSON", "CSV"))
    args = parser.parse_args(argv)
    if args.seeds_csv:
        seeds_csv(Path(args.seeds_csv[0]), Path(args.seeds_csv[1]))
        return 0
    if args.figure:
        write_figure()
    for page in args.write or ():
        path = Path(page)
        path.write_text(render(path.read_text()))
    if args.check:
        problems = [line for page in args.check for line in check(Path(page))]
        print("\n".join(problems), file=sys.stderr, end="\n" if problems else "")
        return 1 if problems else 0
    if not (args.figure or args.write):
        for make in TABLES.values():
            print("\n".join(make()), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

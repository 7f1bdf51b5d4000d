r"""Failure modes of the `*_fast` presets at 1M steps (issue 40, item 3), from committed logs.

Reads the training logs of seeds 0-9 (`docs/runs/s<seed>-<group>/metrics.jsonl.xz` and
`config.yaml`) and their 100-episode final evaluations (`docs/results/<group>-1M-10seeds.csv`),
prints per-seed tables of the logged signals at fixed steps, their rank correlations with the
final score, the KL cap's learning-rate cuts and the step each Hopper seed first hopped whole
episodes, and draws `docs/failure-modes-1M.png`. It trains nothing and runs in seconds
(`docs/failure-modes.md` is its write-up):

    python bench/failure_modes.py                  # tables, and the figure
    python bench/failure_modes.py --no-plot        # tables only
    python bench/failure_modes.py --groups hopper_fast cheetah_fast  # the older recipe

With `--takeoff` it instead pools seed sets (`GROUP:SEEDS[@FILE]`, the final evaluations in
`FILE` under `docs/results`, by default the set's `bench/fresh_seeds.sh` name) and reports
when each seed's training episodes first reached a length (its take-off), the learning rate
left then, and how the take-off step predicts the final score:

    python bench/failure_modes.py --takeoff humanoid_fast:0-9 humanoid_fast:20-29 \
        humanoid_fast-issue40:10-19

For runs trained with `representation_diagnostics=true` the take-off report adds their
representation (Moalla et al. 2024, arXiv 2405.00662): per seed, the policy's and the value's
feature rank and first-layer pre-activation norm at fixed steps and the rank's minimum before
the take-off, and how each compares between the seeds above and below the bar; a note names
the runs that did not log them:

    python bench/failure_modes.py --takeoff \
        humanoid_fast-adam99:1,3,4,9@humanoid_fast-issue70-1M.csv

Derived signals, besides the logged ones (each train row is the mean of the iterations since
the previous row, 4-6 iterations of 2048 env steps):

* `std`: the policy's per-dimension standard deviation (geometric mean over action
  dimensions). The Gaussian's std is state-independent, so the logged entropy
  `H = sum_i log(std_i) + d/2 log(2 pi e)` gives it exactly.
* `lr_scale`: the logged learning rate over the annealing schedule's mean rate in the row's
  iterations, i.e. the mean factor the KL cap (`lr_kl_cap`) kept; 1 where no update of the
  row came after one whose KL passed the cap.
* `value_gap`: `value_mean - return_mean`, the rollout's mean value minus its mean GAE target
  (normalised reward units), which is minus the mean advantage.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

from batchppo.experiment.artifacts.logging import read_metrics

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "runs"
RESULTS = ROOT / "docs" / "results"
FIGURE = ROOT / "docs" / "failure-modes-1M.png"

ACTION_DIMS = {
    "Hopper-v5": 3,
    "HalfCheetah-v5": 6,
    "Walker2d-v5": 6,
    "Ant-v5": 8,
    "Humanoid-v5": 17,
}
"""Action dimensions of the MuJoCo v5 tasks (for `std` from the entropy)."""

TARGETS = {
    "Hopper-v5": 2800.0,
    "HalfCheetah-v5": 6000.0,
    "Walker2d-v5": 4600.0,
    "Ant-v5": 4500.0,
    "Humanoid-v5": 5500.0,
}
"""Issue 23's IQM targets at 1M steps; a seed below 70 % of its task's target fails."""

SIGNALS = (
    "score",
    "length",
    "std",
    "lr_scale",
    "kl",
    "clip_fraction",
    "value_loss",
    "value_gap",
    "reward_std",
    "obs_std",
    "grad_norm",
)
"""Train-row signals of the tables, in order."""

STEPS = (50_000, 100_000, 250_000, 500_000, 1_000_000)
"""Steps of the tables; each takes the train row nearest to it."""

REPRESENTATION = (
    "policy_feature_rank",
    "value_feature_rank",
    "policy_preact_norm_0",
    "value_preact_norm_0",
)
"""Logged representation signals (`representation_diagnostics`): the effective rank of the
features entering the policy's head and the value's output layer, and the mean L2 norm of the
first hidden layer's pre-activations, each the mean of the row's updates."""

STABLE_LENGTH = 990.0
"""An eval whose mean episode length reaches this hops (or walks) whole episodes."""


def load_run(run_dir: str | Path) -> dict:
    """One run's logs as arrays.

    Args:
        run_dir: A run directory holding `config.yaml` and `metrics.jsonl` (or its compressed
            copy, `metrics.jsonl.xz`, as docs/runs holds it).

    Returns:
        A dict: `config` (the YAML as a dict); `train`, a dict of float arrays, one entry per
        train row, with `step`, the logged metrics (NaN where a row has none, e.g. `score` in
        a row where no episode ended) and the derived `std`, `scheduled_lr`
        (`nominal_learning_rates`), `lr_scale`, `value_gap` (the `REPRESENTATION` signals
        all NaN in a run that did not log them); and `eval`, a dict of arrays
        `step`, `score`, `length` of the mean-action evaluations.
    """
    run_dir = Path(run_dir)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    rows = read_metrics(run_dir)
    train = [row for row in rows if row["phase"] == "train"]
    evals = [row for row in rows if row["phase"] == "eval"]
    keys = [
        "step",
        "score",
        "length",
        "entropy",
        "kl",
        "clip_fraction",
        "value_loss",
        "value_mean",
        "return_mean",
        "reward_std",
        "obs_std",
        "grad_norm",
        "learning_rate",
        *REPRESENTATION,
    ]
    tr = {k: np.array([np.nan if r.get(k) is None else r[k] for r in train], float) for k in keys}
    dims = ACTION_DIMS[config["env"]]
    tr["std"] = np.exp(tr["entropy"] / dims - 0.5 * math.log(2 * math.pi * math.e))
    # Rounded: the logged rate is float32, so an uncut row reads 1 +- 1e-6.
    tr["scheduled_lr"] = nominal_learning_rates(config, tr["step"])
    tr["lr_scale"] = np.round(tr["learning_rate"] / tr["scheduled_lr"], 4)
    tr["value_gap"] = tr["value_mean"] - tr["return_mean"]
    ev = {k: np.array([r[k] for r in evals], float) for k in ("step", "score", "length")}
    return {"config": config, "train": tr, "eval": ev}


def nominal_learning_rates(config: dict, steps: np.ndarray) -> np.ndarray:
    """The schedule's learning rate, without the KL cap, averaged as the train rows average it.

    Iteration `u` (0-based) trains at `lr * (1 - u / iterations)` with `anneal_lr`, at `lr`
    without it; a row at step `S` holds the iterations after the previous row up to `S`.

    Args:
        config: The run's config (`learning_rate`, `anneal_lr`, `steps`, `num_agents`,
            `rollout_length`).
        steps: The train rows' steps, ascending.

    Returns:
        The mean scheduled learning rate of each row's iterations.
    """
    per_iteration = config["num_agents"] * config["rollout_length"]
    iterations = math.ceil(config["steps"] / per_iteration)
    lr = config["learning_rate"]
    out = np.empty(len(steps))
    previous = 0
    for i, step in enumerate(steps.astype(int)):
        u = np.arange(previous // per_iteration, step // per_iteration)
        out[i] = np.mean(lr * (1 - u / iterations)) if config["anneal_lr"] else lr
        previous = step
    return out


def results_file(group: str, seeds: Sequence[int], results: Path = RESULTS) -> Path:
    """The CSV of 100-episode final evaluations that holds a seed set.

    `bench/fresh_seeds.sh` names a set's file `<group>-1M-seeds<first>-<last>.csv`; the tuning
    seeds 0-9 of the shipped recipes are in `<group>-1M-10seeds.csv`. The file is the one whose
    range covers every seed of the set.

    Args:
        group: The runs' suffix, e.g. `humanoid_fast`.
        seeds: The set's seeds.
        results: The folder of the evaluations.

    Raises:
        FileNotFoundError: No such file covers the seeds, or several do.
    """
    ranges = {f"{group}-1M-10seeds.csv": (0, 9)}
    for path in results.glob(f"{group}-1M-seeds*.csv"):
        match = re.fullmatch(rf"{re.escape(group)}-1M-seeds(\d+)-(\d+)\.csv", path.name)
        if match:
            ranges[path.name] = (int(match[1]), int(match[2]))
    found = [
        name
        for name, (first, last) in ranges.items()
        if first <= min(seeds) and max(seeds) <= last and (results / name).exists()
    ]
    if len(found) != 1:
        what = " and ".join(found) if found else f"no {group}-1M-seeds<first>-<last>.csv"
        raise FileNotFoundError(
            f"{what} in {results} for seeds {_seeds_text(seeds)}: name the set's file "
            "(GROUP:SEEDS@FILE)"
        )
    return results / found[0]


EVALUATE_COLUMNS = {
    "score": "mean_return",
    "length": "mean_length",
    "falls": "terminated_fraction",
    "velocity": "forward_velocity",
}
"""The columns of `batchppo evaluate --csv` that `final_results` reads, by its key."""


def final_results(path: Path, group: str | None = None) -> dict[int, dict[str, float]]:
    """Per-seed 100-episode evaluations of final policies, from either CSV format.

    `batchppo evaluate --csv` writes one row per run (`run_dir`, `seed`, `mean_return`,
    `mean_length`, `terminated_fraction`, `forward_velocity`, ...); `bench/fresh_seeds.sh
    publish` writes `seed,score`.

    Args:
        path: The CSV.
        group: Keep only the rows of runs `s<seed>-<group>`, for a file that names its runs
            (`run_dir`) and may hold several groups'; a `seed,score` file holds one group's
            seeds and is read whole. None keeps every row.

    Returns:
        `{seed: {"score", ...}}`: the mean return, and from `evaluate`'s format also
        "length" (mean episode length), "falls" (fraction of episodes that terminated) and
        "velocity" (mean forward velocity) where the file has them.

    Raises:
        ValueError: The file has neither format, or a seed has several rows.
    """
    with open(path) as f:
        reader = csv.DictReader(f)
        header = set(reader.fieldnames or ())
        rows = list(reader)
    if "mean_return" in header:
        columns = {k: c for k, c in EVALUATE_COLUMNS.items() if c in header}
    elif "score" in header:
        columns = {"score": "score"}
    else:
        raise ValueError(f"{path}: no mean_return or score column; pass an evaluation CSV")
    if group is not None and "run_dir" in header:
        rows = [r for r in rows if Path(r["run_dir"]).name == f"s{r['seed']}-{group}"]
    out: dict[int, dict[str, float]] = {}
    for row in rows:
        seed = int(row["seed"])
        if seed in out:
            raise ValueError(f"{path}: several rows for seed {seed}; pass the group to keep")
        out[seed] = {k: float(row[c]) for k, c in columns.items()}
    return out


def at_step(run: dict, signal: str, step: int) -> float:
    """A signal's value in the train row nearest to `step` that has one.

    `score` and `length` are NaN in rows where no episode ended (HalfCheetah's 1000-step
    episodes end in some rows only); the nearest row with a value stands in.
    """
    tr = run["train"]
    values = tr[signal]
    distance = np.where(np.isfinite(values), np.abs(tr["step"] - step), np.inf)
    return float(values[np.argmin(distance)])


def signal_table(
    run_dirs: Sequence[str | Path],
    signals: Sequence[str] = SIGNALS,
    steps: Sequence[int] = STEPS,
) -> dict[str, np.ndarray]:
    """Each signal of each run at each step.

    Args:
        run_dirs: Run directories.
        signals: Train-row signals (logged or derived, see `load_run`).
        steps: Env steps; each takes the train row nearest to it.

    Returns:
        `{signal: array (len(run_dirs), len(steps))}`.
    """
    runs = [load_run(d) for d in run_dirs]
    return {s: np.array([[at_step(r, s, x) for x in steps] for r in runs]) for s in signals}


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (`spearman_test`'s rho)."""
    return spearman_test(x, y)[0]


def spearman_test(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman's rank correlation (average ranks for ties) and its two-sided p-value
    (`scipy.stats.spearmanr`) over the pairs without a NaN; an infinity ranks above every
    number. Both NaN if either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[keep], y[keep]
    if len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
        return float("nan"), float("nan")
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def kl_cap_cuts(run: dict) -> tuple[int, float, float | None, float]:
    """How the KL cap acted in one run.

    Returns:
        `(rows, min_scale, first_step, max_kl)`: the number of train rows whose learning rate
        the cap lowered (`lr_scale < 1`), the smallest row scale, the first such row's
        step (None if none), and the largest row-mean KL.
    """
    tr = run["train"]
    cut = tr["lr_scale"] < 1
    first = float(tr["step"][cut][0]) if cut.any() else None
    return int(cut.sum()), float(tr["lr_scale"].min()), first, float(np.nanmax(tr["kl"]))


def first_step(rows: dict[str, np.ndarray], signal: str, threshold: float) -> float | None:
    """The step of the first row whose `signal` reaches `threshold`; None if none did.

    Args:
        rows: A run's `train` or `eval` arrays (`load_run`).
        signal: One of their keys.
        threshold: The value to reach (>=).
    """
    hit = rows[signal] >= threshold
    return float(rows["step"][hit][0]) if hit.any() else None


def stable_step(run: dict, length: float = STABLE_LENGTH) -> float | None:
    """The first eval step whose mean episode length reaches `length`; None if none did."""
    return first_step(run["eval"], "length", length)


def _fmt(v: float) -> str:
    if v is None or not np.isfinite(v):
        return "-"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01 or a == 0:
        return f"{v:.3f}"
    return f"{v:.1e}"


def report(group: str, runs_dir: Path = RUNS, results: Path = RESULTS) -> str:
    """The Markdown tables of one group of ten seeds.

    Args:
        group: The runs' suffix, e.g. `hopper_fast-recompute`.
        runs_dir: The folder of `s<seed>-<group>` run directories.
        results: The folder of the 100-episode evaluations.

    Returns:
        Markdown: per-seed finals, KL-cap cuts and stable step; then, per step, each signal
        of each seed and its rank correlation with the final score over the seeds.
    """
    seeds = range(10)
    dirs = [runs_dir / f"s{s}-{group}" for s in seeds]
    runs = [load_run(d) for d in dirs]
    final = final_results(results_file(group, seeds, results))
    env = runs[0]["config"]["env"]
    bar = 0.7 * TARGETS[env]
    scores = [final[s]["score"] for s in seeds]
    failing = [s for s in seeds if final[s]["score"] < bar]
    lines = [
        f"### {group} ({env}; failing: seeds {', '.join(map(str, failing)) or 'none'}, "
        f"below 70 % of {TARGETS[env]:.0f})",
        "",
        "| seed | final (100 ep.) | length | falls | m/s | first eval of whole episodes "
        "| rows cut by the KL cap | min lr scale | first cut | max row KL |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s, run in zip(seeds, runs, strict=True):
        f = final[s]
        rows, low, first, max_kl = kl_cap_cuts(run)
        hop = stable_step(run)
        mark = " **x**" if s in failing else ""
        lines.append(
            f"| {s}{mark} | {f['score']:.0f} | {f['length']:.0f} | {f['falls']:.2f} "
            f"| {f['velocity']:.2f} | {'never' if hop is None else f'{hop / 1e3:.0f}k'} "
            f"| {rows} | {low:.3f} | {'-' if first is None else f'{first / 1e3:.0f}k'} "
            f"| {max_kl:.4f} |"
        )
    table = signal_table(dirs)
    lines += [
        "",
        "Signals at the train row nearest each step (`score`, `length`: the sampled "
        "policy's training episodes); rho: Spearman's rank correlation with the final "
        "score over the 10 seeds (|rho| >= 0.65: p < 0.05 two-sided, uncorrected).",
    ]
    for j, step in enumerate(STEPS):
        lines += [
            "",
            f"| {step // 1000}k: seed | " + " | ".join(SIGNALS) + " |",
            "|---|" + "---:|" * len(SIGNALS),
        ]
        for s in seeds:
            mark = " **x**" if s in failing else ""
            cells = " | ".join(_fmt(table[signal][s, j]) for signal in SIGNALS)
            lines.append(f"| {s}{mark} | {cells} |")
        rhos = " | ".join(_fmt(spearman(table[signal][:, j], scores)) for signal in SIGNALS)
        lines.append(f"| rho | {rhos} |")
    return "\n".join(lines)


def plot(groups: Sequence[str], out: Path, runs_dir: Path = RUNS, results: Path = RESULTS) -> None:
    """Draws eval score, policy std, learning rate and value loss of each group's seeds.

    One column per group, the seeds below 70 % of the target in colour, the others grey.

    Args:
        groups: Run-name suffixes, one column each.
        out: The PNG to write.
        runs_dir: The folder of `s<seed>-<group>` run directories.
        results: The folder of the 100-episode evaluations.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("eval score (16 episodes, mean action)", None),
        ("policy std per action dim (from the entropy)", "std"),
        ("learning rate (schedule x KL cap)", "learning_rate"),
        ("value loss (normalised rewards)", "value_loss"),
    ]
    fig, axes = plt.subplots(
        len(panels), len(groups), figsize=(6 * len(groups), 11), sharex=True, squeeze=False
    )
    colours = ["tab:red", "tab:orange", "tab:purple", "tab:brown"]
    for col, group in enumerate(groups):
        final = final_results(results_file(group, range(10), results))
        for s in range(10):
            run = load_run(runs_dir / f"s{s}-{group}")
            env = run["config"]["env"]
            failing = final[s]["score"] < 0.7 * TARGETS[env]
            bad = sorted(k for k in final if final[k]["score"] < 0.7 * TARGETS[env])
            style = (
                {"color": colours[bad.index(s) % len(colours)], "lw": 1.8, "zorder": 3}
                if failing
                else {"color": "0.6", "lw": 0.8}
            )
            label = f"seed {s}: {final[s]['score']:.0f}" if failing else None
            tr, ev = run["train"], run["eval"]
            for row, (title, key) in enumerate(panels):
                ax = axes[row][col]
                if key is None:
                    ax.plot(ev["step"], ev["score"], label=label, **style)
                else:
                    ax.plot(tr["step"], tr[key], **style)
                if s == 0:
                    ax.set_title(f"{group}: {title}" if row == 0 else title, fontsize=9)
                    ax.grid(alpha=0.3)
        axes[0][col].plot([], [], color="0.6", lw=0.8, label="other seeds")
        axes[0][col].legend(fontsize=8, loc="upper left")
        axes[1][col].set_yscale("log")
        axes[3][col].set_yscale("log")
        axes[-1][col].set_xlabel("env steps")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


@dataclasses.dataclass(frozen=True)
class SeedSet:
    """Runs `s<seed>-<group>` of a group, and the CSV of their final evaluations."""

    group: str
    seeds: tuple[int, ...]
    results: str | None = None
    """The CSV's name under the results folder; None for `results_file`'s name."""

    @classmethod
    def parse(cls, spec: str) -> SeedSet:
        """`GROUP:SEEDS[@FILE]`, SEEDS a comma-separated list of seeds and ranges, e.g.
        `humanoid_fast:0-9`, `humanoid_fast-ln:0-4,9@humanoid_fast-screens-1M.csv`.

        Raises:
            ValueError: The spec does not read as one.
        """
        group, _, rest = spec.partition(":")
        seeds_text, _, results = rest.partition("@")
        seeds: list[int] = []
        try:
            for item in seeds_text.split(","):
                first, _, last = item.partition("-")
                seeds += range(int(first), int(last or first) + 1)
        except ValueError:
            seeds = []
        if not group or not seeds:
            raise ValueError(f"seed set {spec!r}: write GROUP:SEEDS[@FILE], e.g. humanoid_fast:0-9")
        return cls(group, tuple(seeds), results or None)


TAKEOFF_LENGTHS = (150.0, 200.0, 250.0)
"""Mean training episode lengths that mark a take-off; the first one is the headline's."""


def takeoff_rows(
    sets: Sequence[SeedSet],
    lengths: Sequence[float] = TAKEOFF_LENGTHS,
    runs_dir: Path = RUNS,
    results: Path = RESULTS,
) -> list[dict]:
    """Per seed, when its training episodes first reached each length, and its final score.

    A seed takes off at the first train row whose mean training episode length (the sampled
    policy's episodes that ended in the row) reaches the length.

    Args:
        sets: The seed sets; their runs must share one env.
        lengths: Take-off lengths; the learning rates are read at the first one's take-off.
        runs_dir: The folder of the run directories.
        results: The folder of the final evaluations.

    Returns:
        One dict per seed, in the sets' order: `group`, `seed`, `final` (mean return over the
        final evaluation's episodes), `bar` (70 % of the env's target), `below` (final < bar),
        `takeoff` (`{length: step or None}`), and `scheduled_lr`, `logged_lr`: the schedule's
        mean rate and the logged (KL-capped) rate in the take-off row of `lengths[0]`, as
        fractions of the configured start rate (None where the seed never took off), and
        `run` (`load_run`'s).

    Raises:
        ValueError: The sets' runs train different envs, or a seed has no final evaluation.
    """
    out = []
    envs = set()
    for seed_set in sets:
        path = (
            results / seed_set.results
            if seed_set.results
            else results_file(seed_set.group, seed_set.seeds, results)
        )
        final = final_results(path, seed_set.group)
        missing = [s for s in seed_set.seeds if s not in final]
        if missing:
            raise ValueError(f"{path} has no final evaluation of seeds {missing}")
        for seed in seed_set.seeds:
            run = load_run(runs_dir / f"s{seed}-{seed_set.group}")
            config, tr = run["config"], run["train"]
            envs.add(config["env"])
            steps = {x: first_step(tr, "length", x) for x in lengths}
            row = {"group": seed_set.group, "seed": seed, "final": final[seed]["score"]}
            row["bar"] = 0.7 * TARGETS[config["env"]]
            row["below"] = row["final"] < row["bar"]
            row["takeoff"] = steps
            row["run"] = run
            row["scheduled_lr"] = row["logged_lr"] = None
            if steps[lengths[0]] is not None:
                i = int(np.flatnonzero(tr["step"] == steps[lengths[0]])[0])
                start = config["learning_rate"]
                row["scheduled_lr"] = float(tr["scheduled_lr"][i] / start)
                row["logged_lr"] = float(tr["learning_rate"][i] / start)
            out.append(row)
    if len(envs) > 1:
        raise ValueError(f"the seed sets train {sorted(envs)}: pool the sets of one env only")
    return out


def takeoff_steps(rows: Sequence[dict], length: float) -> np.ndarray:
    """Each seed's take-off step at one length, infinity for a seed that never took off (so
    that it ranks after every step)."""
    return np.array(
        [np.inf if r["takeoff"][length] is None else r["takeoff"][length] for r in rows]
    )


def takeoff_summary(rows: Sequence[dict], length: float, split: float | None = None) -> dict:
    """How the take-off step at one length predicts the final score over pooled seeds.

    Args:
        rows: `takeoff_rows`'s seeds.
        length: One of their take-off lengths.
        split: Seeds taking off at or before this step count as early; None splits at the
            median take-off step (a split chosen from the take-off steps, blind to the finals).
            A seed that never took off is late.

    Returns:
        `never` (seeds that never took off), `rho` and `p` (Spearman's rank correlation of
        the take-off step with the final score, a never ranked after every step, and its
        two-sided p-value), `split`, `early` and `late` (`(below the bar, seeds)` on each side)
        and `fisher_p` (Fisher's exact test, two-sided, of below the bar against early/late).
    """
    steps = takeoff_steps(rows, length)
    finals = np.array([r["final"] for r in rows])
    below = np.array([r["below"] for r in rows])
    rho, p = spearman_test(steps, finals)
    split = float(np.median(steps)) if split is None else split
    early = np.isfinite(steps) & (steps <= split)
    table = [
        [int(below[early].sum()), int((~below[early]).sum())],
        [int(below[~early].sum()), int((~below[~early]).sum())],
    ]
    return {
        "never": int(np.isinf(steps).sum()),
        "rho": rho,
        "p": p,
        "split": split,
        "early": (table[0][0], int(early.sum())),
        "late": (table[1][0], int((~early).sum())),
        "fisher_p": float(stats.fisher_exact(table).pvalue),
    }


REPRESENTATION_STEPS = (100_000, 300_000, 500_000)
"""Steps of the take-off report's representation table, besides the run's last row."""

REPRESENTATION_SUMMARY_STEP = 300_000
"""The step at which the report compares the representation of seeds above and below the bar."""


def logs_representation(run: dict) -> bool:
    """Whether a run logged every `REPRESENTATION` signal (`representation_diagnostics=true`)."""
    return all(np.isfinite(run["train"][s]).any() for s in REPRESENTATION)


def representation_at(run: dict, signal: str, step: float | None) -> float:
    """A signal in the train row nearest to `step` (`at_step`); NaN past the run's last row.

    Args:
        run: `load_run`'s.
        signal: A train-row signal, e.g. one of `REPRESENTATION`.
        step: The env step; None for the run's last row.
    """
    last = float(run["train"]["step"][-1])
    if step is not None and step > last:
        return float("nan")
    return at_step(run, signal, last if step is None else step)


def min_before(run: dict, signal: str, step: float | None) -> float:
    """A signal's smallest value in the train rows before `step` (the whole run for None);
    NaN if no row precedes it."""
    tr = run["train"]
    values = tr[signal] if step is None else tr[signal][tr["step"] < step]
    return float(np.nanmin(values)) if np.isfinite(values).any() else float("nan")


def representation_summary(rows: Sequence[dict], signal: str, step: float) -> dict:
    """How one representation signal at one step differs between seeds above and below the bar.

    Args:
        rows: `takeoff_rows`'s seeds whose runs logged the signal.
        signal: One of `REPRESENTATION`.
        step: The env step (`representation_at`).

    Returns:
        `above` and `below`: `(median, seeds)` on each side of the bar (median NaN for no
        seed); `rho` and `p`: Spearman's rank correlation of the signal with the final score
        over the seeds, and its two-sided p-value.
    """
    values = np.array([representation_at(r["run"], signal, step) for r in rows])
    finals = np.array([r["final"] for r in rows])
    below = np.array([r["below"] for r in rows], bool)

    def side(keep: np.ndarray) -> tuple[float, int]:
        return (float(np.median(values[keep])) if keep.any() else float("nan"), int(keep.sum()))

    rho, p = spearman_test(values, finals)
    return {"above": side(~below), "below": side(below), "rho": rho, "p": p}


def _one(value: float) -> str:
    return f"{value:.1f}" if np.isfinite(value) else "-"


def _rho(rho: float, p: float) -> str:
    """`rho (p)`; `- (constant)` where Spearman's rho is undefined: a side constant (or empty)."""
    return f"{rho:.3f} ({p:.1e})" if np.isfinite(rho) else "- (constant)"


def _pair(run: dict, signals: tuple[str, str], step: float | None) -> str:
    """`policy / value` cell of two signals at a step."""
    return " / ".join(_one(representation_at(run, s, step)) for s in signals)


def _run_name(row: dict) -> str:
    """A take-off row's run, `s<seed>-<group>`."""
    return f"s{row['seed']}-{row['group']}"


def _seed_cells(row: dict) -> str:
    """The first cells of a take-off row's line in either table: run, final score, below bar."""
    return f"| {_run_name(row)} | {row['final']:.0f} | {'yes' if row['below'] else 'no'} "


def representation_table(
    rows: Sequence[dict], head: float, steps: Sequence[int] = REPRESENTATION_STEPS
) -> list[str]:
    """Markdown lines: per seed, its feature ranks and first-layer pre-activation norms.

    Args:
        rows: `takeoff_rows`'s seeds whose runs logged `REPRESENTATION`, in the table's order.
        head: The take-off length whose step bounds the rank's minimum.
        steps: Env steps of the columns; a last column holds the run's last row.
    """
    ranks, norms = REPRESENTATION[:2], REPRESENTATION[2:]
    columns = [f"{x // 1000}k" for x in steps] + ["end"]
    lines = [
        "Feature rank (effective rank of the last hidden layer's features) and first-layer "
        "pre-activation norm, policy / value, in the train row nearest each step (a row's "
        "mean over its updates; -: past the run's end, or no row before the take-off).",
        "",
        "| run | final | below bar | take-off | "
        + " | ".join(f"rank {c}" for c in columns)
        + f" | min rank before take-off (length >= {head:.0f}) | "
        + " | ".join(f"preact norm {c}" for c in columns)
        + " |",
        "|---|---:|---|---:|" + "---:|" * (2 * len(columns) + 1),
    ]
    for r in rows:
        run, takeoff = r["run"], r["takeoff"][head]
        at = [*steps, None]
        lowest = " / ".join(_one(min_before(run, s, takeoff)) for s in ranks)
        lines.append(
            _seed_cells(r)
            + f"| {_kilo(takeoff)} | {' | '.join(_pair(run, ranks, x) for x in at)} | {lowest} "
            f"| {' | '.join(_pair(run, norms, x) for x in at)} |"
        )
    return lines


def representation_lines(
    rows: Sequence[dict],
    head: float,
    steps: Sequence[int] = REPRESENTATION_STEPS,
    summary_step: int = REPRESENTATION_SUMMARY_STEP,
) -> list[str]:
    """The take-off report's representation section (Markdown lines).

    Args:
        rows: `takeoff_rows`'s seeds, in the report's order.
        head: The take-off length whose step bounds the rank's minimum.
        steps: Env steps of the per-seed table (`representation_table`).
        summary_step: The step of the comparison above and below the bar.

    Returns:
        The per-seed table and the comparison of the runs that logged `REPRESENTATION` (if
        any did), and a note naming the runs that did not (if any did not).
    """
    logged = [r for r in rows if logs_representation(r["run"])]
    lines = []
    if logged:
        lines += ["", *representation_table(logged, head, steps), ""]
        lines += [
            f"| at {summary_step // 1000}k | median above bar (seeds) | median below bar "
            "(seeds) | Spearman rho with final (p) |",
            "|---|---:|---:|---:|",
        ]
        for signal in REPRESENTATION:
            t = representation_summary(logged, signal, summary_step)
            lines.append(
                f"| {signal} | {_one(t['above'][0])} ({t['above'][1]}) "
                f"| {_one(t['below'][0])} ({t['below'][1]}) | {_rho(t['rho'], t['p'])} |"
            )
    missing = [_run_name(r) for r in rows if not logs_representation(r["run"])]
    if missing:
        lines += [
            "",
            f"No representation columns for {', '.join(missing)}: their runs did not log them "
            "(train with `representation_diagnostics=true`).",
        ]
    return lines


EARLY_STEPS = (100_000, 200_000, 300_000)
"""Steps of the take-off report's early-signal table (`early_signal_lines`)."""


def early_signal_lines(
    rows: Sequence[dict], head: float, signals: Sequence[str], steps: Sequence[int] = EARLY_STEPS
) -> list[str]:
    """Whether a signal logged before the take-off foretells it: per signal and step, Spearman's
    rank correlation of its value (`representation_at`) with the take-off step at `head`
    over the seeds, a never ranked after every step.

    Args:
        rows: `takeoff_rows`'s seeds.
        head: The take-off length.
        signals: Train-row signals, e.g. `entropy`, `length`, `value_loss`.
        steps: Env steps of the columns.

    Returns:
        Markdown lines: a table of `rho (p)`, one row a signal, one column a step; a seed
        whose run ends before the step (or lacks the signal) is left out of that cell.
    """
    takeoff = takeoff_steps(rows, head)
    lines = [
        f"| signal: Spearman rho with the take-off step (length >= {head:.0f}), p | "
        + " | ".join(f"{x // 1000}k" for x in steps)
        + " |",
        "|---|" + "---:|" * len(steps),
    ]
    for signal in signals:
        cells = []
        for x in steps:
            values = [
                representation_at(r["run"], signal, x) if signal in r["run"]["train"] else np.nan
                for r in rows
            ]
            cells.append(_rho(*spearman_test(values, takeoff)))
        lines.append(f"| {signal} | " + " | ".join(cells) + " |")
    return lines


def _seeds_text(seeds: Sequence[int]) -> str:
    """`0-4,9` for seeds 0, 1, 2, 3, 4, 9."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def _kilo(step: float | None) -> str:
    return "never" if step is None or not np.isfinite(step) else f"{step / 1e3:.0f}k"


def takeoff_report(
    sets: Sequence[SeedSet],
    lengths: Sequence[float] = TAKEOFF_LENGTHS,
    split: float | None = None,
    runs_dir: Path = RUNS,
    results: Path = RESULTS,
    representation_steps: Sequence[int] = REPRESENTATION_STEPS,
    summary_step: int = REPRESENTATION_SUMMARY_STEP,
    early: Sequence[str] = (),
) -> str:
    """The Markdown tables of the take-off of pooled seed sets.

    Args:
        sets: The seed sets, pooled.
        lengths: Take-off lengths (`takeoff_rows`).
        split: The early/late split of every length (`takeoff_summary`); None: each length's
            median take-off step.
        runs_dir: The folder of the run directories.
        results: The folder of the final evaluations.
        representation_steps: Env steps of the representation table (`representation_lines`).
        summary_step: The step of its comparison above and below the bar.
        early: Signals whose values before the take-off are set against its step
            (`early_signal_lines`); none: no such table.

    Returns:
        Markdown: per seed, ordered by its take-off at `lengths[0]`, the final score, the
        take-off steps and the learning rates at the first; then, per length, the rank
        correlation and the early/late comparison; then the early signals' table (if
        `early` names any); then the representation section.
    """
    rows = takeoff_rows(sets, lengths, runs_dir, results)
    head = lengths[0]
    rows = sorted(rows, key=lambda r: (r["takeoff"][head] is None, r["takeoff"][head] or 0))
    sets_text = ", ".join(f"{s.group}:{_seeds_text(s.seeds)}" for s in sets)
    lines = [
        f"### Take-off of {len(rows)} seeds ({sets_text}; bar {rows[0]['bar']:.0f})",
        "",
        f"| run | final (100 ep.) | below bar | take-off: length >= {head:.0f} "
        "| scheduled lr / start | logged lr / start | "
        + " | ".join(f"length >= {x:.0f}" for x in lengths[1:])
        + " |",
        "|---|---:|---|---:|---:|---:|" + "---:|" * (len(lengths) - 1),
    ]
    for r in rows:
        lrs = [_fmt(r[k]) if r[k] is not None else "-" for k in ("scheduled_lr", "logged_lr")]
        later = " | ".join(_kilo(r["takeoff"][x]) for x in lengths[1:])
        lines.append(
            _seed_cells(r) + f"| {_kilo(r['takeoff'][head])} | {lrs[0]} | {lrs[1]} | {later} |"
        )
    lines += [
        "",
        "| take-off: length >= | never | Spearman rho (p) | split: take-off <= "
        "| below bar, early | below bar, late or never | Fisher's exact p |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in lengths:
        t = takeoff_summary(rows, x, split)
        lines.append(
            f"| {x:.0f} | {t['never']} | {t['rho']:.3f} ({t['p']:.1e}) | {_kilo(t['split'])} "
            f"| {t['early'][0]} of {t['early'][1]} | {t['late'][0]} of {t['late'][1]} "
            f"| {t['fisher_p']:.1e} |"
        )
    if early:
        lines += ["", *early_signal_lines(rows, head, early)]
    lines += representation_lines(rows, head, representation_steps, summary_step)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the tables of each group and draws the figure, or with `--takeoff` the take-off
    report of the seed sets named.

    Args:
        argv: Command-line arguments (`sys.argv[1:]` when None).

    Returns:
        The exit status, 0.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--groups", nargs="+", default=["hopper_fast-recompute", "cheetah_fast-recompute"]
    )
    parser.add_argument("--out", type=Path, default=FIGURE)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--takeoff",
        nargs="+",
        metavar="GROUP:SEEDS[@FILE]",
        help="pool these seed sets and print their take-off report instead of the tables",
    )
    parser.add_argument(
        "--takeoff-lengths", nargs="+", type=float, default=list(TAKEOFF_LENGTHS), metavar="L"
    )
    parser.add_argument(
        "--split", type=float, help="early/late take-off split (step); default: the median"
    )
    parser.add_argument(
        "--early",
        nargs="+",
        default=[],
        metavar="SIGNAL",
        help="with --takeoff: the rank correlation of these train-row signals at "
        f"{', '.join(f'{x // 1000}k' for x in EARLY_STEPS)} with the take-off step",
    )
    args = parser.parse_args(argv)
    if args.takeoff:
        try:
            sets = [SeedSet.parse(spec) for spec in args.takeoff]
            print(takeoff_report(sets, args.takeoff_lengths, args.split, early=args.early))
        except (ValueError, FileNotFoundError) as e:
            parser.error(str(e))
        return 0
    for group in args.groups:
        print(report(group), end="\n\n")
    if not args.no_plot:
        plot(args.groups, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

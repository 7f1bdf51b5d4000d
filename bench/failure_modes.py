"""Failure modes of the `*_fast` presets at 1M steps (issue 40, item 3), from committed logs.

Reads the training logs of seeds 0-9 (`docs/runs/s<seed>-<group>/metrics.jsonl` and
`config.yaml`) and their 100-episode final evaluations (`docs/results/<group>-1M-10seeds.csv`),
prints per-seed tables of the logged signals at fixed steps, their rank correlations with the
final score, the KL cap's learning-rate cuts and the step each Hopper seed first hopped whole
episodes, and draws `docs/failure-modes-1M.png`. It trains nothing and runs in seconds
(`docs/failure-modes.md` is its write-up):

    python bench/failure_modes.py                  # tables, and the figure
    python bench/failure_modes.py --no-plot        # tables only
    python bench/failure_modes.py --groups hopper_fast cheetah_fast  # the older recipe

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
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

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

STABLE_LENGTH = 990.0
"""An eval whose mean episode length reaches this hops (or walks) whole episodes."""


def load_run(run_dir: str | Path) -> dict:
    """One run's logs as arrays.

    Args:
        run_dir: A run directory holding `config.yaml` and `metrics.jsonl`.

    Returns:
        A dict: `config` (the YAML as a dict); `train`, a dict of float arrays, one entry per
        train row, with `step`, the logged metrics (NaN where a row has none, e.g. `score` in
        a row where no episode ended) and the derived `std`, `lr_scale`, `value_gap`; and
        `eval`, a dict of arrays `step`, `score`, `length` of the mean-action evaluations.
    """
    run_dir = Path(run_dir)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
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
    ]
    tr = {k: np.array([np.nan if r.get(k) is None else r[k] for r in train], float) for k in keys}
    dims = ACTION_DIMS[config["env"]]
    tr["std"] = np.exp(tr["entropy"] / dims - 0.5 * math.log(2 * math.pi * math.e))
    # Rounded: the logged rate is float32, so an uncut row reads 1 +- 1e-6.
    tr["lr_scale"] = np.round(tr["learning_rate"] / nominal_learning_rates(config, tr["step"]), 4)
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


def final_results(group: str, results: Path = RESULTS) -> dict[int, dict[str, float]]:
    """Per-seed 100-episode evaluations of a group's final policies.

    Args:
        group: The runs' suffix, e.g. `hopper_fast-recompute`.
        results: The folder of `<group>-1M-10seeds.csv`.

    Returns:
        `{seed: {"score", "length", "falls", "velocity"}}`: mean return, mean episode length,
        fraction of episodes that terminated, mean forward velocity.
    """
    out = {}
    with open(results / f"{group}-1M-10seeds.csv") as f:
        for row in csv.DictReader(f):
            out[int(row["seed"])] = {
                "score": float(row["mean_return"]),
                "length": float(row["mean_length"]),
                "falls": float(row["terminated_fraction"]),
                "velocity": float(row["forward_velocity"]),
            }
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
    """Spearman's rank correlation (average ranks for ties) over the pairs without a NaN; NaN
    if either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    rx, ry = _ranks(x[keep]), _ranks(y[keep])
    if np.std(rx) == 0 or np.std(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(len(a), dtype=float)
    for value in np.unique(a):  # average the ranks of ties
        tie = a == value
        ranks[tie] = ranks[tie].mean()
    return ranks


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


def stable_step(run: dict, length: float = STABLE_LENGTH) -> float | None:
    """The first eval step whose mean episode length reaches `length`; None if none did."""
    ev = run["eval"]
    hit = ev["length"] >= length
    return float(ev["step"][hit][0]) if hit.any() else None


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
    final = final_results(group, results)
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
        final = final_results(group, results)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the tables of each group and draws the figure.

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
    args = parser.parse_args(argv)
    for group in args.groups:
        print(report(group), end="\n\n")
    if not args.no_plot:
        plot(args.groups, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The README's results tables, computed from `docs/results`: MuJoCo (one table per peer's
protocol), MinAtar and Atari.

Every figure of ours in these tables is recomputed here from the per-run entries that
`batchppo evaluate --json` wrote into `docs/results` (and the bootstrap intervals from the
`--stats-json` files beside them, whose IQM must agree with the entries'); the peers'
figures are constants below, each with its source and protocol. `--check README.md` fails
when the README's tables differ from what the files give (tests/bench/test_results.py runs
it in CI), so a table cannot drift from its data, and a figure is changed by rerunning
its measurement, not by editing the README.

    python bench/results.py                      # print the tables
    python bench/results.py --write README.md    # replace them in the README
    python bench/results.py --check README.md    # exit 1 if the README differs
    python bench/results.py --seeds-csv RESULTS.json RESULTS.csv  # `seed,score` rows
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.stats

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"


@dataclasses.dataclass(frozen=True)
class Task:
    """A MuJoCo task, its preset and where its results live.

    Attributes:
        name: The task's name in the tables.
        preset: Our preset.
        tuning: The stem of the seeds 0-9 final-policy results (`<stem>.json`).
        target: The IQM target over fresh seeds (issue 40); 70 % of it is every seed's bar.
        cleanrl: CleanRL's `ppo_continuous_action` (v4, 3 seeds): the mean and std over seeds
            of each seed's last 100 training episodes (sampled actions).
        rlzoo: rl-baselines3-zoo's SB3 PPO (v3, 1 run): the mean and std over the episodes of
            the final policy's deterministic evaluation.
        tianshou: Tianshou's PPO (v3, 10 seeds): the maximum over its evaluations (every 30k
            steps, 10 test episodes, sampled actions) within 1M steps of the 10 seeds' mean,
            and the std over seeds there.
    """

    name: str
    preset: str
    tuning: str
    target: float
    cleanrl: tuple[float, float] | None
    rlzoo: tuple[float, float] | None
    tianshou: tuple[float, float]


TASKS = (
    Task("HalfCheetah", "cheetah_fast", "cheetah_fast-recompute-1M-10seeds", 6000,
         (1443, 46), (5819, 664), (5783.9, 1244.0)),
    Task("Hopper", "hopper_fast", "hopper_fast-recompute-1M-10seeds", 2800,
         (2383, 272), (2410, 10), (2609.3, 700.8)),
    Task("Walker2d", "walker_fast", "walker_fast-recompute-1M-10seeds", 4600,
         (2288, 572), (3479, 822), (3588.5, 756.6)),
    Task("Ant", "ant_fast", "ant_fast-1M-10seeds", 4500, None, (1327, 452), (3258.4, 1079.3)),
    Task("Humanoid", "humanoid_fast", "humanoid_fast-1M-10seeds", 5500,
         (716, 49), None, (787.1, 193.5)),
)  # fmt: skip
"""The five `*_fast` tasks. Sources of the peers' figures: vwxyzjn/cleanrl's benchmark docs
(ppo_continuous_action), DLR-RM/rl-baselines3-zoo benchmark.md, thu-ml/tianshou
examples/mujoco/README.md (its PPO table at 1M steps and footnote on the reward metric)."""


def load_entries(path: Path) -> list[dict] | None:
    """The run entries of an `evaluate --json` file; None where it is not there (yet)."""
    return json.loads(path.read_text()) if path.is_file() else None


def scores(entries: Sequence[dict]) -> np.ndarray:
    """The runs' scores (`mean_return`) in seed order."""
    return np.array([e["mean_return"] for e in sorted(entries, key=lambda e: e["seed"])])


def iqm(values: np.ndarray) -> float:
    """The interquartile mean (a quarter cut at each end), as batchppo's stats compute it."""
    return float(scipy.stats.trim_mean(values, 0.25))


def stats_interval(path: Path, env: str, values: np.ndarray) -> tuple[float, float]:
    """The IQM's bootstrap interval from a `--stats-json` file, checked against the runs."""
    group = next(iter(json.loads(path.read_text())["groups"].values()))
    saved = group["envs"][env]["iqm"]
    if not np.isclose(saved["value"], iqm(values), rtol=1e-9):
        raise SystemExit(f"{path}: IQM {saved['value']} but its runs give {iqm(values)}")
    return saved["low"], saved["high"]


def fresh_stem(task: Task) -> str:
    return f"{task.preset}-1M-seeds10-19"


def tuning_stem(task: Task) -> str:
    return f"{task.preset}-1M-seeds0-9"


def _bold(cells: list[tuple[float | None, str]]) -> list[str]:
    """The cells' texts, the one with the highest value in bold."""
    values = [v for v, _ in cells if v is not None]
    best = max(values) if values else None
    return [f"**{t}**" if v is not None and v == best else t for v, t in cells]


def _mean_std(values: np.ndarray | None) -> tuple[float | None, str]:
    if values is None:
        return None, "pending"
    return float(values.mean()), f"{values.mean():.0f} ± {values.std():.0f}"


def _peer(figure: tuple[float, float] | None) -> tuple[float | None, str]:
    return (None, "—") if figure is None else (figure[0], f"{figure[0]:g} ± {figure[1]:g}")


def _group_scores(stem: str) -> np.ndarray | None:
    entries = load_entries(RESULTS / f"{stem}.json")
    return None if entries is None else scores(entries)


def _max_eval_mean(stem: str, env: str) -> tuple[float | None, str]:
    path = RESULTS / f"{stem}-stats.json"
    if not path.is_file():
        return None, "pending"
    m = json.loads(path.read_text())["max_eval_mean"]
    m = next(iter(m.values()))[env]
    return m["value"], f"{m['value']:.0f} ± {m['std']:.0f}"


def _env(stem: str) -> str | None:
    entries = load_entries(RESULTS / f"{stem}.json")
    return None if entries is None else entries[0]["env"]


def fresh_table() -> list[str]:
    """Seeds 10-19 of each preset as shipped: IQM with its interval, the seeds below 70 %."""
    lines = [
        "| task (v5) | seeds 10-19: IQM [95 % CI] | mean ± std | target (IQM) | 70 % of it: "
        "seeds below | seeds 0-9 (tuning): IQM [95 % CI] |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for task in TASKS:
        tuning = _group_scores(task.tuning)
        env = _env(task.tuning)
        low, high = stats_interval(RESULTS / f"{task.tuning}-stats.json", env, tuning)
        tuned = f"{iqm(tuning):.0f} [{low:.0f}, {high:.0f}]"
        fresh = _group_scores(fresh_stem(task))
        if fresh is None:
            lines.append(
                f"| {task.name} | pending | pending | {task.target:g} | pending | {tuned} |"
            )
            continue
        low, high = stats_interval(RESULTS / f"{fresh_stem(task)}-stats.json", env, fresh)
        met = "met" if iqm(fresh) >= task.target else "missed"
        bar = 0.7 * task.target
        below = [f"{10 + i} ({v:.0f})" for i, v in enumerate(fresh) if v < bar]
        weakest = int(np.argmin(fresh))
        behind = ", ".join(below) or f"none (weakest: {10 + weakest}, {fresh[weakest]:.0f})"
        lines.append(
            f"| {task.name} | {iqm(fresh):.0f} [{low:.0f}, {high:.0f}] | "
            f"{fresh.mean():.0f} ± {fresh.std():.0f} | {task.target:g}: {met} | "
            f"{bar:.0f}: {behind} | {tuned} |"
        )
    return lines


def _window_stem(task: Task, fresh: bool) -> str:
    """The stem of a group's training-window files (which hold its max-eval-mean too)."""
    return f"{fresh_stem(task) if fresh else tuning_stem(task)}-training-window"


def _training_window(task: Task, fresh: bool) -> tuple[float | None, str]:
    return _mean_std(_group_scores(_window_stem(task, fresh)))


def _final_mean(task: Task, fresh: bool) -> tuple[float | None, str]:
    return _mean_std(_group_scores(fresh_stem(task) if fresh else task.tuning))


def _tianshou(task: Task, fresh: bool) -> tuple[float | None, str]:
    return _max_eval_mean(_window_stem(task, fresh), _env(task.tuning))


PROTOCOL_TABLES = (
    (
        "By CleanRL's protocol (and the PPO paper's): the mean return of each run's last 100 "
        "training episodes, sampled actions; mean ± std over seeds.",
        "CleanRL PPO (v4, 3 seeds)", lambda task: task.cleanrl, _training_window,
    ),
    (
        "By rl-baselines3-zoo's protocol: the final policy's episodes with the deterministic "
        "(mean) action. rl-zoo: one run, ± the std over its episodes; ours: 100 episodes a "
        "seed, mean ± std over seeds.",
        "rl-zoo SB3 PPO (v3, 1 run)", lambda task: task.rlzoo, _final_mean,
    ),
    (
        "By Tianshou's protocol: the maximum over training (first 1M steps) of the mean over "
        "seeds of each periodic evaluation, ± the std over seeds there. Tianshou: 10 seeds, "
        "10 test episodes with sampled actions every 30k steps; ours: 16 episodes with the "
        "mean action every 50k steps.",
        "Tianshou PPO (v3, 10 seeds)", lambda task: task.tianshou, _tianshou,
    ),
)  # fmt: skip
"""Per peer: the protocol's sentence, the peer's column, its figure, and ours: `(task, fresh)
-> (value, text)` for the fresh or the tuning seeds."""


def protocol_tables() -> list[str]:
    """Three tables: ours by CleanRL's, rl-zoo's and Tianshou's protocols beside theirs."""
    lines: list[str] = []
    for intro, peer, figure, ours in PROTOCOL_TABLES:
        lines += [
            *([""] if lines else []), intro, "",
            f"| task | {peer} | batchppo seeds 10-19 | batchppo seeds 0-9 (tuning) |",
            "|---|---:|---:|---:|",
        ]  # fmt: skip
        for task in TASKS:
            cells = _bold([_peer(figure(task)), ours(task, True), ours(task, False)])
            lines.append(f"| {task.name} | " + " | ".join(cells) + " |")
    return lines


def _scored(stem: str, protocol: str, episodes: int) -> dict[int, float] | None:
    """The runs' scores of `<stem>.json` by seed, checked to be ``episodes`` episodes a run
    under ``protocol`` (`final-mean`, `final-sampled`); None where the file is not there.

    `evaluate --json` wrote no protocol before it had `--sample`: such entries are the mean
    action's.
    """
    entries = load_entries(RESULTS / f"{stem}.json")
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
the checkpoints and configs of RobertTLange/gymnax-blines (benchmarks, 6b and 6c)."""
MINATAR_SEEDS = (0, 1, 2)


def minatar_table() -> list[str]:
    """Ours by gymnax's protocol (164 episodes, sampled) beside gymnax's, and by the mean action."""
    lines = [
        "By gymnax's protocol (its README's PPO return, gymnax-blines: one run's final policy "
        "at 10M steps, the mean of 164 episodes with sampled actions): ours the same, seeds "
        "0-2 (seed 0 also screened Breakout's learning rate); beside it our 100-episode "
        "evaluation with the mean action. Bold: the better by gymnax's protocol.",
        "",
        "| game | gymnax PPO (1 run) | batchppo, 164 episodes sampled: seeds 0 / 1 / 2 | "
        "batchppo, 100 episodes mean action: seeds 0 / 1 / 2 |",
        "|---|---:|---:|---:|",
    ]
    for game in MINATAR:
        stem = f"{game.preset}-10M-3seeds"
        peer, sampled = _bold([
            (game.gymnax, f"{game.gymnax:g}"),
            _seeds(_scored(f"{stem}-sampled164", "final-sampled", 164), MINATAR_SEEDS),
        ])  # fmt: skip
        mean_action = _seeds(_scored(stem, "final-mean", 100), MINATAR_SEEDS)[1]
        lines.append(f"| {game.name} | {peer} | {sampled} | {mean_action} |")
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
        path = RESULTS / f"breakout_cleanrl-2M-seed{seed}-rerun.json"
        if not path.is_file():
            return None, "pending"
        values.append(json.loads(path.read_text())["cleanrl"]["windows"][-1]["mean_return"])
    return _seeds(dict(zip(ATARI_SEEDS, values, strict=True)), ATARI_SEEDS)


def atari_table() -> list[str]:
    """Breakout at 2M frames: CleanRL's final model and ours, scored alike, per seed."""
    lines = [
        "Breakout at 2M frames (500k agent steps), CleanRL's `ppo_atari.py` and our "
        "`breakout_atari` at its settings, all on a 2-core CPU, ours at one code version. The "
        "final policies' rows: 30 whole games a seed (all lives, raw rewards, `ALE/Breakout-v5` "
        "without sticky actions) by our evaluator, each game from the same start on both "
        "sides; CleanRL's model imported by `bench/cleanrl_atari.py`. Per seed, and the mean "
        "over the seeds both sides have; bold: the better mean.",
        "",
        "| protocol | CleanRL `ppo_atari.py`: seeds 0 / 1 / 2 | batchppo: seeds 0 / 1 / 2 |",
        "|---|---:|---:|",
    ]
    for label, protocol, suffix in ATARI_FINAL:
        theirs = _scored(f"breakout_cleanrl_model-2M-3seeds-{suffix}", protocol, 30)
        ours = _scored(f"breakout_atari-2M-rerun-{suffix}", protocol, 30)
        both = [s for s in ATARI_SEEDS if all(s in side for side in (theirs, ours) if side)]
        cells = _bold([_seeds(theirs, ATARI_SEEDS, both), _seeds(ours, ATARI_SEEDS, both)])
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        "| CleanRL's own: its training games of the last 50k steps, sampled | "
        f"{_cleanrl_training_games()[1]} | not logged (our training counts lives, clipped) |"
    )
    return lines


TABLES = {
    "mujoco-fresh": fresh_table,
    "mujoco-protocols": protocol_tables,
    "minatar": minatar_table,
    "atari": atari_table,
}
"""Each generated block of the README by its marker name."""


def _block(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- table:{name} -->\n)(.*?)(<!-- /table:{name} -->)", re.DOTALL)


def render(text: str) -> str:
    """``text`` with every generated block replaced by what the results files give."""
    for name, make in TABLES.items():
        pattern = _block(name)
        if not pattern.search(text):
            raise SystemExit(f"no <!-- table:{name} --> block to fill")
        body = "\n".join(make()) + "\n"
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(3), text)
    return text


def seeds_csv(results_json: Path, out: Path) -> None:
    """Writes `seed,score` (one row a seed, seed order) from an `evaluate --json` file."""
    entries = sorted(json.loads(results_json.read_text()), key=lambda e: e["seed"])
    with out.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["seed", "score"])
        for e in entries:
            writer.writerow([e["seed"], e["mean_return"]])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="README", help="exit 1 if its tables differ")
    parser.add_argument("--write", metavar="README", help="replace its tables")
    parser.add_argument("--seeds-csv", nargs=2, metavar=("JSON", "CSV"))
    args = parser.parse_args(argv)
    if args.seeds_csv:
        seeds_csv(Path(args.seeds_csv[0]), Path(args.seeds_csv[1]))
        return 0
    if args.check or args.write:
        path = Path(args.check or args.write)
        text = path.read_text()
        new = render(text)
        if args.write:
            path.write_text(new)
            return 0
        if new != text:
            print(f"{path}: its results tables differ from docs/results; rerun "
                  f"`python bench/results.py --write {path}`", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    for make in TABLES.values():
        print("\n".join(make()), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

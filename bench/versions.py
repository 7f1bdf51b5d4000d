r"""Two versions of batchppo side by side on one bench script: before/after ratios.

A refactor must not slow the library down. This runs one of the ``bench/`` scripts of two
source trees, a base git revision (checked out into a temporary worktree) and the working
tree, alternating them round by round so that the machine's drifting load falls on both,
each run writing its figures with the script's ``--json``. Every numeric figure is kept at
its best over the rounds (rates: the highest; keys ending in ``_s``, ``_ms`` or ``_us``,
times: the lowest) and printed with the ratio after / before. Each tree runs its own copy of
the script, so a script that changed its imports with the library still runs on both.

    python bench/versions.py --base 7ee50f4 --rounds 2 -- \
        bench/envs.py --envs Pendulum-v1 --sizes 8,32 --seconds 2 --rounds 1 --peers batch

The script gets ``--json FILE`` appended; ``bench/envs.py``, ``bench/simulate.py``,
``bench/train.py``, ``bench/lockstep.py`` and ``bench/ale_fused.py`` take it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import PROVENANCE, Result, Side, compare, run_process

ROOT = Path(__file__).resolve().parent.parent


def flatten(tree: object, prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a JSON tree, by their ``/``-joined paths (bools left out, and the
    run's provenance: ``harness.PROVENANCE``)."""
    if isinstance(tree, dict):
        out: dict[str, float] = {}
        for key, value in tree.items():
            if not prefix and key in PROVENANCE:
                continue
            out.update(flatten(value, f"{prefix}/{key}" if prefix else str(key)))
        return out
    if isinstance(tree, list):
        return {}  # per-run lists (bench/train.py's "runs") have their summaries beside them
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return {prefix: float(tree)}
    return {}


def lower_is_better(key: str) -> bool:
    """Times (``_s``, ``_ms``, ``_us``) are better low; everything else (rates) high."""
    return key.endswith(("_s", "_ms", "_us"))


def best(result: Result, side: str) -> dict[str, float]:
    """Each figure of ``side`` at its best over the rounds (``lower_is_better``)."""
    keys = {key for row in result.readings(side) for key in row} - {"side", "round"}
    return {key: result.best(side, key, lower=lower_is_better(key)) for key in keys}


def run_once(tree: Path, script: list[str], timeout: float) -> dict[str, float]:
    """Runs ``script`` (its path relative to the tree) in ``tree`` with the tree's library."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(tree / script[0]), *script[1:], "--json", str(out)]
    try:
        finished = run_process(cmd, timeout, env=env, cwd=tree)
        if finished.exit != 0:
            raise SystemExit(f"versions: {' '.join(cmd)}: {finished.failure()['error']}")
        return flatten(json.loads(out.read_text()))
    finally:
        out.unlink(missing_ok=True)


def measure(
    trees: dict[str, Path], script: list[str], rounds: int, timeout: float
) -> dict[str, dict[str, float]]:
    """Each tree's figures of ``script`` at their best (``best``) over ``rounds`` rounds, the
    trees alternating (``harness.compare``)."""

    def side(name: str) -> Side:
        def run(round_: int) -> dict[str, float]:
            print(f"[versions] round {round_ + 1}: {name}", flush=True)
            return run_once(trees[name], script, timeout)

        return Side(name, run)

    result = compare([side(name) for name in trees], rounds)
    return {name: best(result, name) for name in trees}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare against")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per version")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per-run timeout (s)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- bench/SCRIPT.py ARGS...")
    args = parser.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("give the bench script and its arguments after --")
    revision = subprocess.run(
        ["git", "rev-parse", "--short", args.base],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="batchppo-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base), revision], cwd=ROOT, check=True
        )
        try:
            found = measure({"before": base, "after": ROOT}, script, args.rounds, args.timeout)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    before, after = found["before"], found["after"]
    width = max((len(k) for k in before), default=10)
    print(f"\nbefore = {revision}, after = the working tree; best of {args.rounds} rounds each")
    print(f"{'figure':<{width}} {'before':>12} {'after':>12} {'after/before':>13}")
    for key in sorted(set(before) & set(after)):
        ratio = after[key] / before[key] if before[key] else float("nan")
        note = "  (time: lower is better)" if lower_is_better(key) else ""
        print(f"{key:<{width}} {before[key]:12.4g} {after[key]:12.4g} {ratio:12.3f}x{note}")
    for key in sorted(set(before) ^ set(after)):
        print(f"{key:<{width}} only {'before' if key in before else 'after'}")


if __name__ == "__main__":
    main()

"""The run data in the repository: the runs of `docs/runs` in their compact form, and the
manifest of `docs/runs` and `docs/results`.

A compact run dir keeps what the published figures read, and nothing that its command cannot
make again: `config.yaml`, `code.jsonl` (the commit of each start of the run, where it was
recorded), its logs xz-compressed byte for byte (`metrics.jsonl.xz`, `episodes.jsonl.xz`:
batchppo reads them where the plain file is not there, so `batchppo plot` and `batchppo
evaluate --training-window` take a compact run dir as they take a full one) and `summary.json`
(`summarize`: whether the run finished, its last step, its wall-clock, its last evaluation, the
steps it was resumed at, and the newest checkpoint's name and sha256). The checkpoints stay out
of the tree; the manifest's command trains the run again.

The manifest (`docs/manifest.json`) lists every file of `docs/runs` and `docs/results` with its
sha256, the command that remakes it and the commit of the code that made it (recorded in the
file or its run, or else inferred from git history: the commit that added the file).

    python bench/rundata.py compact SRC DST   # a finished run dir -> its compact form in DST
    python bench/rundata.py finished RUN      # exit 0 where RUN (full or compact) is finished
    python bench/rundata.py manifest --write  # docs/manifest.json from the files
    python bench/rundata.py manifest --check  # exit 1 where it differs from them
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import lzma
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from batchppo.experiment.fileio import packed, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "runs"
RESULTS = ROOT / "docs" / "results"
MANIFEST = ROOT / "docs" / "manifest.json"

LOGS = ("metrics.jsonl", "episodes.jsonl")
"""A run's logs, stored xz-compressed in its compact form."""
KEPT = ("config.yaml", "code.jsonl")
"""A run's files kept as they are."""
SUMMARY = "summary.json"
CHECKPOINTS = "checkpoints"

CRAFTAX_SCRIPT = "bench/craftax_side_by_side.py"
"""The script of the results files that record their `args` (`--json` among them)."""

ADDED = "inferred from git history: the commit that added the file (the code as of then)"
"""How a commit is known that no file records (a run's: the commit that added its config)."""


def sha256(path: Path) -> str:
    """The sha256 of a file's bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _log_bytes(run_dir: Path, name: str) -> bytes | None:
    """A log's bytes as the run wrote them, plain or from its compressed copy; None where
    neither is there."""
    if (run_dir / name).is_file():
        return (run_dir / name).read_bytes()
    if packed(run_dir / name).is_file():
        return lzma.decompress(packed(run_dir / name).read_bytes())
    return None


def _checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The newest checkpoint of a full run dir (file, step, sha256); None where it has none."""
    files = sorted((run_dir / CHECKPOINTS).glob("ckpt-*.msgpack"))
    if not files:
        return None
    newest = files[-1]
    return {"file": newest.name, "step": int(newest.stem.removeprefix("ckpt-")),
            "sha256": sha256(newest)}  # fmt: skip


def summarize(run_dir: str | Path) -> dict[str, Any]:
    """What the published figures read of a full run dir, beside its logs.

    Returns:
        ``run`` (the dir's name); ``steps`` (the config's budget); ``last_step`` (the last step
        its metrics report); ``finished`` (``last_step`` reaches ``steps``); ``wall_time``
        (its largest reported wall-clock, seconds; None where none is reported);
        ``last_eval`` (its last evaluation's report; None where it has none); ``commit`` (of
        its first start, from ``code.jsonl``; None where not recorded); ``resumed_at`` (the
        steps of the checkpoints later starts resumed from); ``checkpoint`` (the newest
        checkpoint: ``file``, ``step``, ``sha256``; None where none is there); ``logs`` (per
        log, its ``records`` and the ``sha256`` of its plain bytes).

    Raises:
        SystemExit: The dir holds no config.yaml or no metrics.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file() or _log_bytes(run_dir, LOGS[0]) is None:
        raise SystemExit(f"{run_dir}: not a run dir (config.yaml and metrics.jsonl)")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    metrics = read_jsonl(run_dir / LOGS[0])
    code = read_jsonl(run_dir / KEPT[1])
    evals = [r for r in metrics if r.get("phase") == "eval"]
    times = [r["wall_time"] for r in metrics if r.get("wall_time") is not None]
    logs = {}
    for name in LOGS:
        data = _log_bytes(run_dir, name)
        if data is not None:
            logs[name] = {"records": len(data.splitlines()),
                          "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    last_step = max(r["step"] for r in metrics)
    return {
        "run": run_dir.name,
        "steps": config["steps"],
        "last_step": last_step,
        "finished": last_step >= config["steps"],
        "wall_time": max(times) if times else None,
        "last_eval": max(evals, key=lambda r: r["step"]) if evals else None,
        "commit": code[0]["commit"] if code else None,
        "resumed_at": [r["step"] for r in code[1:] if r["step"] > 0],
        "checkpoint": _checkpoint(run_dir),
        "logs": logs,
    }


def load_summary(run_dir: str | Path) -> dict[str, Any]:
    """A compact run dir's ``summary.json``.

    Raises:
        SystemExit: The dir has none (not a compact run dir).
    """
    path = Path(run_dir) / SUMMARY
    if not path.is_file():
        raise SystemExit(f"{run_dir}: no {SUMMARY}; `python bench/rundata.py compact` writes it")
    return json.loads(path.read_text())


def _xz(data: bytes) -> bytes:
    """``data`` xz-compressed (no name or time in the header: the same bytes give the same
    file)."""
    return lzma.compress(data, preset=9)


def compact(src: str | Path, dst: str | Path) -> dict[str, Any]:
    """Writes the compact form of the finished run ``src`` into ``dst`` (made where missing;
    ``src`` itself converts it in place, its plain logs and checkpoints then left for the caller
    to remove); returns its summary.

    Raises:
        SystemExit: ``src`` is not a run dir or has not finished.
    """
    src, dst = Path(src), Path(dst)
    summary = summarize(src)
    if not summary["finished"]:
        raise SystemExit(f"{src}: not finished (its last step {summary['last_step']:,} of "
                         f"{summary['steps']:,}): train it to the end first")  # fmt: skip
    dst.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (src / name).is_file() and src.resolve() != dst.resolve():
            shutil.copyfile(src / name, dst / name)
    for name in LOGS:
        data = _log_bytes(src, name)
        if data is not None:
            packed(dst / name).write_bytes(_xz(data))
    (dst / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def finished(run_dir: str | Path) -> bool:
    """Whether a run has finished: a compact run dir by its summary, a full one by its logs;
    False where there is no run."""
    run_dir = Path(run_dir)
    if (run_dir / SUMMARY).is_file():
        return bool(load_summary(run_dir)["finished"])
    if not (run_dir / "config.yaml").is_file() or _log_bytes(run_dir, LOGS[0]) is None:
        return False
    return bool(summarize(run_dir)["finished"])


# --- The manifest --------------------------------------------------------------------------


def _git(root: Path, *args: str) -> str:
    """A git command's output in the repository at ``root``."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"git {' '.join(args)}: {error}; the manifest needs the repository's "
                         "history (a full clone)") from None  # fmt: skip
    return done.stdout


@functools.cache
def added(root: Path) -> dict[str, tuple[str, str]]:
    """The commit that first added each file of docs/runs and docs/results at its path in the
    repository at ``root``, and that commit's date (one `git log` over both folders; a file not
    committed yet has none)."""
    out = _git(root, "log", "--no-renames", "--diff-filter=A", "--format=@%H %cs", "--name-only",
               "--", "docs/runs", "docs/results")  # fmt: skip
    found: dict[str, tuple[str, str]] = {}
    commit = ("", "")
    for line in out.splitlines():
        if line.startswith("@"):
            commit = tuple(line[1:].split())  # type: ignore[assignment]
        elif line:
            found[line] = commit  # newest first: the first commit to add it wins
    return found


def _run_command(run: str, commit: str) -> str:
    """The commands that train a run of docs/runs again, from its config and on the code of its
    commit (a worktree of its own, as `bench/fresh_seeds.sh train` runs them: a config of an
    earlier version need not load in a later one), and write its compact form; from the
    repository's root."""
    code = f"/tmp/code-{commit[:12]}"
    timestamp, _, name = run.partition("-")
    train = ["python", "-m", "batchppo.cli", "train", "--config", f"$R/docs/runs/{run}/config.yaml",
             "--logdir", "$R/runs", "--timestamp", timestamp, "--name", name]  # fmt: skip
    return (f"R=$PWD; [ -d {code} ] || git worktree add --detach {code} {commit}; "
            f"(cd {code} && {' '.join(train)}) && "
            f"python bench/rundata.py compact runs/{run} docs/runs/{run}")  # fmt: skip


def _evaluate_command(json_path: Path, data: Any) -> str:
    """The `batchppo evaluate` command that writes an `evaluate --json` file (and the
    `--stats-json` and `--csv` files beside it), from its entries: their run dirs, groups and
    protocol."""
    entries = data["runs"] if isinstance(data, dict) else data
    groups: dict[str | None, list[str]] = {}
    for entry in entries:
        groups.setdefault(entry.get("group"), []).append(entry["run_dir"])
    first = entries[0]
    protocol = first.get("protocol", "final-mean")
    args = ["batchppo", "evaluate", *next(iter(groups.values()))]
    if len(groups) > 1:
        args += ["--vs", *list(groups.values())[1], "--names", *map(str, groups)]
    if protocol.startswith("training-window"):
        args += ["--training-window", str(first["episodes"])]
    else:
        args += ["--episodes", str(first["episodes"])]
        args.append("--sample" if protocol == "final-sampled" else "--mean-action")
    rel = json_path.relative_to(ROOT)
    args += ["--json", str(rel)]
    stem = json_path.with_suffix("")
    for suffix, flag in (("-stats.json", "--stats-json"), ("-runs.csv", "--csv")):
        sibling = stem.with_name(stem.name + suffix)
        if sibling.is_file():
            args += [flag, str(sibling.relative_to(ROOT))]
    return shlex.join(args)


def is_evaluate_file(data: Any) -> bool:
    """Whether a file's data are an `evaluate --json` file's (runs with scores)."""
    entries = data.get("runs") if isinstance(data, dict) else data
    return (
        isinstance(entries, list)
        and bool(entries)
        and all(isinstance(e, dict) and "run_dir" in e and "mean_return" in e for e in entries)
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None


def _evaluate_source(path: Path) -> Path | None:
    """The `evaluate --json` file that wrote ``path`` beside it (its `--stats-json`, its
    `--csv`, or the `--seeds-csv` made from it); None where ``path`` is no such file."""
    name = path.name
    for suffix in ("-stats.json", "-runs.csv", ".csv"):
        if name.endswith(suffix):
            source = path.with_name(name.removesuffix(suffix) + ".json")
            if source.is_file() and is_evaluate_file(_json(source)):
                return source
    return None


STATED = {
    **{f"breakout_atari-2M-seed{s}-rerun.json": (
        f"python bench/learning.py --atari Breakout --steps 500000 --only batchppo --episodes 8 "
        f"--seed {s} --logdir runs_atari --eval-every 100000 "
        f"--json runs_atari/ours-breakout-s{s}.json"
    ) for s in range(3)},
    **{f"breakout_cleanrl-2M-seed{s}-rerun.json": (
        f"python bench/learning.py --atari Breakout --cleanrl-dir ../cleanrl --steps 500000 --only "
        f"cleanrl --seed {s} --logdir runs_atari --eval-every 100000 "
        f"--json runs_atari/cleanrl-breakout-s{s}.json"
    ) for s in range(3)},
    "gpu-h200-envs-atari-2026-11-27.json": "bench/atari_rate.sh",
    "gpu-h200-lockstep-2026-11-27-d1.json": (
        "PARTS=repro,lockstep,phases,profile,spin,half PHASES=3 bench/atari_rate.sh"),
    "gpu-h200-atari-train-2026-11-27.json": (
        "STEPS=30720 bench/atari_rate.sh; PARTS=train bench/atari_rate.sh; "
        "PARTS=phases,graphs,train LOOPS=true PHASES=4 bench/atari_rate.sh"),
}  # fmt: skip
"""The commands of results files that record none, as the benchmarks journal gives them (10g
and 10h: the Atari reruns; 11i and 11j: the GPU calls; the training rates' file transcribes
the readings of those calls)."""


def command_of(path: Path) -> tuple[str | None, str | None]:
    """The command that remakes a file of docs/results, and how it is known: ``recorded`` (the
    file, or the JSON its log was printed beside, records it), ``derived`` (from the entries
    of the `evaluate --json` file it is or was written beside, or from the `args` it records),
    ``stated`` (`STATED`: the benchmarks journal gives it) or None (none of these)."""
    data = _json(path) if path.suffix == ".json" else None
    if path.suffix == ".log" and path.with_suffix(".json").is_file():
        data = _json(path.with_suffix(".json"))
    if isinstance(data, dict) and data.get("command"):
        command = data["command"]
        return (command if isinstance(command, str) else shlex.join(command)), "recorded"
    if isinstance(data, dict) and "baselines_dir" in (data.get("args") or {}):
        return _args_command(CRAFTAX_SCRIPT, data["args"]), "derived"
    if data is not None and is_evaluate_file(data):
        return _evaluate_command(path, data), "derived"
    source = _evaluate_source(path)
    if source is not None:
        if path.name.endswith(".csv") and not path.name.endswith("-runs.csv"):
            rel = [str(p.relative_to(ROOT)) for p in (source, path)]
            return shlex.join(["python", "bench/results.py", "--seeds-csv", *rel]), "derived"
        return _evaluate_command(source, _json(source)), "derived"
    if path.name in STATED:
        return STATED[path.name], "stated"
    return None, None


def _args_command(script: str, args: Mapping[str, Any]) -> str:
    """A script's command line from the `argparse` namespace it recorded (its defaults
    included; the worker's own flag left out)."""
    line = ["python", script]
    for key, value in args.items():
        if key == "worker" or value is None or value is False:
            continue
        line.append(f"--{key.replace('_', '-')}")
        if value is not True:
            line.append(str(value))
    return shlex.join(line)


def recorded_commit(path: Path) -> str | None:
    """The commit of the code that made a results file, where it (or the `evaluate --json`
    file it was written beside, or the JSON its log was printed beside) records it:
    ``evaluated_with``, ``commit`` or ``code_version`` (a hand-written one: its first word;
    ``-dirty`` dropped)."""
    source = _evaluate_source(path) or path
    if source.suffix == ".log":
        source = source.with_suffix(".json")
    data = _json(source) if source.suffix == ".json" and source.is_file() else None
    if not isinstance(data, dict):
        return None
    for value in ((data.get("evaluated_with") or {}).get("commit"), data.get("commit"),
                  data.get("code_version")):  # fmt: skip
        if value:
            return str(value).split()[0].removesuffix("-dirty")
    return None


def _commit(recorded: str | None, path: Path, known: Mapping[str, Any]) -> dict[str, Any]:
    """``commit`` and ``commit_source``: ``recorded``, or else `ADDED` (the commit that added
    ``path``); and ``added``, the date ``path`` was committed (today for a file not committed
    yet). What git history gives is taken from ``known``, the manifest's entry, where it holds
    it: a file committed with its manifest entry keeps that entry."""
    rel = str(path.relative_to(ROOT))
    commit, day = added(ROOT).get(rel, (None, None))
    if known.get("added"):
        day = known["added"]
    if recorded:
        return {"commit": recorded, "commit_source": "recorded",
                "added": day or datetime.date.today().isoformat()}  # fmt: skip
    if known.get("commit_source") == ADDED and known.get("commit"):
        commit = known["commit"]
    return {"commit": commit, "commit_source": ADDED if commit else None,
            "added": day or datetime.date.today().isoformat()}  # fmt: skip


def run_entry(run_dir: Path, known: Mapping[str, Any]) -> dict[str, Any]:
    """A compact run's manifest entry: ``path``, each file's ``sha256``, the ``command`` that
    trains it again and compacts it, and the ``commit`` of its first start (``code.jsonl``, or
    else the commit that added its config)."""
    code = read_jsonl(run_dir / KEPT[1])
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    commit = _commit(code[0]["commit"] if code else None, run_dir / KEPT[0], known)
    return {
        "path": str(run_dir.relative_to(ROOT)),
        "sha256": {str(p.relative_to(run_dir)): sha256(p) for p in files},
        "command": _run_command(run_dir.name, commit["commit"]) if commit["commit"] else None,
        "command_source": "derived" if commit["commit"] else None,
        **commit,
    }


def results_entry(path: Path, known: Mapping[str, Any]) -> dict[str, Any]:
    """A results file's manifest entry: ``path``, ``sha256``, ``command`` and
    ``command_source`` (`command_of`), ``commit`` and ``commit_source`` (`recorded_commit`,
    or else the commit that added it)."""
    command, how = command_of(path)
    return {"path": str(path.relative_to(ROOT)), "sha256": sha256(path), "command": command,
            "command_source": how, **_commit(recorded_commit(path), path, known)}  # fmt: skip


def manifest_entries(known: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict]:
    """The manifest's entries: one per run dir of docs/runs (`run_entry`), then one per file
    of docs/results (`results_entry`).

    Args:
        known: The manifest's entries by path: their inferred commits are kept rather than
            asked of git again.
    """
    known = known or {}
    runs = [run_entry(d, known.get(str(d.relative_to(ROOT)), {}))
            for d in sorted(RUNS.iterdir()) if d.is_dir()]  # fmt: skip
    files = [results_entry(p, known.get(str(p.relative_to(ROOT)), {}))
             for p in sorted(RESULTS.rglob("*")) if p.is_file()]  # fmt: skip
    return runs + files


def load_manifest() -> dict[str, dict[str, Any]]:
    """The manifest's entries by path (none where there is no manifest)."""
    if not MANIFEST.is_file():
        return {}
    return {e["path"]: e for e in json.loads(MANIFEST.read_text())["entries"]}


def manifest_text(entries: Sequence[Mapping[str, Any]]) -> str:
    """The manifest as written: what it is, then one entry a line."""
    what = ("every run dir of docs/runs and file of docs/results: its sha256, the command that "
            "remakes it and the commit of the code that made it (bench/rundata.py)")  # fmt: skip
    lines = ",\n".join(json.dumps(e) for e in entries)
    return f'{{"what": {json.dumps(what)},\n"entries": [\n{lines}\n]}}\n'


def manifest_problems(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Where the manifest differs from ``entries`` (the files as they are): one line each."""
    stored = load_manifest()
    now = {e["path"]: e for e in entries}
    problems = [f"{p}: not in {MANIFEST.name}" for p in now if p not in stored]
    problems += [f"{p}: in {MANIFEST.name} but not in the tree" for p in stored if p not in now]
    problems += [f"{p}: its entry differs from the files" for p in now
                 if p in stored and stored[p] != now[p]]  # fmt: skip
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pack = sub.add_parser("compact", help="write a finished run's compact form")
    pack.add_argument("src")
    pack.add_argument("dst")
    done = sub.add_parser("finished", help="exit 0 where the run has finished")
    done.add_argument("run")
    man = sub.add_parser("manifest", help="write or check docs/manifest.json")
    man.add_argument("--write", action="store_true")
    man.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "compact":
        compact(args.src, args.dst)
        return 0
    if args.command == "finished":
        return 0 if finished(args.run) else 1
    entries = manifest_entries(load_manifest())
    if args.write:
        MANIFEST.write_text(manifest_text(entries))
    if args.check:
        problems = manifest_problems(entries)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("rerun `python bench/rundata.py manifest --write`", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

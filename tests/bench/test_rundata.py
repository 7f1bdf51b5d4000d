"""bench/rundata.py: the compact form of a run (its summary exact, its logs byte for byte), the
repository's runs all in that form, and the manifest of docs/runs and docs/results."""

from __future__ import annotations

import datetime
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from benchlib import load_bench

from batchppo.experiment.config import configs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rundata():
    return load_bench("rundata")


def _lines(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def full_run(folder: Path, name: str = "s3-pendulum_jax", last: int = 400) -> Path:
    """A run dir as `batchppo train` leaves it: config (400 steps), code, logs, checkpoints."""
    run = folder / name
    (run / "checkpoints").mkdir(parents=True)
    config = configs.replace_config(configs.get_preset("pendulum_jax"), {"steps": 400})
    configs.save_config(config, run / "config.yaml")
    metrics = [
        {"step": 200, "phase": "train", "score": -900.0, "wall_time": 3.5},
        {"step": 200, "phase": "eval", "score": -850.0, "episodes": 16, "wall_time": 4.0},
        {"step": last, "phase": "train", "score": -300.0, "wall_time": 9.25},
        {"step": last, "phase": "eval", "score": -250.0, "episodes": 16, "wall_time": 10.5},
    ]
    (run / "metrics.jsonl").write_bytes(_lines(metrics))
    (run / "episodes.jsonl").write_bytes(_lines([{"step": 40, "return": -1200.5, "length": 200}]))
    code = [{"step": 0, "commit": "a" * 40, "note": None},
            {"step": 200, "commit": "a" * 40, "note": None}]  # fmt: skip
    (run / "code.jsonl").write_bytes(_lines(code))
    (run / "checkpoints" / "ckpt-000000000200.msgpack").write_bytes(b"first")
    (run / "checkpoints" / f"ckpt-{last:012d}.msgpack").write_bytes(b"last")
    return run


def test_the_compact_form_keeps_the_logs_byte_for_byte_and_summarizes_the_run(rundata, tmp_path):
    src = full_run(tmp_path / "full")
    summary = rundata.compact(src, tmp_path / "docs" / src.name)
    dst = tmp_path / "docs" / src.name
    assert sorted(p.name for p in dst.iterdir()) == [
        "code.jsonl",
        "config.yaml",
        "episodes.jsonl.xz",
        "metrics.jsonl.xz",
        "summary.json",
    ]
    for name in ("metrics.jsonl", "episodes.jsonl"):
        assert lzma.decompress((dst / f"{name}.xz").read_bytes()) == (src / name).read_bytes()
    assert (dst / "config.yaml").read_bytes() == (src / "config.yaml").read_bytes()
    metrics = (src / "metrics.jsonl").read_bytes()
    assert summary == json.loads((dst / "summary.json").read_text()) == {
        "run": "s3-pendulum_jax",
        "steps": 400,
        "last_step": 400,
        "finished": True,
        "wall_time": 10.5,
        "last_eval": {"step": 400, "phase": "eval", "score": -250.0, "episodes": 16,
                      "wall_time": 10.5},
        "commit": "a" * 40,
        "resumed_at": [200],
        "checkpoint": {"file": "ckpt-000000000400.msgpack", "step": 400,
                       "sha256": hashlib.sha256(b"last").hexdigest()},
        "logs": {
            "metrics.jsonl": {"records": 4, "sha256": hashlib.sha256(metrics).hexdigest()},
            "episodes.jsonl": {"records": 1, "sha256": hashlib.sha256(
                (src / "episodes.jsonl").read_bytes()).hexdigest()},
        },
    }  # fmt: skip
    # The same bytes give the same file: a manifest's sha256 does not move on a rewrite.
    again = rundata.compact(src, tmp_path / "again" / src.name)
    assert again == summary
    for name in ("metrics.jsonl.xz", "episodes.jsonl.xz", "summary.json"):
        assert (tmp_path / "again" / src.name / name).read_bytes() == (dst / name).read_bytes()
    # The compact form summarizes as the full run does.
    assert rundata.summarize(dst) == {**summary, "checkpoint": None}


def test_an_unfinished_run_is_refused_and_not_finished(rundata, tmp_path):
    src = full_run(tmp_path, last=300)
    with pytest.raises(SystemExit, match=r"s3-pendulum_jax: not finished \(its last step 300 of "
                       r"400\): train it to the end first"):  # fmt: skip
        rundata.compact(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not rundata.finished(src)
    assert not rundata.finished(tmp_path / "missing")
    done = full_run(tmp_path / "b")
    assert rundata.finished(done)
    rundata.compact(done, tmp_path / "compact")
    assert rundata.finished(tmp_path / "compact")
    with pytest.raises(SystemExit, match="not a run dir"):
        rundata.summarize(tmp_path)


def test_every_run_in_the_repository_is_compact_finished_and_its_logs_intact(rundata):
    runs = sorted(d for d in rundata.RUNS.iterdir() if d.is_dir())
    assert len(runs) > 100
    for run in runs:
        names = {p.name for p in run.iterdir()}
        assert names <= {"config.yaml", "code.jsonl", "summary.json", "metrics.jsonl.xz",
                         "episodes.jsonl.xz"}, run  # fmt: skip
        summary = rundata.load_summary(run)
        assert summary["finished"] and summary["run"] == run.name, run
        assert set(summary["logs"]) == {n.removesuffix(".xz") for n in names if n.endswith(".xz")}
        for name, log in summary["logs"].items():
            data = lzma.decompress((run / f"{name}.xz").read_bytes())
            assert hashlib.sha256(data).hexdigest() == log["sha256"], (run, name)


def test_the_manifest_lists_every_run_and_results_file_as_they_are(rundata, capsys):
    assert rundata.main(["manifest", "--check"]) == 0, capsys.readouterr().err
    entries = rundata.load_manifest()
    assert all(e["commit"] for e in entries.values()), [p for p, e in entries.items()
                                                         if not e["commit"]]  # fmt: skip
    run = entries["docs/runs/s23-humanoid_fast"]
    assert run["commit"] == "51905e10707d2739fe4675d540c9a2dac6e3faa2"
    assert run["commit_source"] == "recorded"
    # Trained again on its own commit's code, from its config, then compacted.
    assert run["command"] == (
        "R=$PWD; [ -d /tmp/code-51905e10707d ] || git worktree add --detach "
        "/tmp/code-51905e10707d 51905e10707d2739fe4675d540c9a2dac6e3faa2; "
        "(cd /tmp/code-51905e10707d && python -m batchppo.cli train --config "
        "$R/docs/runs/s23-humanoid_fast/config.yaml --logdir $R/runs --timestamp s23 --name "
        "humanoid_fast) && python bench/rundata.py compact runs/s23-humanoid_fast "
        "docs/runs/s23-humanoid_fast"
    )


def test_a_changed_file_fails_the_manifest_check(rundata, tmp_path, monkeypatch, capsys):
    # A repository whose history holds none of the files yet.
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    (tmp_path / "docs" / "runs").mkdir()
    data = {"command": ["bench/gpu.py", "--rounds", "2"], "commit": "abc1234-dirty"}
    (results / "gpu.json").write_text(json.dumps(data))
    for name, value in (("ROOT", tmp_path), ("RESULTS", results),
                        ("RUNS", tmp_path / "docs" / "runs"),
                        ("MANIFEST", tmp_path / "docs" / "manifest.json")):  # fmt: skip
        monkeypatch.setattr(rundata, name, value)
    assert rundata.main(["manifest", "--write"]) == 0
    assert rundata.load_manifest() == {"docs/results/gpu.json": {
        "path": "docs/results/gpu.json",
        "sha256": hashlib.sha256((results / "gpu.json").read_bytes()).hexdigest(),
        "command": "bench/gpu.py --rounds 2", "command_source": "recorded",
        "commit": "abc1234", "commit_source": "recorded",
        "added": datetime.date.today().isoformat()}}  # not committed yet: today  # fmt: skip
    assert rundata.main(["manifest", "--check"]) == 0
    (results / "gpu.json").write_text(json.dumps({**data, "rows": []}))
    (results / "new.txt").write_text("x")
    assert rundata.main(["manifest", "--check"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "docs/results/new.txt: not in manifest.json",
        "docs/results/gpu.json: its entry differs from the files",
        "rerun `python bench/rundata.py manifest --write`",
    ]


def test_an_evaluate_file_s_command_is_derived_from_its_entries(rundata, tmp_path, monkeypatch):
    monkeypatch.setattr(rundata, "ROOT", tmp_path)
    runs = [{"run_dir": f"docs/runs/s{s}-p", "group": "p", "mean_return": 1.0, "episodes": 30,
             "protocol": "final-sampled"} for s in (0, 1)]  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"runs": runs}))
    (tmp_path / "r-stats.json").write_text("{}")
    expected = ("batchppo evaluate docs/runs/s0-p docs/runs/s1-p --episodes 30 --sample "
                "--json r.json --stats-json r-stats.json")  # fmt: skip
    assert rundata.command_of(path) == (expected, "derived")
    assert rundata.command_of(tmp_path / "r-stats.json") == (expected, "derived")
    (tmp_path / "r.csv").write_text("seed,score\n")
    assert rundata.command_of(tmp_path / "r.csv") == (
        "python bench/results.py --seeds-csv r.json r.csv", "derived")  # fmt: skip
    window = [{**r, "protocol": "training-window-exact", "episodes": 100} for r in runs]
    path.write_text(json.dumps({"runs": window}))
    assert rundata.command_of(path)[0].startswith(
        "batchppo evaluate docs/runs/s0-p docs/runs/s1-p --training-window 100 --json r.json"
    )


def _fresh_seeds(root: Path, seeds: str) -> tuple[list[str], dict[str, str]]:
    """`bench/fresh_seeds.sh` in a copy of the repository's layout at ``root`` (the script and
    its helper), and the environment it runs in there: the venv's batchppo first, ``seeds``
    its SEEDS."""
    (root / "bench").mkdir()
    for name in ("fresh_seeds.sh", "rundata.py"):
        shutil.copy(ROOT / "bench" / name, root / "bench" / name)
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {**os.environ, "SEEDS": seeds, "PATH": path, "PYTHONPATH": str(ROOT)}
    return ["bash", str(root / "bench" / "fresh_seeds.sh")], env


# The last step of a 1M-step run: 2048 steps an update (the presets), or 4096 (a variant).
@pytest.mark.parametrize("last", [1001472, 1003520])
def test_stage_writes_the_compact_form_and_skips_a_published_seed(tmp_path, last):
    # One finished run of seed 20.
    script, env = _fresh_seeds(tmp_path, "20")
    src = full_run(tmp_path / "runs_fresh", "s20-pendulum_jax", last=last)
    (src / "checkpoints" / f"ckpt-{last:012d}.msgpack").write_bytes(b"final")
    stage = [*script, "stage", "pendulum_jax"]
    done = subprocess.run(stage, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    dst = tmp_path / "docs" / "runs" / "s20-pendulum_jax"
    assert sorted(p.name for p in dst.iterdir()) == [
        "code.jsonl",
        "config.yaml",
        "episodes.jsonl.xz",
        "metrics.jsonl.xz",
        "summary.json",
    ]
    summary = json.loads((dst / "summary.json").read_text())
    assert summary["finished"] and summary["checkpoint"]["file"] == f"ckpt-{last:012d}.msgpack"
    # Published: a second stage leaves it as it is, even where runs_fresh/ lost the run.
    before = (dst / "summary.json").stat().st_mtime_ns
    shutil.rmtree(src)
    done = subprocess.run(stage, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (dst / "summary.json").stat().st_mtime_ns == before


_CITED = re.compile(r"docs/runs/((?:\{[^}]*\}|[^\s`'\"(),;{])*)")
"""A run dir a page cites: `docs/runs/` and its name (a glob, `{a,b}` alternatives)."""


def _expand(pattern: str) -> list[str]:
    """``{a,b}`` alternatives expanded, as the shell does."""
    found = re.search(r"\{([^{}]*)\}", pattern)
    if not found:
        return [pattern]
    head, tail = pattern[: found.start()], pattern[found.end() :]
    return [p for alt in found.group(1).split(",") for p in _expand(head + alt.strip() + tail)]


def _in_tree(cited: str) -> bool:
    """Whether a cited run dir matches one in docs/runs (a placeholder, `P`, `<run>`, `$g`,
    matching any)."""
    cited = re.sub(r"<[^>]*>|\$\{?\w+\}?|\b[PGVS]\b", "*", cited.rstrip(".:"))
    runs = ROOT / "docs" / "runs"
    return not cited or any(any(runs.glob(p)) for p in _expand(cited))


def test_every_run_dir_the_journal_cites_is_in_the_tree_or_marked_gone():
    # In prose the path is followed by "(gone)"; in a code block a comment says so.
    lines = (ROOT / "docs" / "benchmarks-journal.md").read_text().splitlines()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    blocks = list(zip(fences[::2], fences[1::2], strict=True))
    unmarked = []
    for i, line in enumerate(lines):
        block = next(((a, b) for a, b in blocks if a < i < b), None)
        marks = lines[block[0] : block[1]] if block else [line]
        for cited in _CITED.findall(line):
            if not _in_tree(cited) and not any("gone" in text for text in marks):
                unmarked.append(f"{i + 1}: docs/runs/{cited}")
    assert not unmarked, unmarked
    assert _in_tree("s1?-P-issue40") and _in_tree("s{0,1,2}-breakout_atari-2M")
    assert not _in_tree("s0-ant-4M")


def test_publish_refuses_a_seed_neither_scored_nor_with_its_checkpoint(tmp_path):
    # Seed 20 staged on an earlier machine and scored there; seed 21 staged, its checkpoint
    # gone with that machine and never scored: publish names seed 21 and the fix.
    script, env = _fresh_seeds(tmp_path, "20 21")
    for seed in (20, 21):
        src = full_run(tmp_path / "runs_fresh", f"s{seed}-pendulum_jax", last=1001472)
        (src / "checkpoints" / "ckpt-000001001472.msgpack").write_bytes(b"final")
    staged = subprocess.run([*script, "stage", "pendulum_jax"], env=env, capture_output=True,
                            text=True, check=False)  # fmt: skip
    assert staged.returncode == 0, staged.stderr
    shutil.rmtree(tmp_path / "runs_fresh")
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "pendulum_jax-1M-seed20.json").write_text("{}")
    done = subprocess.run([*script, "publish", "pendulum_jax"], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "docs/results/pendulum_jax-1M-seed21.json: seed 21 is not scored and its checkpoint is "
        "gone: train it again (rm -r docs/runs/s21-pendulum_jax)"
    )


# What `publish` calls beside rundata.py, logged to calls.log (the script runs from the root):
# batchppo and bench/results.py, each writing the files it is given (their own names in them,
# so that git tells them apart).
_FAKE_BATCHPPO = """#!/usr/bin/env bash
echo "batchppo $*" >> calls.log
while [ $# -gt 0 ]; do
  case $1 in --json|--csv|--stats-json) echo "$2" > "$2"; shift ;; esac
  shift
done
"""
_FAKE_RESULTS = """import pathlib, sys
with open("calls.log", "a") as log:
    log.write(" ".join(["results.py", *sys.argv[1:]]) + "\\n")
if sys.argv[1] == "--seeds-csv":
    pathlib.Path(sys.argv[3]).write_text(sys.argv[3])
"""


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout


def test_a_variant_s_runs_publish_under_the_preset_s_name_once_its_set_moves_to_history(
    tmp_path,
):
    # A preset rerun on seeds 20-21 by a variant (runs s2?-pendulum_jax-v1, scored; training
    # and evaluation faked): its set goes out under the preset's own name, never over a set
    # there, which `history` moves to a name of its own first.
    script, env = _fresh_seeds(tmp_path, "20 21")
    env = {**env, "PUBLISH_AS": "pendulum_jax", "PATH": f"{tmp_path / 'bin'}:{env['PATH']}"}
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "batchppo").write_text(_FAKE_BATCHPPO)
    (tmp_path / "bin" / "batchppo").chmod(0o755)
    (tmp_path / "bench" / "results.py").write_text(_FAKE_RESULTS)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "start")  # the manifest reads history
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)

    def publish() -> subprocess.CompletedProcess:
        for seed in (20, 21):
            (results / f"pendulum_jax-v1-1M-seed{seed}.json").write_text("{}")
        return subprocess.run([*script, "publish", "pendulum_jax-v1"], env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip

    for seed in (20, 21):
        full_run(tmp_path / "runs_fresh", f"s{seed}-pendulum_jax-v1", last=1001472)
    done = publish()
    assert done.returncode == 0, done.stderr
    out = "docs/results/pendulum_jax-1M-seeds20-21"
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "batchppo evaluate docs/results/pendulum_jax-v1-1M-seed20.json "
        f"docs/results/pendulum_jax-v1-1M-seed21.json --reference targets-1m --json {out}.json "
        f"--csv {out}-runs.csv --stats-json {out}-stats.json",
        f"results.py --seeds-csv {out}.json {out}.csv",
        "batchppo evaluate docs/runs/s20-pendulum_jax-v1 docs/runs/s21-pendulum_jax-v1 "
        f"--training-window 100 --max-eval-mean 1001472 --json {out}-training-window.json "
        f"--stats-json {out}-training-window-stats.json",
        "results.py --write README.md docs/benchmarks.md --figure",
    ]
    published = sorted(p.name for p in results.iterdir())
    suffixes = [".json", ".csv", "-runs.csv", "-stats.json", "-training-window.json",
                "-training-window-stats.json"]  # fmt: skip
    assert published == sorted(f"pendulum_jax-1M-seeds20-21{s}" for s in suffixes)
    # The set there now: a second publish is refused before it stages, scores or writes.
    (tmp_path / "calls.log").unlink()
    done = publish()
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"{out}.json: published already; move that set to history first: "
        'SEEDS="20 21" bench/fresh_seeds.sh history pendulum_jax VARIANT'
    ]
    assert not (tmp_path / "calls.log").exists()
    # `history` renames each of its files (git mv), and the manifest follows.
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "published")
    history = [*script, "history", "pendulum_jax"]
    done = subprocess.run([*history, "v0"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    kept = "docs/results/pendulum_jax-v0-1M-seeds20-21"
    assert sorted(_git(tmp_path, "status", "--porcelain").splitlines()) == sorted(
        [" M docs/manifest.json", *(f"R  {out}{s} -> {kept}{s}" for s in suffixes)]
    )
    manifest = json.loads((tmp_path / "docs" / "manifest.json").read_text())["entries"]
    assert sorted(e["path"] for e in manifest if "seeds20-21" in e["path"]) == [
        f"{kept}{s}" for s in sorted(suffixes)]  # fmt: skip
    # The preset's name free, the variant's runs publish under it.
    done = publish()
    assert done.returncode == 0, done.stderr
    assert (results / "pendulum_jax-1M-seeds20-21.json").is_file()
    # Refused: a history name taken, a set not there, no variant named.
    for args, seeds, error in [
        (["v0"], "20 21", "docs/results/pendulum_jax-v0-1M-seeds20-21.json: history of that "
                          "name exists; name another variant"),
        (["v2"], "30 31", 'docs/results/pendulum_jax-1M-seeds30-31.json: no such set to move '
                          '(SEEDS="30 31")'),
        ([], "20 21", "history pendulum_jax: name the variant the set moves to: "
                      "bench/fresh_seeds.sh history pendulum_jax VARIANT"),
    ]:  # fmt: skip
        done = subprocess.run([*history, *args], env={**env, "SEEDS": seeds},
                              capture_output=True, text=True, check=False)  # fmt: skip
        assert (done.returncode, done.stderr.strip()) == (1, error)

"""What a figure was made with: the code version that trained a run and the run's config.

A run dir records, each time a run starts or resumes, the git commit of the ``batchppo`` package
that runs it (``CODE_FILE``); ``batchppo evaluate --json`` writes, beside the runs' scores,
each group's code version and effective config (the config as this version loads the runs'
``config.yaml``, the seed left out): one value where the group's runs agree, a list in the
order of the runs where they differ. A figure then names the code and the recipe it describes,
and ``config_differences`` tells whether a preset as shipped is still that recipe.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.artifacts.rundir import CONFIG_FILE
from batchppo.experiment.config.configs import (
    config_from_dict,
    config_to_dict,
    load_config,
)
from batchppo.experiment.config.migrate import migrate_config
from batchppo.experiment.config.resume import RESUME_MUTABLE, learned_option_changes

CODE_FILE = "code.jsonl"
"""A run dir's record of its code: one JSON line per start or resume, ``{"step", "commit",
"note"}`` (``code_version``)."""

PERIODIC_EVALUATION = frozenset({"eval_every", "eval_episodes", "eval_actions", "eval_max_steps"})
"""The fields of a run's periodic evaluations. They change what those evaluations measure but
not what the run learns (the evaluations draw their own keys and step their own envs), so a
figure that reads no periodic evaluation (the final policy's, the training episodes') does not
depend on them (tests/experiment/artifacts/test_provenance.py trains twice to check it)."""

PROVENANCE_KEYS = ("commit", "note", "config")
"""What a results entry holds of its run's provenance (``run_provenance``)."""

NO_EFFECT = (RESUME_MUTABLE - {"eval_every", "eval_max_steps", "backend_options"}) | {
    "minibatch_diagnostics",
    "representation_diagnostics",
}
"""Config fields that change neither what a run learns nor how its figures are measured
(bookkeeping, speed, where the envs run: ``RESUME_MUTABLE`` without the evaluations'
cadence and bound, which the periodic-evaluation protocols read, and ``backend_options``,
whose options that change what is learned ``config_differences`` compares; and the
diagnostics, which only add metrics: tests/algorithms/ppo/test_ppo.py and test_levers.py
train with each on and off and compare the runs)."""

PACKAGE = Path(__file__).resolve().parents[2]
"""The package's folder (this module is ``batchppo/experiment/artifacts/provenance.py``): the
checkout whose commit and uncommitted changes a run records."""


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(PACKAGE), *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()


@functools.cache
def code_version() -> dict[str, str | None]:
    """The git commit of the ``batchppo`` package this process imported.

    Returns:
        ``commit`` (the full hash; None where the package is not in a git checkout) and
        ``note`` (None for a clean checkout; else what the commit does not say: uncommitted
        changes to the package, or why there is no commit).
    """
    try:
        commit = _git("rev-parse", "HEAD")
        changed = _git("status", "--porcelain", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "note": f"batchppo at {PACKAGE} is not in a git checkout"}
    note = f"with uncommitted changes to {PACKAGE.name}/" if changed else None
    return {"commit": commit, "note": note}


def record_code(run_dir: str | Path, step: int) -> None:
    """Appends the code version of this process to ``run_dir``'s ``CODE_FILE``, from ``step``."""
    with (Path(run_dir) / CODE_FILE).open("a") as f:
        f.write(json.dumps({"step": int(step), **code_version()}) + "\n")


def run_code(run_dir: str | Path) -> tuple[str | None, str | None]:
    """``(commit, note)`` of the code that trained a run, from its ``CODE_FILE``.

    One commit where every start of the run ran one clean checkout; else None or the commit
    with a note that says what happened (uncommitted changes, several commits, no record).
    """
    path = Path(run_dir) / CODE_FILE
    if not path.is_file():
        return None, "the run dir records no code version (it predates CODE_FILE)"
    starts = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    commits = list(dict.fromkeys(s["commit"] for s in starts))
    if len(commits) > 1:
        parts = [f"{s['commit'] or 'no commit'} from step {s['step']:,}" for s in starts]
        return None, f"trained at several code versions: {', '.join(parts)}"
    notes = list(dict.fromkeys(s["note"] for s in starts if s["note"]))
    return commits[0], "; ".join(notes) or None


def effective_config(config: RunConfig) -> dict[str, Any]:
    """``config`` as plain data (``config_to_dict``) without its seed."""
    return {k: v for k, v in config_to_dict(config).items() if k != "seed"}


def loaded(recorded: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """A recorded effective config as this version loads it: its former fields move to where
    they are now (``migrate.migrate_config``), and fields added
    since take the values that repeat what the code did before them (``config_from_dict``:
    ``FIELDS_ADDED``, else their defaults).

    Raises:
        ConfigError: The record no longer reads as a config (a field removed, a value now
            invalid).
    """
    return effective_config(config_from_dict(migrate_config(dict(recorded)), source))


def run_provenance(run_dir: str | Path) -> dict[str, Any]:
    """A run's ``commit``, ``note`` and ``config`` (``effective_config`` of its stored
    config, as this version loads it), for its results entry."""
    commit, note = run_code(run_dir)
    config = effective_config(load_config(Path(run_dir) / CONFIG_FILE))
    return {"commit": commit, "note": note, "config": config}


def fold(values: Sequence[Any]) -> Any:
    """One value where all of ``values`` are equal, else the list of them (none is a list)."""
    return values[0] if all(v == values[0] for v in values) else list(values)


def unfold(value: Any, count: int) -> list[Any]:
    """``fold``'s inverse: ``count`` values."""
    if isinstance(value, list):
        if len(value) != count:
            raise ValueError(f"{len(value)} values for {count} runs")
        return value
    return [value] * count


def config_differences(
    expected: Mapping[str, Any],
    recorded: Mapping[str, Any],
    aside: frozenset[str] = frozenset(),
) -> list[tuple[str, Any, Any]]:
    """The fields, but those of ``NO_EFFECT``, of ``aside`` and the seed, where two effective
    configs differ: ``(field, expected value, recorded value)``, in ``expected``'s order then
    the rest. A field one of them lacks counts as differing, with None for the missing value.
    Of ``backend_options`` (on one backend) only the options that change what is learned count
    (``resume.learned_option_changes``), the whole mappings named where they differ.

    Args:
        expected: The effective config a figure should describe (a preset as shipped).
        recorded: The effective config its runs recorded.
        aside: More fields to leave out: ``PERIODIC_EVALUATION`` for a figure that reads no
            periodic evaluation.
    """
    names = list(dict.fromkeys([*expected, *recorded]))
    differences = []
    for name in names:
        mine, theirs = expected.get(name), recorded.get(name)
        if name in NO_EFFECT or name in aside or name == "seed" or mine == theirs:
            continue
        backend = expected.get("backend")
        if (
            name == "backend_options"
            and backend == recorded.get("backend")
            and not learned_option_changes(str(backend), theirs or {}, mine or {})
        ):
            continue
        differences.append((name, mine, theirs))
    return differences

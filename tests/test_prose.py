"""The package's comments and docstrings say what the code does and why, not how fast it ran.

A figure measured on one machine on one day (a speed, a speed-up, a run's score, the machine's
name, the date) goes stale as the code and the machines change, and an issue number or a journal
section narrates history instead of giving the reason. The evidence lives in the docs
(``docs/benchmarks.md``, ``docs/failure-modes.md``, ``docs/results/``), which the prose may
point to.

The prose is read from the source: comments with ``tokenize``, docstrings with ``ast`` (every
statement that is a bare string: a module's, class's or function's docstring, and the
attribute docstrings under constants and fields). String literals the code uses (help texts,
messages) are not prose here.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

import batchppo

PACKAGE = Path(batchppo.__file__).parent

MEASURED: dict[str, re.Pattern[str]] = {
    # "1,918 agent steps/s", "9763 steps/s", "40k frames/s", "500/s": a rate after a number
    "speed": re.compile(r"\d[\d,]*(?:\.\d+)?k?\s*(?:(?:[A-Za-z-]+\s+){0,2}[A-Za-z-]+)?/s\b"),
    "speed per second": re.compile(r"\d[\d,]*(?:\.\d+)?k?\s*(?:[A-Za-z-]+\s+){0,2}per second\b"),
    # "1.07x as fast", "20x cheaper" (not "0x1f", "3x3", "3 x 256")
    "speed-up": re.compile(r"\b\d+(?:\.\d+)?x(?![\w.])"),
    "machine": re.compile(r"\b(?:H100|H200|A100|V100|EPYC|Xeon|Ryzen|Threadripper)\b"),
    "issue": re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE),
    # the project's benchmarks journal (not Optuna's ``journal:PATH`` storage)
    "journal": re.compile(
        r"\bbenchmarks?[-_ ]journal\b|\bjournal\b,?\s+(?:section\s+|\[)?\d", re.IGNORECASE
    ),
    "date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    # "the IQM rose from 5043 to 5144", "the weakest seed fell from 3500 ..."
    "measured change": re.compile(
        r"\b(?:rose|fell|dropped|grew|improved|raised|went)\b[^.;:]{0,40}\bfrom\s+-?\d",
        re.IGNORECASE,
    ),
    # "took 3.1 s", "trained in 40 minutes", "295 ms per iteration"
    "timing": re.compile(
        r"\b(?:took|takes|taking|ran in|runs in|trained in)\s+(?:about\s+)?\d[\d,.]*\s*"
        r"(?:s|ms|µs|us|sec|seconds?|minutes?|min|hours?|h)\b"
        r"|\b\d[\d,.]*\s*(?:s|ms|µs|us|seconds?|minutes?)\s+(?:per|a|an|each)\s+"
        r"(?:step|iteration|update|call|run|episode|frame|game)s?\b",
        re.IGNORECASE,
    ),
}
"""The patterns of a measured figure or of history in prose, by name."""


def prose(source: str) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of each comment and each docstring line of a module's ``source``.

    Args:
        source: A Python module's text.

    Yields:
        The line number and text of each comment, and of each line of each bare-string
        statement (docstrings, attribute docstrings).
    """
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.value.lineno + offset, line


def measured(text: str) -> list[str]:
    """The names of the ``MEASURED`` patterns ``text`` matches."""
    return [name for name, pattern in MEASURED.items() if pattern.search(text)]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("a step (on an H200: 1,918 agent steps/s with the loop)", ["speed", "machine"]),
        ("9763 steps/s on the CPU", ["speed"]),
        ("about 500/s", ["speed"]),
        ("at 40k frames per second", ["speed per second"]),
        ("it trained HalfCheetah 1.07x as fast", ["speed-up"]),
        ("# math: 20x cheaper than np.isfinite", ["speed-up"]),
        ("an AMD EPYC with 2 cores", ["machine"]),
        ("waited for ever (issue 12)", ["issue"]),
        ("as quoted in Issue #23", ["issue"]),
        ("(docs/benchmarks-journal.md, section 14)", ["journal"]),
        ("the clone that journal 14's trace found", ["journal"]),
        ("see the benchmarks journal, section 4b", ["journal"]),
        ("measured on 2026-11-27", ["date"]),
        ("the IQM rose from 5043 to 5144", ["measured change"]),
        ("a gradient step took 3.1 s", ["timing"]),
        ("the fused iteration: 295 ms per iteration", ["timing"]),
        # legitimate prose: units, arithmetic, sizes, citations, upstream bug references
        ("A tqdm bar (steps, steps/s, ETA, last score)", []),
        ("checked on 3 x 256 observations", []),
        ("a 3x3 kernel, a 64x64 frame, the mask 0x1f", []),
        ("Never hangs: 5 s for a clean close.", []),
        ("step_timeout: seconds a step may take (60 by default)", []),
        ("drops its locks when the lease expires (90 s by default)", []),
        ("Mnih et al. 2016; Lee et al. 2024, arXiv 2606.06746", []),
        ("loops run slowly (jax-ml/jax#12868; openai/gym#1541)", []),
        ("chosen on tuning seeds 0-9: docs/results/hopper_fast-ln-1M-seeds0-9.json", []),
        ("the mean of the middle 50 % of all runs' scores", []),
        ("storage: an Optuna URL or ``journal:PATH``, a journal file", []),
        ("a rate that went from the start value to 0", []),
    ],
)
def test_patterns_tell_figures_from_prose(text: str, names: list[str]) -> None:
    assert measured(text) == names


def test_prose_reads_comments_and_docstrings_only() -> None:
    source = (
        '"""Module: 12x."""\n'
        "X = 1  # a comment\n"
        '"""X\'s docstring."""\n'
        "def f():\n"
        '    """f\'s docstring,\n    second line."""\n'
        '    return "issue 12, not prose"\n'
    )
    assert list(prose(source)) == [
        (2, "# a comment"),
        (1, "Module: 12x."),
        (3, "X's docstring."),
        (5, "f's docstring,"),
        (6, "    second line."),
    ]


def test_package_prose_quotes_no_measured_figure() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {', '.join(names)}: {text.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in prose(path.read_text(encoding="utf-8"))
        if (names := measured(text))
    ]
    hint = (
        "comments and docstrings quote measured figures or history; say what the code does and "
        "why, and point to docs/benchmarks.md or docs/results/ for the evidence:"
    )
    assert not found, "\n".join([hint, *found])

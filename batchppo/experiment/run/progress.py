"""The progress output of a run: a tqdm bar on a terminal, plain lines otherwise.

The first iteration of a run (or of a resume) compiles its programs, which can take longer than
many iterations: its time is left out of the ETA, which counts from the end of the first
iteration (``steady_eta``; none is shown before a second iteration has ended), and out of the
bar's rate, whose tqdm bar starts when the first iteration ends (a bar without a rate stands in
until then).
"""

from __future__ import annotations

import datetime
import math
import sys
import time
from collections.abc import Mapping
from typing import Any

from batchppo.experiment.artifacts.eval_protocol import EvalProtocol


def _fmt(value: Any, spec: str = ".1f") -> str:
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def steady_eta(origin: tuple[float, int] | None, now: float, step: int, total: int) -> float | None:
    """Seconds left to ``total`` steps at the rate since ``origin``.

    Args:
        origin: ``(time, step)`` at the end of the first iteration (which compiles); None
            before it ended.
        now: The time (``time.monotonic()``).
        step: The steps done by ``now``.
        total: The step budget.

    Returns:
        The seconds left, or None while no steady rate is known: no origin yet, or no step or no
        time since it.
    """
    if origin is None:
        return None
    start, start_step = origin
    if step <= start_step or now <= start:
        return None
    return max(total - step, 0) * (now - start) / (step - start_step)


class Progress:
    """A tqdm bar (steps, steps/s, ETA, last score and eval score) on a terminal; plain lines
    otherwise.

    Args:
        mode: ``auto`` (bar if stdout is a terminal), ``bar``, ``lines`` or ``none``.
        total: Step budget.
        initial: Steps already done (resume).
    """

    def __init__(self, mode: str, total: int, initial: int) -> None:
        if mode not in ("auto", "bar", "lines", "none"):
            raise ValueError(f"progress={mode!r}: use auto, bar, lines or none")
        if mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "lines"
        self.mode, self.total, self._score = mode, total, float("nan")
        self._eval: str | None = None  # the last eval score, with its protocol
        self._steady: tuple[float, int] | None = None  # (time, step) after the first iteration
        # Until the first iteration ends, a bar that leaves no line behind (see the docstring).
        self._bar = self._open_bar(initial, leave=False) if mode == "bar" else None

    def _open_bar(self, initial: int, leave: bool) -> Any:
        from tqdm import tqdm

        return tqdm(
            total=max(self.total, initial), initial=initial, unit="step", unit_scale=True,
            dynamic_ncols=True, file=sys.stdout, smoothing=0.1, leave=leave,
        )  # fmt: skip

    def advance(self, step: int) -> None:
        """Moves the bar to ``step``, at the end of an iteration."""
        if self._steady is None:
            self._steady = (time.monotonic(), step)
            if self._bar is not None:  # tqdm's rate counts from its start: start it now.
                self._bar.close()
                self._bar = self._open_bar(step, leave=True)
        if self._bar is not None:
            if step > self._bar.total:  # The last iteration may overshoot the budget.
                self._bar.total = step
            self._bar.update(step - self._bar.n)

    def report(self, record: Mapping[str, Any]) -> None:
        """Shows one report (a metrics.jsonl record)."""
        score = record.get("score")
        if record["phase"] == "train":
            # A window in which no episode ended has no score: show the last one.
            self._score = score = self._score if score is None else score
        if self._bar is not None:
            if record["phase"] == "eval":  # in the bar, not a line of its own: one bar in all
                self._eval = f"{_fmt(score)} ({EvalProtocol.of_record(record)})"
            evaluated = "" if self._eval is None else f", eval {self._eval}"
            self._bar.set_postfix_str(f"score {_fmt(self._score)}{evaluated}", refresh=False)
        elif self.mode == "lines":
            step = record["step"]
            if record["phase"] == "eval":
                length = _fmt(record.get("length"), ".0f")
                line = (
                    f"eval  step {step:>11,} | score {_fmt(score):>9} | length {length} | "
                    f"{EvalProtocol.of_record(record)}"
                )
            else:
                eta = steady_eta(self._steady, time.monotonic(), step, self.total)
                eta_s = "n/a" if eta is None else str(datetime.timedelta(seconds=int(eta)))
                percent = min(100, 100 * step // self.total)
                line = (
                    f"train step {step:>11,}/{self.total:,} ({percent:3d}%) | "
                    f"score {_fmt(score):>9} | {_fmt(record.get('sps'), '.0f')} steps/s | "
                    f"ETA {eta_s}"
                )
            print(line, flush=True)

    def message(self, text: str) -> None:
        """Prints a line without breaking the bar."""
        if self._bar is not None:
            self._bar.write(text)
        elif self.mode != "none":
            print(text, flush=True)

    def close(self) -> None:
        """Closes the bar."""
        if self._bar is not None:
            self._bar.close()

"""The progress output of a run: a tqdm bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import datetime
import math
import sys
import time
from collections.abc import Mapping
from typing import Any

from batchppo.experiment.eval_protocol import EvalProtocol


def _fmt(value: Any, spec: str = ".1f") -> str:
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


class Progress:
    """A tqdm bar (steps, steps/s, ETA, last score) on a terminal; plain lines otherwise.

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
        self._bar = None
        self._start, self._start_step = time.monotonic(), initial
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, initial=initial, unit="step", unit_scale=True, dynamic_ncols=True,
                file=sys.stdout, smoothing=0.1,
            )  # fmt: skip

    def advance(self, step: int) -> None:
        """Moves the bar to ``step``."""
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
            self._bar.set_postfix_str(f"score {_fmt(self._score)}", refresh=False)
            if record["phase"] == "eval":
                self.message(
                    f"eval at step {record['step']:,}: score {_fmt(score)} "
                    f"({EvalProtocol.of_record(record)})"
                )
        elif self.mode == "lines":
            step = record["step"]
            if record["phase"] == "eval":
                length = _fmt(record.get("length"), ".0f")
                line = (
                    f"eval  step {step:>11,} | score {_fmt(score):>9} | length {length} | "
                    f"{EvalProtocol.of_record(record)}"
                )
            else:
                elapsed = time.monotonic() - self._start
                rate = (step - self._start_step) / elapsed if elapsed > 0 else 0.0
                eta = max(self.total - step, 0) / rate if rate > 0 else float("nan")
                eta_s = "n/a" if math.isnan(eta) else str(datetime.timedelta(seconds=int(eta)))
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

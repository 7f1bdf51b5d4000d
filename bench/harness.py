"""What the side-by-side bench scripts share.

A script names its sides (``Side``: a name and what one round of it runs) and calls
``compare``, which runs every side once a round in an order reversed every other round, so
that a drift in the machine's speed falls on all sides alike. The ``Result`` holds a row per
side and round (``{**reading, "side", "round"}``, in the order run) and gives each side's
readings, their median or best, its ratio to a baseline side, and the ratios round by round.
``run_for`` and ``time_calls`` are the timing loops. A side that must not share a process with
the others (a compiler's caches, threads, a native abort) runs through ``spawn``: the script
runs itself as a worker with a time-out and prints its figures as a JSON line. ``write_json``
records the figures beside the run's date, command, commit and machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import psutil

ROOT = Path(__file__).resolve().parent.parent
VALUE = "value"
"""The key of a reading that a side's round returns as a bare number."""
SUMMARIES = {"median": statistics.median, "max": max, "min": min}
"""How ``Result.figure`` sums a side's readings up."""
PROVENANCE = ("date", "command", "commit", "machine")
"""The keys ``write_json`` adds beside a script's own figures."""


class Side(NamedTuple):
    """One side of a comparison.

    Attributes:
        name: Its name in the rows and ratios.
        run: One round of it, called with the round's index (warm-up calls: -1, -2, ...): a
            figure, or a mapping of them (one with ``error`` measured nothing).
    """

    name: str
    run: Callable[[int], float | Mapping[str, Any]]


@dataclasses.dataclass
class Result:
    """Every side's readings of one comparison.

    Attributes:
        names: The sides, in the order given to ``compare``.
        rows: One per side and round, in the order run: its reading, ``side`` and ``round``.
    """

    names: list[str]
    rows: list[dict[str, Any]]

    def readings(self, side: str) -> list[dict[str, Any]]:
        """``side``'s rows that measured (no ``error``), by round."""
        found = [r for r in self.rows if r["side"] == side and "error" not in r]
        return sorted(found, key=lambda r: r["round"])

    def values(self, side: str, key: str = VALUE) -> list[float]:
        """``side``'s figure ``key`` in every round that measured it, by round."""
        return [r[key] for r in self.readings(side) if r.get(key) is not None]

    def figure(self, side: str, key: str = VALUE, how: str = "median") -> float | None:
        """``side``'s ``key`` over its rounds, summed up by ``how`` (``SUMMARIES``); None where
        no round measured it."""
        if how not in SUMMARIES:
            raise ValueError(f"how={how!r}: use {', '.join(SUMMARIES)}")
        values = self.values(side, key)
        return SUMMARIES[how](values) if values else None

    def median(self, side: str, key: str = VALUE) -> float | None:
        """The median of ``side``'s ``key`` over its rounds (``figure``)."""
        return self.figure(side, key)

    def best(self, side: str, key: str = VALUE, lower: bool = False) -> float | None:
        """``side``'s highest ``key``, or with ``lower`` its lowest (``figure``)."""
        return self.figure(side, key, "min" if lower else "max")

    def best_row(self, side: str, key: str = VALUE) -> dict[str, Any] | None:
        """The row of ``side``'s highest ``key``; None where no round measured it."""
        rows = [r for r in self.readings(side) if r.get(key) is not None]
        return max(rows, key=lambda r: r[key]) if rows else None

    def ratios(self, baseline: str, key: str = VALUE, how: str = "median") -> dict[str, float]:
        """Every other side's ``figure`` over ``baseline``'s, where both measured it."""
        base = self.figure(baseline, key, how)
        found = {side: self.figure(side, key, how) for side in self.names if side != baseline}
        return {side: v / base for side, v in found.items() if v is not None and base}

    def round_ratios(self, side: str, baseline: str, key: str = VALUE) -> list[float]:
        """``side``'s ``key`` over ``baseline``'s round by round (the two ran back to back),
        in the rounds where both measured it."""
        theirs = {r["round"]: r[key] for r in self.readings(baseline) if r.get(key)}
        mine = [r for r in self.readings(side) if r.get(key) is not None]
        return [r[key] / theirs[r["round"]] for r in mine if r["round"] in theirs]


def compare(
    sides: Sequence[Side],
    rounds: int,
    warmup: int = 0,
    *,
    catch: tuple[type[BaseException], ...] = (),
    on_row: Callable[[dict[str, Any], Result], None] | None = None,
) -> Result:
    """Runs every side once a round, the order reversed every other round, after ``warmup``
    untimed calls of each (rounds -1, -2, ..., alternating likewise).

    Args:
        sides: The sides, each with a name of its own.
        rounds: Rounds of every side.
        warmup: Calls of each side before the rounds, their readings dropped.
        catch: Exceptions that end only the round raising them: its row holds their ``error``.
        on_row: Called with each row once measured and the result so far (to print it, or to
            write what a run cut short has measured).
    """
    by_name = {side.name: side for side in sides}
    if len(by_name) != len(sides):
        raise ValueError(f"sides {[s.name for s in sides]}: each needs a name of its own")
    result = Result(list(by_name), [])

    def order(i: int) -> list[str]:
        return result.names if i % 2 == 0 else result.names[::-1]

    for i in range(warmup):
        for name in order(i):
            by_name[name].run(-1 - i)
    for i in range(rounds):
        for name in order(i):
            try:
                reading = by_name[name].run(i)
            except catch as error:
                reading = {"error": str(error)}
            if not isinstance(reading, Mapping):
                reading = {VALUE: reading}
            result.rows.append({**reading, "side": name, "round": i})
            if on_row:
                on_row(result.rows[-1], result)
    return result


class Timing(NamedTuple):
    """What ``run_for`` did: ``work`` units (env steps) in ``wall_s`` seconds, and the CPU
    seconds of this process and its children meanwhile (``cpu_s``; None where not asked)."""

    work: float
    wall_s: float
    cpu_s: float | None = None

    @property
    def rate(self) -> float:
        """Work per wall-clock second."""
        return self.work / self.wall_s

    @property
    def cpu_us(self) -> float:
        """CPU microseconds per unit of work."""
        return self.cpu_s / self.work * 1e6


def cpu_seconds() -> float:
    """CPU seconds used so far by this process (every thread) and its live descendants: its own
    from ``time.process_time``, its children's from psutil (10 ms ticks)."""
    total = time.process_time()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def run_for(once: Callable[[], float], seconds: float, cpu: bool = False) -> Timing:
    """Calls ``once`` (returning the work it did) until ``seconds`` have passed, at least once;
    with ``cpu``, the CPU time of this process and its children too (``cpu_seconds``)."""
    cpu_start = cpu_seconds() if cpu else 0.0
    work, start = 0.0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or not work:
        work += once()
    return Timing(work, elapsed, cpu_seconds() - cpu_start if cpu else None)


class Calls(NamedTuple):
    """``time_calls``'s timed calls: each one's ``wall_s`` and ``cpu_s`` (this process), and
    what the ``last`` returned."""

    wall_s: list[float]
    cpu_s: list[float]
    last: Any


def time_calls(call: Callable[[], Any], repeats: int, warmup: int = 0) -> Calls:
    """``repeats`` timed calls of ``call`` after ``warmup`` untimed ones (a compiled program's
    first call); ``call`` waits for its result (``jax.block_until_ready``)."""
    last = None
    for _ in range(warmup):
        last = call()
    wall, cpu = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        last = call()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    return Calls(wall, cpu, last)


def time_program(train: Callable[[Any], Any], key: Any, repeats: int) -> dict[str, Any]:
    """``compile_s`` of ``jax.jit(train)`` on ``key``, then ``repeats`` calls of it (each call's
    ``run_s`` and ``cpu_s``) and the last one's ``output``."""
    import jax

    start = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - start
    calls = time_calls(lambda: jax.block_until_ready(compiled(key)), repeats)
    return {"compile_s": compile_s, "run_s": calls.wall_s, "cpu_s": calls.cpu_s,
            "output": calls.last}  # fmt: skip


class Finished(NamedTuple):
    """A process ``run_process`` ran: its ``exit`` status (None: killed past its ``timeout``),
    ``stdout``, ``stderr``, wall-clock ``seconds`` and its tree's ``cpu_seconds``."""

    exit: int | None
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float
    timeout: float

    def failure(self) -> dict[str, Any] | None:
        """None where it exited 0; else ``exit`` and ``error``: the time-out, or ``exit N:``
        and the end of its stderr, after a native abort's own line."""
        if self.exit is None:
            return {"error": f"timed out after {self.timeout:.0f} s", "exit": None}
        if self.exit == 0:
            return None
        lines = self.stderr.strip().splitlines()
        # absl's "F<date> ... Check failed: ..." comes before a long stack: keep it.
        fatal = next((f"{ln} ... " for ln in lines if re.match(r"F\d{4} ", ln)), "")
        tail = lines[-1:]
        for line in reversed(lines[:-1]):
            if sum(map(len, tail)) + len(line) > 2000:
                break
            tail.insert(0, line)
        return {"error": f"exit {self.exit}: {fatal}{' | '.join(tail)}", "exit": self.exit}


def _tree_cpu(root: psutil.Process, seen: dict[int, float]) -> None:
    """Records in ``seen`` the CPU seconds (user + system) of ``root`` and its descendants."""
    with contextlib.suppress(psutil.Error):
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                seen[proc.pid] = max(seen.get(proc.pid, 0.0), sum(proc.cpu_times()[:2]))


def _stop(proc: subprocess.Popen, grace: float = 60.0) -> None:
    """Stops a run the bench leaves: SIGTERM (a batchppo run saves after its iteration), SIGKILL
    after ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_process(
    command: Sequence[str],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    poll: float = 0.5,
) -> Finished:
    """Runs ``command`` (``env``: its whole environment), sampling its process tree's CPU time
    every ``poll`` seconds; past ``timeout`` seconds it and what it started are killed.

    Its output goes to files, not pipes: nothing reads a pipe until the run ends, and once one
    holds 64 KiB the run's next print would block it for good. Where this process is stopped
    (Ctrl-C, or SIGTERM as ``SystemExit``), the run is stopped too.
    """
    start, cpu = time.monotonic(), {}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        with subprocess.Popen(list(command), stdout=out, stderr=err, env=env, cwd=cwd) as proc:
            root = psutil.Process(proc.pid)
            try:
                while proc.poll() is None:
                    _tree_cpu(root, cpu)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(poll)
                    if proc.returncode is None and time.monotonic() - start > timeout:
                        for child in [*root.children(recursive=True), root]:
                            with contextlib.suppress(psutil.Error):
                                child.kill()
                        proc.wait()
                        code = None
                        break
                else:
                    code = proc.returncode
            except BaseException:  # the run must not outlive the bench
                _stop(proc)
                raise
        out.seek(0)
        err.seek(0)
        text = out.read(), err.read()
    return Finished(code, *text, time.monotonic() - start, sum(cpu.values()), timeout)


def python_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, ``env`` set over it, this repository first on
    ``PYTHONPATH``."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, **(env or {}), "PYTHONPATH": path}


def json_line(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object (a worker's result); None if none is."""
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def spawn(
    script: str | os.PathLike,
    args: list[str],
    timeout: float,
    *,
    env: dict[str, str] | None = None,
    any_exit: bool = False,
    timed: bool = False,
) -> dict[str, Any]:
    """Runs ``python script *args`` (``python_env``, ``env`` over it): a side in a process of
    its own, which reuses no other side's compilation, caches or threads, and whose abort ends
    only its own process.

    Args:
        script: The bench script (it runs itself as the worker).
        args: Its arguments.
        timeout: Seconds before the process is killed.
        env: Variables set for the process (a CPU bench's ``JAX_PLATFORMS``).
        any_exit: Take the result line even from a non-zero exit (a side that printed its
            result, then failed while shutting down); its ``exit`` is added.
        timed: Add the process's wall-clock ``seconds`` and its tree's ``cpu_seconds``.

    Returns:
        Its last JSON line (``json_line``); where it timed out, exited non-zero (but for
        ``any_exit``) or printed none, its ``Finished.failure``.
    """
    command = [sys.executable, str(Path(script).resolve()), *args]
    finished = run_process(command, timeout, env=python_env(env))
    line, failure = json_line(finished.stdout), finished.failure()
    if line is not None and (failure is None or (any_exit and finished.exit is not None)):
        result = {**line, "exit": finished.exit} if failure else line
    else:
        result = failure or {"error": "exit 0: printed no JSON line", "exit": 0}
    if timed:
        result = {**result, "seconds": finished.seconds, "cpu_seconds": finished.cpu_seconds}
    return result


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``; None where it is not there). Read without
    importing JAX: a bench's parent process must not take the devices its workers use."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    names = [line.partition(":")[2].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else None


def provenance(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """When, how and where a run ran: the UTC ``date``, the ``command`` (the script's name and
    ``argv``, by default this process's arguments), this checkout's ``commit`` (``-dirty``
    where the tree has changes; None outside git) and the ``machine`` (platform, CPU model,
    cores, Python)."""
    git = ["git", "-C", str(ROOT), "describe", "--always", "--dirty"]
    try:
        commit = subprocess.run(git, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):  # no git, or a copy of the tree
        commit = None
    args = sys.argv[1:] if argv is None else list(argv)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join([Path(sys.argv[0]).name, *args]),
        "commit": commit,
        "machine": {"platform": platform.platform(), "cpu": cpu_model(),
                    "cpus": os.cpu_count(), "python": platform.python_version()},
    }  # fmt: skip


def _plain(value: Any) -> Any:
    """A figure JSON cannot hold as it is: a NumPy scalar as a float, anything else as text."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def write_json(
    path: str | os.PathLike, data: Mapping[str, Any], argv: Sequence[str] | None = None
) -> dict[str, Any]:
    """Writes ``data`` to ``path`` beside its ``provenance`` (``data``'s own keys win); returns
    what it wrote."""
    record = {**provenance(argv), **data}
    Path(path).write_text(json.dumps(record, indent=1, default=_plain) + "\n")
    return record

"""What the side-by-side bench scripts share: sides run in interleaved rounds, their readings,
medians, bests and ratios, a side in a process of its own, timing loops, and the JSON a run
writes.

A script names its sides (``Side``: a name and what one round of it runs) and calls
``compare``, which runs every side once a round, in an order reversed every other round so
that a drift in the machine's speed falls on all sides alike. Each round's figures are a row
of the ``Result`` (``{**reading, "side", "round"}``, in the order run); the result gives every
reading of a side, its median or best, each side's ratio to a baseline side, and the ratio
round by round. A side that should not share a process with the others (a compiler's caches,
threads, or a native abort that ends its process) runs through ``spawn``: the script runs
itself as a worker and prints its figures as a JSON line. ``write_json`` records the figures
with the run's date, command, commit and machine.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent

VALUE = "value"
"""The key under which a side's reading stands when its round returns a bare number."""


# --------------------------------------------------------------------------------------------
# Sides, rounds and their figures
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a comparison.

    Attributes:
        name: The side's name in the rows and ratios.
        run: One round of the side, called with the round's index (warm-up calls get -1, -2,
            ...): its figures, a number or a mapping of them; a mapping with ``"error"`` is a
            round that failed (``spawn``'s), which no figure counts.
    """

    name: str
    run: Callable[[int], float | Mapping[str, Any]]


@dataclasses.dataclass
class Result:
    """Every side's readings of one comparison.

    Attributes:
        names: The sides, in the order given to ``compare``.
        rows: One per side and round, in the order run: the side's reading with its ``side``
            and ``round``.
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

    def median(self, side: str, key: str = VALUE) -> float | None:
        """The median of ``side``'s ``key`` over its rounds; None where none measured it."""
        values = self.values(side, key)
        return statistics.median(values) if values else None

    def best(self, side: str, key: str = VALUE, lower: bool = False) -> float | None:
        """``side``'s best ``key`` over its rounds (the highest, or with ``lower`` the lowest);
        None where none measured it."""
        values = self.values(side, key)
        return (min if lower else max)(values) if values else None

    def best_row(self, side: str, key: str = VALUE, lower: bool = False) -> dict | None:
        """The row of ``side``'s best ``key`` (see ``best``); None where none measured it."""
        rows = [r for r in self.readings(side) if r.get(key) is not None]
        pick = min if lower else max
        return pick(rows, key=lambda r: r[key]) if rows else None

    def figure(self, side: str, key: str = VALUE, how: str = "median") -> float | None:
        """``side``'s ``key`` summed up over its rounds: ``how`` is ``median``, ``max`` or
        ``min``."""
        if how == "median":
            return self.median(side, key)
        if how not in ("max", "min"):
            raise ValueError(f"how={how!r}: use median, max or min")
        return self.best(side, key, lower=how == "min")

    def ratios(self, baseline: str, key: str = VALUE, how: str = "median") -> dict[str, float]:
        """Every other side's figure (``figure``) over ``baseline``'s, for the sides where both
        were measured."""
        base = self.figure(baseline, key, how)
        out = {}
        for side in self.names:
            value = self.figure(side, key, how)
            if side != baseline and value is not None and base:
                out[side] = value / base
        return out

    def round_ratios(self, side: str, baseline: str, key: str = VALUE) -> list[float]:
        """``side``'s ``key`` over ``baseline``'s round by round (the two ran back to back), for
        the rounds where both measured it."""
        theirs = {r["round"]: r[key] for r in self.readings(baseline) if r.get(key)}
        return [
            r[key] / theirs[r["round"]]
            for r in self.readings(side)
            if r.get(key) is not None and r["round"] in theirs
        ]


def order(names: Sequence[str], round_: int) -> list[str]:
    """The sides in the order round ``round_`` runs them: as given, reversed every other
    round."""
    return list(names) if round_ % 2 == 0 else list(names)[::-1]


def compare(
    sides: Sequence[Side],
    rounds: int,
    warmup: int = 0,
    *,
    catch: tuple[type[BaseException], ...] = (),
    on_row: Callable[[dict[str, Any], Result], None] | None = None,
) -> Result:
    """Runs every side once a round, alternating the order (``order``), after ``warmup``
    untimed calls of each side (rounds -1, -2, ..., in the same alternation).

    Args:
        sides: The sides; their names must differ.
        rounds: Rounds of every side.
        warmup: Calls of each side before the rounds, whose readings are dropped.
        catch: Exceptions that end only the round they are raised in: its row gets their
            ``error`` and the other sides go on.
        on_row: Called after each measured round with its row and the result so far (to print
            it, or to write what a run cut short has measured).

    Returns:
        The rows of every side and round.
    """
    by_name = {side.name: side for side in sides}
    if len(by_name) != len(sides):
        raise ValueError(f"sides {[s.name for s in sides]}: each needs a name of its own")
    result = Result(list(by_name), [])
    for i in range(warmup):
        for name in order(result.names, i):
            by_name[name].run(-1 - i)
    for round_ in range(rounds):
        for name in order(result.names, round_):
            try:
                reading = by_name[name].run(round_)
            except catch as error:
                reading = {"error": str(error)}
            if not isinstance(reading, Mapping):
                reading = {VALUE: reading}
            row = {**reading, "side": name, "round": round_}
            result.rows.append(row)
            if on_row:
                on_row(row, result)
    return result


# --------------------------------------------------------------------------------------------
# Timing loops
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timing:
    """What a timed loop did.

    Attributes:
        work: The units of work done (env steps, summed over the batch).
        wall_s: Its wall-clock seconds.
        cpu_s: The CPU seconds of this process and its children meanwhile (``cpu_seconds``);
            None where not measured.
    """

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
        if self.cpu_s is None:
            raise ValueError("this timing measured no CPU time (run_for(..., cpu=True))")
        return self.cpu_s / self.work * 1e6


def cpu_seconds(me: psutil.Process | None = None) -> float:
    """CPU seconds used so far by this process (every thread) and its live descendants.

    This process's own time is ``time.process_time``'s (fine-grained); its children's is
    psutil's, in clock ticks (10 ms): a timing of a second or more keeps that error small.
    """
    total = time.process_time()
    for child in (me or psutil.Process()).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def run_for(once: Callable[[], float], seconds: float, cpu: bool = False) -> Timing:
    """Calls ``once`` (which returns the work it did) until ``seconds`` of wall time have
    passed, at least once; with ``cpu``, the CPU time of this process and its children too."""
    me = psutil.Process() if cpu else None
    cpu_start = cpu_seconds(me) if cpu else None
    work, start = 0.0, time.perf_counter()
    while True:
        work += once()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            used = cpu_seconds(me) - cpu_start if cpu else None
            return Timing(work, elapsed, used)


@dataclasses.dataclass(frozen=True)
class Calls:
    """Timed calls of one function.

    Attributes:
        wall_s: Each timed call's wall-clock seconds.
        cpu_s: Each timed call's CPU seconds (this process, every thread).
        last: What the last call returned.
    """

    wall_s: list[float]
    cpu_s: list[float]
    last: Any


def time_calls(call: Callable[[], Any], repeats: int, warmup: int = 0) -> Calls:
    """``repeats`` timed calls of ``call`` after ``warmup`` untimed ones (a compiled program's
    first call; ``call`` waits for its result, e.g. with ``jax.block_until_ready``)."""
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
    """A JAX program's compilation (``jax.jit(train).lower(key).compile()``) and ``repeats``
    calls of it on ``key``, each waited for.

    Returns:
        ``compile_s``, each call's ``run_s`` and ``cpu_s``, and the last call's ``output``.
    """
    import jax

    start = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - start
    calls = time_calls(lambda: jax.block_until_ready(compiled(key)), repeats)
    return {
        "compile_s": compile_s,
        "run_s": calls.wall_s,
        "cpu_s": calls.cpu_s,
        "output": calls.last,
    }


# --------------------------------------------------------------------------------------------
# A side in a process of its own
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finished:
    """A process ``run_process`` ran.

    Attributes:
        exit: Its exit status; None where it was killed past its time.
        stdout: What it printed (None where it printed to this process's output).
        stderr: What it printed to stderr (None likewise).
        seconds: Its wall-clock seconds.
        cpu_seconds: The CPU seconds of its process tree, sampled while it ran.
        timeout: The seconds it was given.
    """

    exit: int | None
    stdout: str | None
    stderr: str | None
    seconds: float
    cpu_seconds: float
    timeout: float

    def failure(self) -> dict[str, Any] | None:
        """None where it exited 0; else ``error`` (the time-out, or ``exit N:`` and the end of
        its stderr, a native abort's own line first) and ``exit``."""
        if self.exit is None:
            return {"error": f"timed out after {self.timeout:.0f} s", "exit": None}
        if self.exit == 0:
            return None
        lines = (self.stderr or "").strip().splitlines()
        # A native abort's own line (absl's "F<date> ... Check failed: ...") comes before a
        # long stack: keep it beside the stderr's end.
        fatal = next((ln for ln in lines if re.match(r"F\d{4} ", ln)), None)
        tail, size = [], 0
        for line in reversed(lines):
            size += len(line)
            if tail and size > 2000:
                break
            tail.insert(0, line)
        text = f"{fatal} ... " if fatal else ""
        return {"error": f"exit {self.exit}: {text}{' | '.join(tail)}", "exit": self.exit}


def _sample_tree(root: psutil.Process, seen: dict[int, float]) -> None:
    """Records in ``seen`` the CPU seconds (user + system) of ``root`` and its descendants."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        seen[proc.pid] = max(seen.get(proc.pid, 0.0), times.user + times.system)


def _stop(proc: subprocess.Popen, grace: float = 60.0) -> None:
    """Stops a run the bench is leaving: SIGTERM (a batchppo run saves after its iteration),
    then SIGKILL if it has not ended within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kills a run past its time and the processes it started."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    proc.kill()
    proc.wait()


@contextlib.contextmanager
def _outputs(capture: bool) -> Iterator[tuple[Any, Any]]:
    if not capture:
        yield None, None
        return
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        yield out, err


def run_process(
    command: Sequence[str],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    capture: bool = True,
    poll: float = 0.5,
) -> Finished:
    """Runs ``command``, sampling its process tree's CPU time every ``poll`` seconds, and kills
    it (and what it started) past ``timeout`` seconds.

    Its output goes to temporary files, not pipes: nothing reads a pipe until the run ends, and
    once one holds 64 KiB the run's next print would block it for good. Where this process is
    stopped meanwhile (Ctrl-C, or SIGTERM turned into ``SystemExit``), the run is stopped too.

    Args:
        command: The program and its arguments.
        timeout: Seconds before it is killed.
        env: Its whole environment (default: this process's).
        cwd: Its working directory.
        capture: Keep its output (``stdout``, ``stderr``); False: it prints to this process's.
        poll: Seconds between samples of its CPU time.
    """
    start = time.monotonic()
    cpu: dict[int, float] = {}
    with _outputs(capture) as (out, err):
        with subprocess.Popen(
            list(command), stdout=out, stderr=err, text=True, env=env, cwd=cwd
        ) as proc:
            root = psutil.Process(proc.pid)
            timed_out = False
            try:
                while True:
                    _sample_tree(root, cpu)
                    try:
                        proc.wait(poll)
                        break
                    except subprocess.TimeoutExpired:
                        if time.monotonic() - start > timeout:
                            timed_out = True
                            _kill_tree(proc)
                            break
            except BaseException:  # the run must not outlive the bench
                _stop(proc)
                raise
        seconds = time.monotonic() - start
        stdout = stderr = None
        if capture:
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
    code = None if timed_out else proc.returncode
    return Finished(code, stdout, stderr, seconds, sum(cpu.values()), timeout)


def python_env(env: Mapping[str, str] | None = None, path: str | os.PathLike = ROOT) -> dict:
    """This process's environment with ``env`` set over it and ``path`` (this repository)
    first on ``PYTHONPATH``."""
    return {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")]),
    }


def json_line(text: str | None) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object (a worker's result); None where none
    is."""
    lines = [ln for ln in (text or "").splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def result_line(finished: Finished, any_exit: bool = False) -> dict[str, Any]:
    """``finished``'s result line (``json_line``); where it timed out, exited non-zero (unless
    ``any_exit``: then its ``exit`` is added) or printed none, its ``failure``."""
    line = json_line(finished.stdout)
    if line is not None and any_exit and finished.exit:
        return {**line, "exit": finished.exit}
    failure = finished.failure()
    if failure or line is None:
        return failure or {"error": "exit 0: printed no JSON line", "exit": 0}
    return line


def spawn(
    script: str | os.PathLike,
    args: list[str],
    timeout: float,
    *,
    env: dict[str, str] | None = None,
    any_exit: bool = False,
) -> dict[str, Any]:
    """Runs ``python script *args`` with this repository first on ``PYTHONPATH``: a side in a
    process of its own, which reuses no other side's compilation, caches or threads, and whose
    abort (a compiler's check failure, a segfault) ends only its own process.

    Args:
        script: The bench script (it runs itself as the worker).
        args: Its arguments.
        timeout: Seconds before the process is killed.
        env: Variables set for the process over this one's (a CPU bench's ``JAX_PLATFORMS``).
        any_exit: Take the result line even from a non-zero exit (a side that printed its
            result and then failed while shutting down); its ``exit`` is added.

    Returns:
        Its result line (``result_line``).
    """
    command = [sys.executable, str(Path(script).resolve()), *args]
    return result_line(run_process(command, timeout, env=python_env(env)), any_exit)


# --------------------------------------------------------------------------------------------
# What a run writes
# --------------------------------------------------------------------------------------------

PROVENANCE = ("date", "command", "commit", "machine")
"""The keys ``write_json`` adds beside a script's own figures."""


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit() -> str | None:
    """This checkout's commit (``+dirty`` where the tree has changes), None outside git."""
    try:
        head, dirty = _git("rev-parse", "--short", "HEAD"), _git("status", "--porcelain", "-uno")
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}+dirty" if dirty else head


def provenance(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """When, how and where a run ran: its UTC ``date``, its ``command`` (the script's name and
    ``argv``, by default this process's arguments), the ``commit`` of this checkout and the
    ``machine`` (platform, cores, Python)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join([Path(sys.argv[0]).name, *args]),
        "commit": _commit(),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }


def _plain(value: Any) -> Any:
    """A figure JSON cannot hold as it is (a NumPy scalar: a float; anything else: text)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def write_json(
    path: str | os.PathLike, data: Mapping[str, Any], argv: Sequence[str] | None = None
) -> dict[str, Any]:
    """Writes ``data`` to ``path`` with its ``provenance`` beside it (``data``'s own keys win).

    Returns:
        What was written.
    """
    record = {**provenance(argv), **data}
    Path(path).write_text(json.dumps(record, indent=1, default=_plain) + "\n")
    return record

"""What the side-by-side bench scripts share: one side run in a Python process of its own.

A side that imports its library in a fresh process reuses no other side's compilation, caches
or threads, and a side that aborts (a compiler's check failure, a segfault) ends only its own
process. The script runs itself with ``--worker`` and prints its result as a JSON line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def spawn(
    script: str | os.PathLike,
    args: list[str],
    timeout: float,
    *,
    env: dict[str, str] | None = None,
    any_exit: bool = False,
) -> dict[str, Any]:
    """Runs ``python script *args`` with this repository first on ``PYTHONPATH``.

    Args:
        script: The bench script (it runs itself as the worker).
        args: Its arguments.
        timeout: Seconds before the process is killed.
        env: Variables set for the process over this one's (a CPU bench's ``JAX_PLATFORMS``).
        any_exit: Take the result line even from a non-zero exit (a side that printed its
            result and then failed while shutting down); its ``exit`` is added.

    Returns:
        The last line of its stdout that is a JSON object; where it timed out, exited
        non-zero (unless ``any_exit``) or printed none, ``{"error": ...}`` (the time-out, or
        ``exit N:`` and the end of its stderr) with ``exit`` (None after a time-out).
    """
    env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, str(Path(script).resolve()), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "exit": None}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if lines and any_exit and proc.returncode:
        return {**json.loads(lines[-1]), "exit": proc.returncode}
    if proc.returncode or not lines:
        # A native abort's own line (absl's "F<date> ... Check failed: ...") comes before a
        # long stack: keep it beside the stderr's end.
        fatal = next((ln for ln in proc.stderr.splitlines() if re.match(r"F\d{4} ", ln)), None)
        tail = proc.stderr.strip()[-2000:]
        return {
            "error": f"exit {proc.returncode}: {fatal + ' ... ' if fatal else ''}{tail}",
            "exit": proc.returncode,
        }
    return json.loads(lines[-1])

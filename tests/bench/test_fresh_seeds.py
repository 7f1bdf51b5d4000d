"""bench/fresh_seeds.sh: refuses to start without the project's batchppo, in one line, and
prints its header comment where no command is given (its commands' tests, with the runs
they stage: tests/bench/test_rundata.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_batchppo_on_path_it_says_to_activate_the_virtualenv(tmp_path):
    # A PATH with bash and the system tools but no virtualenv: neither `batchppo` nor a
    # `python` that imports it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "sed"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "fresh_seeds.sh"), "publish", "hopper_fast"],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "fresh_seeds.sh: no batchppo on PATH: activate the project's virtualenv "
        "(. .venv/bin/activate) and run it again"
    ]
    assert done.stdout == ""


def test_without_a_command_it_prints_its_whole_header_comment():
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # the venv's batchppo first
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "fresh_seeds.sh")],
        env={**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = (ROOT / "bench" / "fresh_seeds.sh").read_text().splitlines()
    header = lines[1 : lines.index("set -euo pipefail")]
    assert done.returncode == 2
    assert done.stdout.splitlines() == header

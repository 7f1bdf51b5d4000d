"""bench/workers.py: a side in a process of its own, its result line, its exit and time-out."""

from __future__ import annotations

import textwrap

from benchlib import load_bench

SIDE = textwrap.dedent(
    """
    import json, os, sys, time
    what = sys.argv[1]
    if what == "sleep":
        time.sleep(30)
    print("a log line")
    print(json.dumps({"first": 1}))
    print(json.dumps({"platforms": os.environ.get("JAX_PLATFORMS"), "path": sys.path[1]}))
    if what == "fail":
        print("shutting down went wrong", file=sys.stderr)
        sys.exit(3)
    if what == "abort":  # a native abort: absl's fatal line, then a stack longer than the tail kept
        print("F1127 12:44:43.777259 4641 shape_util.cc:757] Check failed: x", file=sys.stderr)
        print("    @ frame\\n" * 400, file=sys.stderr)
        sys.exit(134)
    """
)


def _side(tmp_path):
    script = tmp_path / "side.py"
    script.write_text(SIDE)
    return load_bench("workers"), script


def test_the_last_json_line_is_the_result_with_the_repository_on_the_path(tmp_path):
    workers, script = _side(tmp_path)
    result = workers.spawn(script, ["ok"], timeout=60, env={"JAX_PLATFORMS": "cpu"})
    assert result == {"platforms": "cpu", "path": str(workers.ROOT)}


def test_a_failed_exit_is_an_error_unless_any_exit_keeps_the_result(tmp_path):
    workers, script = _side(tmp_path)
    failed = workers.spawn(script, ["fail"], timeout=60)
    assert failed == {"error": "exit 3: shutting down went wrong", "exit": 3}
    kept = workers.spawn(script, ["fail"], timeout=60, any_exit=True)
    assert kept["exit"] == 3 and set(kept) == {"platforms", "path", "exit"}


def test_a_native_abort_keeps_its_fatal_line_before_the_end_of_the_stack(tmp_path):
    workers, script = _side(tmp_path)
    error = workers.spawn(script, ["abort"], timeout=60)["error"]
    assert error.startswith(
        "exit 134: F1127 12:44:43.777259 4641 shape_util.cc:757] Check failed: x ... "
    )
    assert error.endswith("    @ frame")


def test_a_side_past_its_time_is_killed_and_reported(tmp_path):
    workers, script = _side(tmp_path)
    assert workers.spawn(script, ["sleep"], timeout=2) == {
        "error": "timed out after 2 s",
        "exit": None,
    }

"""The workers' stderr forwarded to the parent's: nothing a worker wrote is lost at close."""

from __future__ import annotations

import os
import time

from envs_testlib import wait_until

from batchppo.envs.workers.stderr_tail import StderrTails


def test_close_forwards_and_keeps_what_the_thread_had_no_time_to_read(capfd):
    tails = StderrTails()
    # The reader thread finds the pipe ready but reads nothing: a machine too busy to run it.
    tails._read = lambda slot, read_end: time.sleep(0.01)
    read_fd, write_fd = os.pipe()
    tails.add(3, os.fdopen(read_fd, "rb", buffering=0))
    os.write(write_fd, b"MuJoCo warning: one\nand the last line")
    os.close(write_fd)  # the worker has exited
    tails.close(drain_s=0.0)
    # The unended last line goes out ended, so the next worker's output starts a line.
    assert capfd.readouterr().err == "MuJoCo warning: one\nand the last line\n"
    assert tails.tail(3) == ["MuJoCo warning: one", "and the last line"]


def test_close_does_not_wait_for_a_pipe_another_process_holds_open(capfd):
    tails = StderrTails()
    read_fd, write_fd = os.pipe()
    tails.add(0, os.fdopen(read_fd, "rb", buffering=0))
    os.write(write_fd, b"before close\n")
    tails.close(drain_s=0.0)  # the write end stays open: the drain takes what is there now
    os.close(write_fd)
    assert capfd.readouterr().err == "before close\n"


def taken(tails: StderrTails, slot: int) -> list[str]:
    """What the reader thread has taken from worker ``slot``'s pipe: its lines, then the start
    of its next line."""
    with tails._lock:
        return [*tails._tails[slot], tails._partial[slot]]


def test_lines_of_two_workers_are_forwarded_whole(capfd):
    tails = StderrTails()
    pipes = [os.pipe() for _ in range(2)]
    for slot, (read_fd, _) in enumerate(pipes):
        tails.add(slot, os.fdopen(read_fd, "rb", buffering=0))
    (_, first), (_, second) = pipes
    # The reader takes each write alone, in this order: the second worker's line comes between
    # the two parts of the first's.
    os.write(first, b"MuJoCo warning: Nan, ")
    wait_until(lambda: taken(tails, 0) == ["MuJoCo warning: Nan, "], "the first part's read")
    os.write(second, b"MuJoCo warning: Nan, Inf\n")
    wait_until(lambda: taken(tails, 1) == ["MuJoCo warning: Nan, Inf", ""], "the line's read")
    os.write(first, b"Inf\nits last line")
    os.close(first)
    os.close(second)
    tails.close(drain_s=5.0)
    err = capfd.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 3  # three lines, each ended
    assert sorted(err.splitlines()) == [
        "MuJoCo warning: Nan, Inf",
        "MuJoCo warning: Nan, Inf",
        "its last line",
    ]
    assert tails.tail(0) == ["MuJoCo warning: Nan, Inf", "its last line"]
    assert tails.tail(1) == ["MuJoCo warning: Nan, Inf"]

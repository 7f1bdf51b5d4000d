"""bench/harness.py: rounds in alternating order, readings, medians, bests and ratios (fake
sides whose figures are given, never timed), a side in a process of its own, and the JSON."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from benchlib import load_bench


def harness():
    return load_bench("harness")


def fake(calls: list, name: str, figures: dict[int, object]):
    """A side that notes each call and returns the figure given for its round."""

    def run(round_: int):
        calls.append((name, round_))
        return figures[round_]

    return harness().Side(name, run)


def test_rounds_alternate_the_order_after_the_warmup_calls():
    h, calls = harness(), []
    figures = {-2: 0.0, -1: 0.0, 0: 1.0, 1: 2.0, 2: 3.0}
    sides = [fake(calls, name, figures) for name in ("a", "b", "c")]
    result = h.compare(sides, rounds=3, warmup=2)
    assert calls == [
        ("a", -1), ("b", -1), ("c", -1),  # warm-up 1
        ("c", -2), ("b", -2), ("a", -2),  # warm-up 2, reversed
        ("a", 0), ("b", 0), ("c", 0),
        ("c", 1), ("b", 1), ("a", 1),
        ("a", 2), ("b", 2), ("c", 2),
    ]  # fmt: skip
    # Warm-up readings are dropped; rows stand in the order run, a bare number as "value".
    assert [(r["side"], r["round"], r["value"]) for r in result.rows[:4]] == [
        ("a", 0, 1.0), ("b", 0, 1.0), ("c", 0, 1.0), ("c", 1, 2.0),
    ]  # fmt: skip
    assert result.names == ["a", "b", "c"] and len(result.rows) == 9


def test_medians_bests_and_ratios_of_given_readings():
    h, calls = harness(), []
    peer = fake(calls, "peer", {0: {"sps": 100.0, "s": 9.0}, 1: {"sps": 300.0, "s": 7.0},
                                2: {"sps": 200.0, "s": 8.0}})  # fmt: skip
    ours = fake(calls, "ours", {0: {"sps": 150.0, "s": 4.0}, 1: {"sps": 450.0, "s": 6.0},
                                2: {"sps": 500.0, "s": 5.0}})  # fmt: skip
    result = h.compare([peer, ours], rounds=3)
    assert result.values("ours", "sps") == [150.0, 450.0, 500.0]
    assert (result.median("peer", "sps"), result.median("ours", "sps")) == (200.0, 450.0)
    assert result.best("peer", "sps") == 300.0 and result.best("ours", "s", lower=True) == 4.0
    assert result.best_row("ours", "sps") == {"sps": 500.0, "s": 5.0, "side": "ours", "round": 2}
    assert result.ratios("peer", "sps") == {"ours": 2.25}  # 450 / 200
    assert result.ratios("peer", "sps", how="max") == {"ours": 500.0 / 300.0}
    assert result.ratios("peer", "s", how="min") == {"ours": 4.0 / 7.0}
    assert result.round_ratios("ours", "peer", "sps") == [1.5, 1.5, 2.5]
    with pytest.raises(ValueError, match="how='mean': use median, max, min"):
        result.figure("ours", "sps", how="mean")


def test_a_failed_round_is_a_row_that_no_figure_counts():
    h, calls = harness(), []
    peer = fake(calls, "peer", {0: 10.0, 1: 20.0})

    def flaky(round_: int):
        if round_ == 0:
            raise RuntimeError("exit 1: out of memory")
        return {"value": 30.0}

    result = h.compare([peer, h.Side("ours", flaky), fake(calls, "off", {0: {"error": "x"},
                        1: {"error": "y"}})], rounds=2, catch=(RuntimeError,))  # fmt: skip
    assert result.rows[1] == {"error": "exit 1: out of memory", "side": "ours", "round": 0}
    assert result.values("ours") == [30.0] and result.median("off") is None
    assert result.round_ratios("ours", "peer") == [1.5]  # round 1 only
    assert result.ratios("peer") == {"ours": 2.0}  # 30 / median(10, 20); "off" measured none
    with pytest.raises(RuntimeError):  # not caught: it ends the comparison
        h.compare([h.Side("ours", flaky)], rounds=1)


def test_on_row_sees_each_row_and_the_result_so_far():
    h, calls, seen = harness(), [], []
    sides = [fake(calls, n, {0: 1.0, 1: 2.0}) for n in ("a", "b")]
    h.compare(sides, rounds=2, on_row=lambda row, res: seen.append((row["side"], len(res.rows))))
    assert seen == [("a", 1), ("b", 2), ("b", 3), ("a", 4)]
    with pytest.raises(ValueError, match="each needs a name of its own"):
        h.compare([sides[0], sides[0]], rounds=1)


def test_run_for_sums_the_work_until_the_time_is_up(monkeypatch):
    h = harness()
    clock = iter([10.0, 10.0, 10.4, 10.8, 11.2])  # the start, then before each call
    monkeypatch.setattr(h.time, "perf_counter", lambda: next(clock))
    timing = h.run_for(lambda: 64.0, seconds=1.0)
    assert (timing.work, timing.wall_s, timing.cpu_s) == (192.0, pytest.approx(1.2), None)
    assert timing.rate == pytest.approx(160.0)
    assert h.Timing(work=500.0, wall_s=1.0, cpu_s=0.002).cpu_us == pytest.approx(4.0)
    clock = iter([0.0, 0.0, 5.0])  # past its time before the first call: one call all the same
    assert h.run_for(lambda: 8.0, seconds=0.0).work == 8.0


def test_time_calls_times_only_the_calls_after_the_warmup(monkeypatch):
    h = harness()
    clock = iter([0.0, 1.5, 2.0, 4.0])  # two timed calls: 1.5 s and 2 s
    monkeypatch.setattr(h.time, "perf_counter", lambda: next(clock))
    counter = iter(range(10))
    calls = h.time_calls(lambda: next(counter), repeats=2, warmup=3)
    assert calls.wall_s == [1.5, 2.0] and len(calls.cpu_s) == 2 and calls.last == 4


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


def _script(tmp_path):
    script = tmp_path / "side.py"
    script.write_text(SIDE)
    return script


def test_spawn_takes_the_last_json_line_with_the_repository_on_the_path(tmp_path):
    h = harness()
    result = h.spawn(_script(tmp_path), ["ok"], timeout=60, env={"JAX_PLATFORMS": "cpu"})
    assert result == {"platforms": "cpu", "path": str(h.ROOT)}


def test_a_failed_exit_is_an_error_unless_any_exit_keeps_the_result(tmp_path):
    h, script = harness(), _script(tmp_path)
    failed = h.spawn(script, ["fail"], timeout=60)
    assert failed == {"error": "exit 3: shutting down went wrong", "exit": 3}
    kept = h.spawn(script, ["fail"], timeout=60, any_exit=True)
    assert kept["exit"] == 3 and set(kept) == {"platforms", "path", "exit"}


def test_a_native_abort_keeps_its_fatal_line_before_the_end_of_the_stack(tmp_path):
    error = harness().spawn(_script(tmp_path), ["abort"], timeout=60)["error"]
    assert error.startswith(
        "exit 134: F1127 12:44:43.777259 4641 shape_util.cc:757] Check failed: x ... "
    )
    assert error.endswith("    @ frame") and len(error) < 2700  # the stack's end only


def test_a_side_past_its_time_is_killed_and_reported(tmp_path):
    assert harness().spawn(_script(tmp_path), ["sleep"], timeout=1) == {
        "error": "timed out after 1 s",
        "exit": None,
    }


def test_a_stopped_bench_stops_the_run_it_was_timing(tmp_path, monkeypatch):
    h = harness()
    real_sample, calls = h._tree_cpu, []

    def sample_then_stop(root, seen):  # the bench's first sample gets SIGTERM (SystemExit)
        calls.append(root)
        if len(calls) == 1:
            raise SystemExit(143)
        real_sample(root, seen)

    monkeypatch.setattr(h, "_tree_cpu", sample_then_stop)
    finished = tmp_path / "finished"
    run = f"import time; time.sleep(1); open({str(finished)!r}, 'w').close()"
    with pytest.raises(SystemExit):
        h.run_process([sys.executable, "-c", run], timeout=300.0)
    h.time.sleep(1.5)  # had the run been left going, it would have finished by now
    assert not finished.exists()


def test_a_run_that_prints_more_than_a_pipe_holds_is_not_blocked():
    run = (
        "import sys\n"
        "for i in range(20_000):\n"
        "    print(f'global_step={i}, episodic_return=[0.0]')\n"
        "    print(f'warning {i}', file=sys.stderr)\n"
        "print('done')\n"
    )
    finished = harness().run_process([sys.executable, "-c", run], timeout=60.0)
    assert finished.failure() is None and finished.exit == 0
    lines = finished.stdout.splitlines()
    assert len(lines) == 20_001 and lines[0] == "global_step=0, episodic_return=[0.0]"
    assert lines[-1] == "done" and finished.seconds > 0


def test_a_failed_run_reports_the_end_of_its_stderr():
    run = "import sys\nfor i in range(3):\n    print(f'line {i}', file=sys.stderr)\nsys.exit(3)\n"
    finished = harness().run_process([sys.executable, "-c", run], timeout=60.0)
    assert finished.failure() == {"error": "exit 3: line 0 | line 1 | line 2", "exit": 3}


def test_write_json_records_the_run_beside_the_figures(tmp_path, monkeypatch):
    h = harness()
    monkeypatch.setattr(h.sys, "argv", ["bench/envs.py", "--sizes", "8"])
    path = tmp_path / "out.json"
    record = h.write_json(path, {"Pendulum-v1": {"8": {"batch": 1.5}}, "date": "kept"})
    assert json.loads(path.read_text()) == record
    assert record["Pendulum-v1"] == {"8": {"batch": 1.5}} and record["date"] == "kept"
    assert record["command"] == "envs.py --sizes 8"
    assert set(record) == {"Pendulum-v1", *h.PROVENANCE}
    assert record["machine"]["cpus"] >= 1
    assert h.provenance(["--rounds", "2"])["command"] == "envs.py --rounds 2"


def test_the_machine_names_the_cpu_model_from_proc_cpuinfo(tmp_path, monkeypatch):
    h = harness()
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t: avx512f\n"
                       "processor\t: 1\nmodel name\t: AMD EPYC 9B14\n")  # fmt: skip
    real = h.Path
    monkeypatch.setattr(h, "Path", lambda p: cpuinfo if p == "/proc/cpuinfo" else real(p))
    assert h.cpu_model() == "AMD EPYC 9B14"
    assert h.provenance([])["machine"]["cpu"] == "AMD EPYC 9B14"
    monkeypatch.setattr(
        h, "Path", lambda p: tmp_path / "missing" if p == "/proc/cpuinfo" else real(p)
    )
    assert h.cpu_model() is None

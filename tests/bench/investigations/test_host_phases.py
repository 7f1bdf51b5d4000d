"""bench/investigations/host_phases.py: a host-loop iteration split into env, policy, update."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import types

import pytest
from benchlib import load_bench


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of the script at its smallest size with every option the tests check: the
    result, its JSON file, what it printed, the spins the process backend's factory had when
    the run began and the hot compiler options of each ``Trainer.iteration`` call."""
    phases = load_bench("investigations/host_phases")
    from batchppo.algorithms.training import trainer

    folder = tmp_path_factory.mktemp("host_phases")
    out, trace = folder / "phases.json", folder / "trace"
    argv = ["--preset", "cartpole", "--iterations", "2", "--num-agents", "2"]
    argv += ["--rollout-length", "8", "--worker-spin-us", "7", "--profile", str(trace)]
    argv += ["--compiler-option", "xla_backend_optimization_level=0", "--json", str(out)]
    seen, options, measure = [], [], phases.phases
    factory, hot = phases.make_module.process_batch_env, trainer.hot_compiler_options
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()) as shown:
        mp.setattr(
            phases,
            "phases",
            lambda *a: seen.append(phases.make_module.process_batch_env.keywords) or measure(*a),
        )
        mp.setattr(
            trainer.Trainer,
            "iteration",
            lambda self, *a, f=trainer.Trainer.iteration: (
                options.append(self._hot_options) or f(self, *a)
            ),
        )
        result = phases.main(argv)
    return types.SimpleNamespace(
        phases=phases, result=result, out=out, trace=trace, shown=shown.getvalue(),
        seen=seen, options=options, factory=factory, hot=hot,
    )  # fmt: skip


def test_the_parts_of_a_host_loop_iteration_add_up(run):
    phases, result = run.phases, run.result
    assert json.loads(run.out.read_text()) == result  # harness.write_json's record
    assert {"date", "command", "commit", "machine"} <= set(result)
    assert (result["preset"], result["envs"], result["steps"]) == ("cartpole", 2, 8)
    ms, rates = result["ms_per_step"], result["agent_steps_per_s"]
    assert set(ms) == set(rates) == {*phases.PARTS, *phases.REPLAYS}
    assert 0 < ms["env"] < ms["rollout"] and ms["replay"] > 0
    assert all(ms[part] > 0 for part in phases.REPLAYS)
    for part in ms:
        assert rates[part] == pytest.approx(2 * 1e3 / ms[part])
    assert "replay:" in run.shown


def test_each_part_is_its_median_call_per_step_and_the_update_the_iteration_less_the_rollout():
    phases = load_bench("investigations/host_phases")
    times = {
        "iteration": [0.9, 0.5, 0.7],
        "rollout": [0.2, 0.4, 0.3, 0.5],
        "env": [0.1],
        "replay": [],
    }
    out = phases.per_step(times, envs=4, steps=10)
    # Medians 0.7 and 0.35 s over 10 steps; the update 0.7 - 0.35 s.
    assert out["ms_per_step"] == pytest.approx(
        {"iteration": 70.0, "rollout": 35.0, "env": 10.0, "update": 35.0}
    )
    assert out["agent_steps_per_s"] == pytest.approx(
        {"iteration": 40 / 0.7, "rollout": 40 / 0.35, "env": 400.0, "update": 40 / 0.35}
    )


def test_a_fused_preset_is_refused():
    phases = load_bench("investigations/host_phases")
    with pytest.raises(ValueError, match="cartpole_jax runs fused"):
        phases.phases("cartpole_jax", 1)


def test_spins_and_compiler_options_are_set_for_the_run_only_and_a_profile_is_written(run):
    from batchppo.algorithms.training import trainer
    from batchppo.envs import WorkerOptions

    defaults = dataclasses.asdict(WorkerOptions())
    phases, result = run.phases, run.result
    # The script puts the trainer's options and the backend's factory back after its run.
    assert trainer.hot_compiler_options is run.hot
    assert phases.make_module.process_batch_env is run.factory
    assert run.options and run.options[0]["xla_backend_optimization_level"] == "0"
    assert result["compiler_options"] == {"xla_backend_optimization_level": "0"}
    assert result["spins_us"] == {"spin_us": defaults["spin_us"], "worker_spin_us": 7.0}
    assert run.seen[0]["worker_spin_us"] == 7.0 and run.seen[0]["spin_us"] == defaults["spin_us"]
    assert list(run.trace.rglob("perfetto_trace.json.gz"))

"""bench/investigations/host_phases.py: a host-loop iteration split into env, policy, update."""

from __future__ import annotations

import dataclasses
import json

import pytest
from benchlib import load_bench


def test_the_parts_of_a_host_loop_iteration_add_up(tmp_path, capsys):
    phases = load_bench("investigations/host_phases")
    out = tmp_path / "phases.json"
    argv = ["--preset", "cartpole", "--iterations", "2", "--num-agents", "2"]
    result = phases.main([*argv, "--rollout-length", "8", "--json", str(out)])
    assert json.loads(out.read_text()) == result  # harness.write_json's record
    assert {"date", "command", "commit", "machine"} <= set(result)
    assert (result["preset"], result["envs"], result["steps"]) == ("cartpole", 2, 8)
    ms, rates = result["ms_per_step"], result["agent_steps_per_s"]
    assert set(ms) == set(rates) == {*phases.PARTS, *phases.REPLAYS}
    assert 0 < ms["env"] < ms["rollout"] and ms["replay"] > 0
    assert all(ms[part] > 0 for part in phases.REPLAYS)
    for part in ms:
        assert rates[part] == pytest.approx(2 * 1e3 / ms[part])
    assert "replay:" in capsys.readouterr().out


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


def test_spins_are_set_for_the_run_only_and_a_profile_is_written(tmp_path, monkeypatch):
    phases = load_bench("investigations/host_phases")
    from batchppo.envs import WorkerOptions

    defaults = dataclasses.asdict(WorkerOptions())
    factory = phases.make_module.process_batch_env
    seen = []
    measure = phases.phases
    monkeypatch.setattr(
        phases,
        "phases",
        lambda *a: seen.append(phases.make_module.process_batch_env.keywords) or measure(*a),
    )
    argv = ["--preset", "cartpole", "--iterations", "1", "--num-agents", "2"]
    argv += ["--rollout-length", "4", "--worker-spin-us", "7", "--profile", str(tmp_path)]
    from batchppo.algorithms.common import trainer

    hot = trainer.hot_compiler_options
    options = []
    monkeypatch.setattr(
        trainer.Trainer,
        "iteration",
        lambda self, *a, f=trainer.Trainer.iteration: (
            options.append(self._hot_options) or f(self, *a)
        ),
    )
    result = phases.main([*argv, "--compiler-option", "xla_backend_optimization_level=2"])
    assert trainer.hot_compiler_options is hot
    assert options and options[0]["xla_backend_optimization_level"] == "2"
    assert result["compiler_options"] == {"xla_backend_optimization_level": "2"}
    assert result["spins_us"] == {"spin_us": defaults["spin_us"], "worker_spin_us": 7.0}
    assert seen[0]["worker_spin_us"] == 7.0 and seen[0]["spin_us"] == defaults["spin_us"]
    assert phases.make_module.process_batch_env is factory
    assert list(tmp_path.rglob("perfetto_trace.json.gz"))

"""bench/cleanrl_envpool.py: CleanRL's EnvPool script run through its import-time adapter.

CI has neither EnvPool, the old ``gym`` nor CleanRL's checkout: a stand-in script written here
calls what the published one calls (EnvPool's old Gym API, a ``flax.struct`` dataclass inside
Flax's ``TrainState``, ``jax.tree_map``, ``torch.utils.tensorboard``), against stand-ins of
EnvPool 1.2.7's env and of ``gym``'s spaces, in its own process as the bench runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import textwrap

import pytest
from benchlib import load_bench

FAKE_ENVPOOL = """
import gymnasium
import jax.numpy as jnp
import numpy as np


class Env:  # EnvPool 1.2.7's Gymnasium API
    observation_space = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = gymnasium.spaces.Discrete(4)

    def __init__(self, num_envs):
        self.num_envs = num_envs

    def reset(self):
        return np.zeros((self.num_envs, 4, 84, 84), np.uint8), {"env_id": np.arange(2)}

    def xla(self):
        def step(handle, action):
            obs = jnp.zeros((2, 4, 84, 84), jnp.uint8)
            term, trunc = jnp.array([True, False]), jnp.array([False, True])
            info = {"reward": jnp.ones(2), "terminated": term.astype(jnp.int32)}
            return handle + 1, (obs, jnp.ones(2), term, trunc, info)

        return jnp.zeros(()), None, None, step


def make(task_id, env_type, num_envs, **kwargs):
    assert (task_id, env_type) == ("Breakout-v5", "gym"), (task_id, env_type)
    return Env(num_envs)
"""

FAKE_GYM_SPACES = """
class Box:
    def __init__(self, low, high, shape, dtype):
        self.shape, self.dtype = shape, dtype


class Discrete:
    def __init__(self, n):
        self.n = n
"""

STAND_IN_SCRIPT = """
import sys

import envpool
import flax
import gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState
from torch.utils.tensorboard import SummaryWriter

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
assert args["--env-id"] == "Breakout-v5" and args["--total-timesteps"] == "4096", args


@flax.struct.dataclass
class AgentParams:
    weights: jax.Array


state = TrainState.create(apply_fn=None, params=AgentParams(jnp.ones(3)), tx=optax.sgd(0.1))
state = state.apply_gradients(grads=AgentParams(jnp.ones(3)))
assert abs(float(jax.tree_map(jnp.sum, state.params).weights) - 2.7) < 1e-5  # 3 x (1 - 0.1)

envs = envpool.make("Breakout-v5", env_type="gym", num_envs=2, episodic_life=True, seed=1)
envs.num_envs = 2
envs.single_action_space = envs.action_space
assert isinstance(envs.single_action_space, gym.spaces.Discrete)
assert envs.observation_space.shape == (4, 84, 84)
assert envs.reset().shape == (2, 4, 84, 84)
handle, recv, send, step_env = envs.xla()
handle, (obs, reward, done, info) = jax.jit(step_env)(handle, jnp.zeros(2, jnp.int32))
assert done.tolist() == [True, True] and info["TimeLimit.truncated"].tolist() == [False, True]
assert int(handle) == 1

writer = SummaryWriter("runs/stand-in")
writer.add_text("hyperparameters", "...")
for i, sps in enumerate((7.0, 100.0, 104.0, 102.0)):
    writer.add_scalar("charts/SPS_update", sps, 1024 * (i + 1))
    writer.add_scalar("charts/SPS", 1.0, 1024 * (i + 1))
writer.close()
"""


def test_the_published_calls_run_through_the_adapter(tmp_path, monkeypatch):
    bench = load_bench("cleanrl_envpool")
    site = tmp_path / "site"
    (site / "gym").mkdir(parents=True)
    (site / "envpool.py").write_text(FAKE_ENVPOOL)
    (site / "gym" / "__init__.py").write_text("from gym import spaces\n")
    (site / "gym" / "spaces.py").write_text(FAKE_GYM_SPACES)
    checkout = tmp_path / "cleanrl"
    checkout.mkdir()
    (checkout / bench.SCRIPT).write_text(textwrap.dedent(STAND_IN_SCRIPT))
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    args = argparse.Namespace(
        cleanrl_dir=str(checkout), cleanrl_python=sys.executable, steps=4096, timeout=120
    )
    row = bench.cleanrl_side(args, 3, tmp_path / "run")
    # The median of the iterations after the first (7.0, which compiled).
    assert row == {"side": "cleanrl", "seed": 3, "agent_steps_per_s": 102.0, "iterations": 3}


def test_a_rate_needs_an_iteration_after_the_first_and_the_checkout_its_script(tmp_path, capsys):
    bench = load_bench("cleanrl_envpool")
    assert bench.iteration_rate([5.0, 2.0, 4.0, 9.0]) == {"agent_steps_per_s": 4.0, "iterations": 3}
    with pytest.raises(ValueError, match="need at least two iterations for a rate, got 1"):
        bench.iteration_rate([5.0])
    with pytest.raises(SystemExit):
        bench.main(["--cleanrl-dir", str(tmp_path)])
    assert "no ppo_atari_envpool_xla_jax_scan.py in --cleanrl-dir" in capsys.readouterr().err


def test_versions_name_what_an_interpreter_imports():
    bench = load_bench("cleanrl_envpool")
    found = bench.versions(sys.executable)
    assert set(found) <= set(bench.PACKAGES) and {"jax", "flax", "batchppo"} <= set(found)
    assert "envpool" not in found  # not installed here: left out


def test_rounds_alternate_the_sides_each_in_a_fresh_folder(tmp_path, monkeypatch, capsys):
    bench = load_bench("cleanrl_envpool")
    (tmp_path / bench.SCRIPT).write_text("")
    calls = []

    def side(name, rate):
        def run(args, seed, work, sets=()):
            assert not work.exists()  # a run dir left there would be resumed
            work.mkdir(parents=True)
            calls.append((name, work.name, tuple(sets)))
            return {"side": name, "seed": seed, "agent_steps_per_s": rate, "iterations": 2}

        return run

    monkeypatch.setattr(bench, "cleanrl_side", side("cleanrl", 50.0))
    monkeypatch.setattr(bench, "batchppo_side", side("batchppo", 75.0))
    out = tmp_path / "result.json"
    result = bench.main(["--cleanrl-dir", str(tmp_path), "--rounds", "3", "--json", str(out)])
    assert calls == [
        ("cleanrl", "cleanrl-0", ()),
        ("batchppo", "batchppo-0", ()),
        ("batchppo", "batchppo-1", ()),
        ("cleanrl", "cleanrl-1", ()),
        ("cleanrl", "cleanrl-2", ()),
        ("batchppo", "batchppo-2", ()),
    ]
    assert result["agent_steps_per_s"] == {"cleanrl": 50.0, "batchppo": 75.0}
    assert result["ratio_batchppo_over_cleanrl"] == 1.5
    assert json.loads(out.read_text())["rows"] == result["rows"]
    assert "batchppo 75 (1.50x)" in capsys.readouterr().out


def test_variants_are_batchppo_sides_with_their_own_settings(tmp_path, monkeypatch):
    bench = load_bench("cleanrl_envpool")
    (tmp_path / bench.SCRIPT).write_text("")
    calls = []
    rates = {(): 100.0, ("backend=ale",): 300.0, ("backend=ale", "host_loop=false"): 500.0}

    def batchppo(args, seed, work, sets=()):
        work.mkdir(parents=True)
        calls.append((work.name, tuple(sets)))
        return {
            "side": "batchppo",
            "seed": seed,
            "agent_steps_per_s": rates[tuple(sets)],
            "iterations": 2,
        }

    def cleanrl(args, seed, work):
        return {"side": "cleanrl", "seed": seed, "agent_steps_per_s": 250.0, "iterations": 2}

    monkeypatch.setattr(bench, "cleanrl_side", cleanrl)
    monkeypatch.setattr(bench, "batchppo_side", batchppo)
    result = bench.main(
        [
            "--cleanrl-dir",
            str(tmp_path),
            "--rounds",
            "2",
            "--variant",
            "process",
            "--variant",
            "ale:backend=ale",
            "--variant",
            "fused:backend=ale;host_loop=false",
        ]
    )
    assert calls == [
        ("process-0", ()),
        ("ale-0", ("backend=ale",)),
        ("fused-0", ("backend=ale", "host_loop=false")),
        ("fused-1", ("backend=ale", "host_loop=false")),
        ("ale-1", ("backend=ale",)),
        ("process-1", ()),
    ]
    assert result["agent_steps_per_s"] == {
        "cleanrl": 250.0,
        "process": 100.0,
        "ale": 300.0,
        "fused": 500.0,
    }
    assert result["ratios_over_cleanrl"] == {"process": 0.4, "ale": 1.2, "fused": 2.0}
    assert "ratio_batchppo_over_cleanrl" not in result
    assert {row["side"] for row in result["rows"]} == {"cleanrl", "process", "ale", "fused"}


@pytest.mark.parametrize("spec", ["", "cleanrl", "ale:backend", ":backend=ale"])
def test_a_malformed_variant_is_a_one_line_error(spec):
    bench = load_bench("cleanrl_envpool")
    with pytest.raises(argparse.ArgumentTypeError, match="write NAME or NAME:KEY=VALUE"):
        bench.parse_variant(spec)


def test_a_failing_side_is_a_row_and_leaves_the_others_measured(tmp_path, monkeypatch):
    bench = load_bench("cleanrl_envpool")
    (tmp_path / bench.SCRIPT).write_text("")

    def batchppo(args, seed, work, sets=()):
        if sets:
            raise subprocess.CalledProcessError(1, ["batchppo", "train"])
        return {"side": "batchppo", "seed": seed, "agent_steps_per_s": 90.0, "iterations": 2}

    def cleanrl(args, seed, work):
        return {"side": "cleanrl", "seed": seed, "agent_steps_per_s": 45.0, "iterations": 2}

    monkeypatch.setattr(bench, "cleanrl_side", cleanrl)
    monkeypatch.setattr(bench, "batchppo_side", batchppo)
    result = bench.main(
        ["--cleanrl-dir", str(tmp_path), "--variant", "batchppo", "--variant", "ale:backend=ale"]
    )
    failed = [row for row in result["rows"] if "error" in row]
    assert [(row["side"], row["round"]) for row in failed] == [("ale", 0)]
    assert "returned non-zero exit status 1" in failed[0]["error"]
    assert result["ratios_over_cleanrl"]["batchppo"] == 2.0
    assert math.isnan(result["agent_steps_per_s"]["ale"])

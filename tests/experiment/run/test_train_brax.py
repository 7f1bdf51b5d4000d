"""The Brax presets on CPU (the ``brax`` extra is part of the test extra): one trains end to
end, and every one that ``batchppo list`` lists builds its env and steps it. Compiling Brax
physics is long, so these are ``extended`` tests (``pytest -m extended``, not in ``pytest -q``),
except the check that the presets are found; tests/backends/test_brax_adapter.py's semantics
tests run in ``pytest -q``."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo import cli
from batchppo.algorithms.training.programs import cold_compiler_options
from batchppo.algorithms.training.trainer import make_run_env
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import configs

# Every preset on the brax backend, from the registry that `batchppo list` prints.
BRAX_PRESETS = sorted(name for name, c in configs.PRESETS.items() if c.backend == "brax")

# cheetah_brax's networks and physics at a CI size: 64 envs x 16 steps = 1024 env steps per
# iteration, two iterations, an evaluation of 4 episodes of 64 steps after each. Most of the
# time is XLA compiling the Brax step into the training and evaluation programs; episodes of
# at most 64 steps (EVAL_CHUNK) make an evaluation one compiled call, and one program less.
SMALL = (
    "steps=2048",
    "num_agents=64",
    "num_minibatches=4",
    "max_length=64",
    "eval_episodes=4",
    "eval_every=1024",
    "log_every=1024",
    "policy_layers=[32,32]",
    "value_layers=[32,32]",
)


@pytest.mark.extended
@pytest.mark.timeout(900)
# Its programs are compiled by no other test; it runs two iterations.
@pytest.mark.usefixtures("no_compilation_cache", "cold_training_programs")
def test_cheetah_brax_trains_on_cpu(tmp_path, capsys):
    argv = ["train", "--config", "cheetah_brax", "--logdir", str(tmp_path), "--timestamp", "B",
            "--progress", "none"]  # fmt: skip
    for override in SMALL:
        argv += ["--set", override]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    run_dir = tmp_path / "B-cheetah_brax"
    assert code == 0, err
    # mujoco-mjx prints notes of its own on stdout when imported: the summary is the last line.
    assert out.splitlines()[-1].startswith("done: 2,048 steps, eval score ")
    records = read_metrics(run_dir)
    assert [(r["phase"], r["step"]) for r in records] == [
        ("train", 1024), ("eval", 1024), ("train", 2048), ("eval", 2048),
    ]  # fmt: skip
    evals = [r for r in records if r["phase"] == "eval"]
    assert [(r["length"], r["episodes"]) for r in evals] == [(64.0, 4), (64.0, 4)]
    assert all(math.isfinite(r["score"]) for r in records if r["score"] is not None)


def test_the_brax_presets_are_found():
    assert BRAX_PRESETS, "no preset on the brax backend: the env test below would test nothing"


@pytest.mark.extended
@pytest.mark.timeout(600)
@pytest.mark.usefixtures("no_compilation_cache")
@pytest.mark.parametrize("name", [n for n in BRAX_PRESETS if n != "cheetah_brax"])
def test_each_brax_preset_builds_its_env_and_steps_it_on_cpu(name):
    # cheetah_brax trains end to end above; each other one's physics compiles here.
    # The preset's env as training builds it, at 2 envs; reset and one step of zero actions,
    # compiled as one program (compiling the Brax physics is most of the time) with the XLA
    # options of the package's programs that run once.
    config = dataclasses.replace(configs.PRESETS[name], num_agents=2)
    env = make_run_env(config, config.num_agents)
    spec = env.spec
    action = jnp.zeros((2, *spec.action_shape), spec.action_dtype)

    def reset_and_step(key):
        state, obs = env.reset(key)
        return obs, env.step(state, action, key)

    program = jax.jit(reset_and_step, compiler_options=cold_compiler_options())
    obs, result = program(jax.random.key(0))
    assert obs.shape == result.obs.shape == (2, *spec.obs_shape)
    assert obs.dtype == result.obs.dtype == jnp.float32
    assert result.reward.shape == (2,) and result.reward.dtype == jnp.float32
    assert np.isfinite(np.asarray(result.obs)).all() and np.isfinite(result.reward).all()
    assert not np.array_equal(result.obs, obs)  # the physics moved
    # One step from a reset neither ends an episode nor reaches the time limit.
    assert result.terminated.tolist() == result.truncated.tolist() == [False, False]

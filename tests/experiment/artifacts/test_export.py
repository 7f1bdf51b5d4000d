"""``batchppo export``: the ONNX file against ``load_policy`` and the env's own spaces.

Tiny real runs (one PPO iteration each) of a Gaussian policy on gymnax (``pendulum_jax``) and
on a host backend (``Pendulum-v1``), and of a categorical policy on a host backend
(``CartPole-v1`` with ``normalize_ranges``, whose two bounded observation dims are mapped and
two are not). The expected actions are computed here from the Gymnasium / gymnax spaces'
bounds and the run's ``load_policy``, not with the export's own maps.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import gymnasium
import jax
import numpy as np
import onnxruntime
import pytest
from tiny_runs import tiny_run

import batchppo.algorithms.ppo.ppo  # noqa: F401  (the trainer the loop imports late)
from batchppo import cli
from batchppo.core import spaces
from batchppo.experiment.artifacts import export
from batchppo.experiment.run import training

TINY = tiny_run(eval_every=0, checkpoint_every=256, steps=256)
RUNS = {
    # name: (preset, extra overrides)
    "gaussian-gymnax": ("pendulum_jax", []),
    "gaussian-host": ("pendulum_fast", ["backend=sync"]),
    "categorical-host": ("cartpole", ["backend=sync", "normalize_ranges=true"]),
    "recurrent-gymnax": ("pendulum_jax", ["network=recurrent"]),
}


# One PPO iteration each: the runs, and the policies the tests load from them, compile with
# the options of the programs that run once.
@pytest.fixture(scope="module")
def runs(tmp_path_factory, module_cold_training_programs):
    logdir = tmp_path_factory.mktemp("logdir")
    out = {}
    for name, (preset, extra) in RUNS.items():
        result = training.train(
            preset, logdir, name=name, timestamp="T", overrides=[*TINY, *extra], progress="none"
        )
        out[name] = result.run_dir
    return out


def env_observations(env_id: str, n: int = 64) -> np.ndarray:
    """``n`` observations of the real Gymnasium env under random actions (float32)."""
    env = gymnasium.make(env_id)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    batch = []
    for _ in range(n):
        batch.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.asarray(batch, np.float32)


def to_unit(obs: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Range normalisation by its formula, on the dims with finite bounds."""
    bounded = np.isfinite(low) & np.isfinite(high)
    safe_low, safe_high = np.where(bounded, low, 0), np.where(bounded, high, 1)
    mapped = 2 * (obs - safe_low) / (safe_high - safe_low) - 1
    return np.where(bounded, mapped, obs).astype(np.float32)


def run_onnx(path, **inputs) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["action"], inputs)[0]


def std_of(run_dir) -> np.ndarray:
    """The Gaussian head's std at the run's checkpoint: softplus of its ``std_param``."""
    _, trainer, state, _ = training.load_run(run_dir)
    trainer.close()
    (param,) = [
        leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(state.params)
        if "std_param" in jax.tree_util.keystr(path)
    ]
    return np.log1p(np.exp(np.asarray(param, np.float64)))


def test_gaussian_gymnax_outputs_the_envs_own_action_range(runs, tmp_path):
    import gymnax

    run_dir = runs["gaussian-gymnax"]
    info = export.export_run(run_dir, tmp_path / "p.onnx")
    assert info.inputs == ("obs: (B, 3) tensor(float)",)
    assert info.outputs == ("action: (B, 1) tensor(float)",)
    assert info.step == 256 and not info.sampled and info.max_abs_diff < 1e-5
    env, params = gymnax.make("Pendulum-v1")
    box = env.observation_space(params)
    obs = env_observations("Pendulum-v1")  # the same physics; gymnax's bounds are used below
    low, high = np.asarray(box.low, np.float32), np.asarray(box.high, np.float32)
    agent_action = training.load_policy(run_dir)(to_unit(obs, low, high))
    want = 2.0 * np.clip(agent_action, -1, 1)  # gymnax Pendulum's actions are in [-2, 2]
    got = run_onnx(info.path, obs=obs)
    assert got.dtype == np.float32 and got.shape == (64, 1)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
    assert np.abs(got).max() > 1e-3  # a real policy, not zeros


def test_gaussian_host_maps_observations_and_actions_like_the_env_stack(runs, tmp_path):
    run_dir = runs["gaussian-host"]
    info = export.export_run(run_dir, tmp_path / "p.onnx")
    space = gymnasium.make("Pendulum-v1").observation_space
    obs = env_observations("Pendulum-v1")
    agent_action = training.load_policy(run_dir)(to_unit(obs, space.low, space.high))
    got = run_onnx(info.path, obs=obs)
    np.testing.assert_allclose(got, 2.0 * np.clip(agent_action, -1, 1), rtol=0, atol=2e-6)
    # Observations far outside the bounds (the model does not clip them) and a batch of one.
    wild = np.array([[5.0, -5.0, 40.0]], np.float32)
    want = 2.0 * np.clip(training.load_policy(run_dir)(to_unit(wild, space.low, space.high)), -1, 1)
    np.testing.assert_allclose(run_onnx(info.path, obs=wild), want, rtol=0, atol=2e-6)


def test_categorical_host_argmax_equals_load_policy(runs, tmp_path):
    run_dir = runs["categorical-host"]
    info = export.export_run(run_dir, tmp_path / "p.onnx")
    assert info.inputs == ("obs: (B, 4) tensor(float)",)
    assert info.outputs == ("action: (B) tensor(int32)",) and info.max_abs_diff == 0.0
    space = gymnasium.make("CartPole-v1").observation_space
    obs = env_observations("CartPole-v1", 200)
    want = training.load_policy(run_dir)(to_unit(obs, space.low, space.high))
    got = run_onnx(info.path, obs=obs)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    assert set(np.unique(got)) <= {0, 1}


def test_recurrent_state_is_an_input_and_an_output(runs, tmp_path):
    run_dir = runs["recurrent-gymnax"]
    info = export.export_run(run_dir, tmp_path / "r.onnx")
    assert info.inputs == ("obs: (B, 3) tensor(float)", "state: (B, 16) tensor(float)")
    assert info.outputs == ("action: (B, 1) tensor(float)", "state_out: (B, 16) tensor(float)")
    space = gymnasium.make("Pendulum-v1").observation_space
    session = onnxruntime.InferenceSession(str(info.path), providers=["CPUExecutionProvider"])
    policy = training.load_policy(run_dir)  # carries its own state across calls
    obs = env_observations("Pendulum-v1", 6 * 8).reshape(6, 8, 3)
    state = np.zeros((8, 16), np.float32)
    for t in range(6):
        if t == 3:  # new episodes: zero state here, reset() there
            state[:] = 0
            policy.reset()
        got, new_state = session.run(["action", "state_out"], {"obs": obs[t], "state": state})
        want = 2.0 * np.clip(policy(to_unit(obs[t], space.low, space.high)), -1, 1)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
        assert np.abs(new_state - state).max() > 1e-4  # the state moves
        state = new_state


def test_sampled_gaussian_is_mean_plus_std_times_noise(runs, tmp_path):
    run_dir = runs["gaussian-host"]
    info = export.export_run(run_dir, tmp_path / "s.onnx", sampled=True)
    assert info.inputs == ("obs: (B, 3) tensor(float)", "noise: (B, 1) tensor(float)")
    space = gymnasium.make("Pendulum-v1").observation_space
    obs = env_observations("Pendulum-v1")
    mean = training.load_policy(run_dir)(to_unit(obs, space.low, space.high))
    noise = np.random.default_rng(3).standard_normal((64, 1)).astype(np.float32)
    want = 2.0 * np.clip(mean + std_of(run_dir) * noise, -1, 1)
    np.testing.assert_allclose(run_onnx(info.path, obs=obs, noise=noise), want, atol=2e-6)


def test_sampled_categorical_is_gumbel_max(runs, tmp_path):
    run_dir = runs["categorical-host"]
    info = export.export_run(run_dir, tmp_path / "s.onnx", sampled=True)
    assert info.inputs == ("obs: (B, 4) tensor(float)", "noise: (B, 2) tensor(float)")
    space = gymnasium.make("CartPole-v1").observation_space
    obs = env_observations("CartPole-v1")
    mean = training.load_policy(run_dir)(to_unit(obs, space.low, space.high))
    zero = np.zeros((64, 2), np.float32)
    np.testing.assert_array_equal(run_onnx(info.path, obs=obs, noise=zero), mean)
    for action in (0, 1):  # noise that dwarfs the logits picks its action
        noise = zero.copy()
        noise[:, action] = 1e4
        assert (run_onnx(info.path, obs=obs, noise=noise) == action).all()


def test_cli_export_default_path_and_sampled(runs, capsys):
    run_dir = runs["categorical-host"]
    code = cli.main(["export", str(run_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == [
        f"wrote {run_dir / 'policy.onnx'}: mean-action policy of step 256",
        "inputs: obs: (B, 4) tensor(float); outputs: action: (B) tensor(int32) (the env's own "
        "spaces)",
        "checked against load_policy on 3 x 256 observations: max abs difference 0",
    ]
    assert cli.main(["export", str(run_dir), "--sampled"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith(f"wrote {run_dir / 'policy-sampled.onnx'}: sampled policy of step 256")
    assert "inputs: obs: (B, 4) tensor(float); noise: (B, 2) tensor(float)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{missing}"], "run dir {missing} does not exist"),
        (["{run}", "--checkpoint", "999"], "999"),
    ],
    ids=["missing-run-dir", "missing-checkpoint"],
)
def test_cli_bad_input_is_one_line(runs, capsys, tmp_path, argv, message):
    fill = {"missing": tmp_path / "nope", "run": runs["categorical-host"]}
    code = cli.main(["export", *(a.format(**fill) for a in argv)])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("batchppo: error: ") and err.count("\n") == 1
    assert message.format(**fill) in err


def test_cli_without_jax2onnx_names_the_extra(runs, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax2onnx", None)  # import fails
    code = cli.main(["export", str(runs["categorical-host"])])
    _, err = capsys.readouterr()
    assert code == 2
    assert err == (
        "batchppo: error: export needs jax2onnx and onnxruntime: pip install 'batchppo[onnx]'\n"
    )


def fake(network_recurrent=False, obs=None, action=None, config=None):
    """A trainer-shaped object for the checks of what exports (a recurrent one's state is a
    pair of arrays, as an LSTM's would be)."""
    agent = types.SimpleNamespace(
        network=types.SimpleNamespace(recurrent=network_recurrent),
        normalize_obs=None,
        initial_carry=lambda b: (np.zeros((b, 4)), np.zeros((b, 4))),
    )
    spec = types.SimpleNamespace(
        obs_space=obs if obs is not None else spaces.box((3,), np.float32),
        action_space=action if action is not None else spaces.box((1,), np.float32),
    )
    return config or types.SimpleNamespace(network="recurrent"), types.SimpleNamespace(
        agent=agent, spec=spec
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"network_recurrent": True},
            "export: network 'recurrent' keeps a recurrent state that is not one (batch, size) "
            "array; only such states export",
        ),
        (
            {"obs": {"pos": spaces.box((2,), np.float32), "img": spaces.box((8, 8, 1), np.uint8)}},
            "only one float Box observation exports",
        ),
        ({"obs": spaces.box((8, 8, 3), np.uint8)}, "only one float Box observation exports"),
        (
            {"action": spaces.MultiDiscrete((3, 2))},
            "one 1-D Box (Gaussian) or one Discrete (categorical) action exports",
        ),
    ],
    ids=["two-state-arrays", "dict-obs", "uint8-image", "multidiscrete"],
)
def test_unsupported_policies_name_what_is_unsupported(kwargs, message):
    config, trainer = fake(**kwargs)
    with pytest.raises(export.ExportError, match=None) as info:
        export.check_supported(config, trainer)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_host_mapping_without_range_normalisation_clips_to_the_env_bounds():
    config = types.SimpleNamespace(
        env="Pendulum-v1", env_kwargs={}, env_wrappers=(), normalize_ranges=False
    )
    mapping = export.host_mapping(config)
    assert mapping.obs_map is None and mapping.act_map is None
    np.testing.assert_array_equal(mapping.act_clip[0], [-2.0])
    np.testing.assert_array_equal(mapping.act_clip[1], [2.0])
    actions = np.array([[-3.0], [-0.5], [2.5]], np.float32)
    np.testing.assert_array_equal(mapping.action(actions, xp=np), [[-2.0], [-0.5], [2.0]])
    obs = np.array([[0.5, -0.5, 9.0]], np.float32)
    np.testing.assert_array_equal(mapping.observation(obs), obs)
    with_ranges = export.host_mapping(
        types.SimpleNamespace(**{**vars(config), "normalize_ranges": True})
    )
    assert with_ranges.act_clip is None  # RangeNormalize clips to [-1, 1] itself
    np.testing.assert_allclose(with_ranges.action(actions, xp=np), [[-2.0], [-1.0], [2.0]])
    np.testing.assert_allclose(with_ranges.observation(obs), [[0.5, -0.5, 9.0 / 8.0]])


def test_the_env_mapping_is_the_export_table_s(monkeypatch):
    # No branch on backend names: the table's entry, or a one-line error naming the backends
    # that have one.
    with pytest.raises(export.ExportError) as info:
        export.env_mapping(types.SimpleNamespace(backend="brax"), None)
    assert str(info.value) == (
        "export: backend 'brax' is not supported (its env's action mapping is not known to the "
        "export); runs of the process, sync, ray and gymnax backends export"
    )
    calls = []

    def mapping(config: Any, trainer: Any) -> str:
        calls.append((config, trainer))
        return "the mapping"

    monkeypatch.setitem(export.EXPORT_MAPPINGS, "mapped", mapping)  # a plug-in's entry
    config = types.SimpleNamespace(backend="mapped")
    assert export.env_mapping(config, "trainer") == "the mapping"
    assert calls == [(config, "trainer")]
    with pytest.raises(export.ExportError, match=r"env object has no raw_bounds"):
        export.bounds_mapping(config, types.SimpleNamespace(env=object()))

"""make / make_env_fn: the wrapper stack, backends and the unknown-id error."""

from __future__ import annotations

import importlib
import os

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import ClipAction, TimeLimit

from batchppo.envs import BatchEnv, ConvertTo32Bit, RangeNormalize, WorkerOptions, make, make_env_fn

pytestmark = pytest.mark.timeout(60)

# The function batchppo.envs.make shadows the module of the same name as an attribute.
make_module = importlib.import_module("batchppo.envs.make")


def test_unknown_id_suggests_close_matches_before_starting_workers(monkeypatch):
    monkeypatch.setattr(make_module, "BatchEnv", lambda *a, **k: pytest.fail("workers built"))
    with pytest.raises(ValueError, match=r"'Pendulm-v1'\. Did you mean 'Pendulum-v1'\?"):
        make("Pendulm-v1", 4)
    with pytest.raises(ValueError, match="unknown Gymnasium env id 'NoSuchEnv-v0'"):
        make_env_fn("NoSuchEnv-v0")
    with pytest.raises(ValueError, match="backend"):
        make("Pendulum-v1", 4, backend="threads")
    with pytest.raises(ValueError, match=r"^num_envs must be >= 1, got 0\.$"):
        make("Pendulum-v1", 0)


def test_a_worker_setting_as_a_keyword_names_the_options_object(monkeypatch):
    monkeypatch.setattr(make_module, "BatchEnv", lambda *a, **k: pytest.fail("workers built"))
    with pytest.raises(ValueError) as error:
        make("Pendulum-v1", 4, num_workers=2, step_timeout=5.0, g=9.8)
    assert str(error.value) == (
        "num_workers, step_timeout: a worker setting, not an env keyword: pass "
        "options=WorkerOptions(num_workers=2, step_timeout=5.0) (batchppo.envs.WorkerOptions)"
    )


def test_make_re_exports_the_standard_stack():
    from batchppo.envs.stack import standard_stack

    for name in standard_stack.__all__:
        assert getattr(make_module, name) is getattr(standard_stack, name)


def test_stack_order_and_spaces():
    env = make_env_fn("Pendulum-v1", max_length=7)()
    chain = []
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        chain.append(type(layer))
        layer = layer.env
    # Outermost first: ConvertTo32Bit, RangeNormalize (which clips actions itself), then
    # gymnasium.make's own.
    assert chain[:2] == [ConvertTo32Bit, RangeNormalize]
    assert ClipAction not in chain and TimeLimit in chain[2:]
    assert env.get_wrapper_attr("_max_episode_steps") == 7
    np.testing.assert_array_equal(env.observation_space.low, [-1, -1, -1])
    assert env.observation_space.dtype == np.float32
    np.testing.assert_array_equal(env.action_space.low, [-1])  # finite: the agent's range
    np.testing.assert_array_equal(env.action_space.high, [1])
    # Without range normalisation, Gymnasium's ClipAction clips to the env's own bounds.
    raw = make_env_fn("Pendulum-v1", normalize_ranges=False)()
    assert type(raw.env) is ClipAction
    raw.reset(seed=0)
    raw.step(np.array([5.0], np.float32))
    assert raw.unwrapped.last_u == 2.0  # Pendulum's max torque


def test_stack_matches_raw_env_through_the_formulas():
    env = make_env_fn("Pendulum-v1")()
    raw = gymnasium.make("Pendulum-v1")
    obs, _ = env.reset(seed=5)
    raw_obs, _ = raw.reset(seed=5)
    high = raw.observation_space.high
    np.testing.assert_array_equal(obs, 2 * (raw_obs + high) / (2 * high) - 1)
    # Normalised action 0.5 -> -2 + 1.5 / 2 * 4 = 1; 3.0 is clipped to 1 -> 2 (the max torque).
    for action, raw_action in [(0.5, 1.0), (3.0, 2.0)]:
        obs, reward, *_ = env.step(np.array([action], np.float32))
        raw_obs, raw_reward, *_ = raw.step(np.array([raw_action], np.float32))
        np.testing.assert_allclose(obs, 2 * (raw_obs + high) / (2 * high) - 1, rtol=1e-6)
        assert reward == np.float32(raw_reward) and type(reward) is np.float32


def test_discrete_actions_become_int32_and_partial_bounds_normalise():
    env = make_env_fn("CartPole-v1")()
    assert env.action_space.dtype == np.int32
    high = env.observation_space.high
    np.testing.assert_array_equal(np.isinf(high), [False, True, False, True])
    np.testing.assert_array_equal(high[[0, 2]], [1, 1])


def test_sync_and_process_backends_agree():
    with (
        make("Pendulum-v1", 5, seed=2, backend="sync", max_length=3) as a,
        make("Pendulum-v1", 5, seed=2, options=WorkerOptions(num_workers=2), max_length=3) as b,
    ):
        assert isinstance(a, BatchEnv) and isinstance(b, BatchEnv)
        rng = np.random.default_rng(1)
        for _ in range(4):
            action = rng.uniform(-1, 1, (5, 1)).astype(np.float32)
            for x, y in zip(a.step_arrays(action), b.step_arrays(action), strict=True):
                np.testing.assert_array_equal(x, y)


def test_make_takes_a_batch_env_factory_by_name_or_as_a_callable():
    built = []

    def factory(env_fns, **kwargs):
        built.append((len(env_fns), kwargs))
        return make_module.process_batch_env(env_fns, **kwargs)

    options = WorkerOptions(num_workers=1)
    common = {"seed": 2, "options": options, "max_length": 3}
    with (
        make("Pendulum-v1", 3, backend="process", **common) as by_name,
        make("Pendulum-v1", 3, backend=make_module.process_batch_env, **common) as by_class,
        make("Pendulum-v1", 3, backend=factory, **common) as own,
        make("Pendulum-v1", 3, backend=make_module.in_process_batch_env, **common) as local,
    ):
        # The factory gets the options object itself, and the batch env keeps it.
        ((count, kwargs),) = built
        assert count == 3 and sorted(kwargs) == ["autoreset_mode", "options", "transform"]
        assert kwargs["options"] is options
        assert by_name.worker_options is by_class.worker_options is own.worker_options is options
        assert local.worker_options == WorkerOptions(num_workers=1, step_in_parent=True)
        action = np.full((3, 1), 0.5, np.float32)
        results = [env.step_arrays(action) for env in (by_name, by_class, own, local)]
        for result in results[1:]:
            for x, y in zip(results[0], result, strict=True):
                np.testing.assert_array_equal(x, y)


def test_make_names_its_own_batch_envs_only():
    # envs/ knows no backend: the names are its two factories', the rest are callables.
    assert make_module.batch_env_of("sync") is make_module.in_process_batch_env
    assert make_module.batch_env_of("process") is make_module.process_batch_env
    assert make_module.batch_env_of(BatchEnv) is BatchEnv
    with pytest.raises(ValueError) as info:
        make("Pendulum-v1", 2, backend="gymnax")
    assert str(info.value) == (
        "backend must be one of ('process', 'sync') or a batch env factory; got 'gymnax'."
    )
    with pytest.raises(ValueError) as info:
        make("Pendulum-v1", 2, backend="ray")
    assert str(info.value) == (
        "backend='ray': the Ray batch env's factory is the ray backend's; pass "
        "backend=ray_batch_env (from batchppo.backends.ray import ray_batch_env)."
    )


def test_halfcheetah_batch():
    with make(
        "HalfCheetah-v5", 2, seed=0, options=WorkerOptions(num_workers=2), max_length=2
    ) as env:
        assert env.single_observation_space.shape == (17,)
        assert env.single_action_space.shape == (6,)
        obs, reward, _, truncated, final_obs = env.step_arrays(np.zeros((2, 6)))
        assert obs.dtype == np.float32 and reward.dtype == np.float32
        obs, _, _, truncated, final_obs = env.step_arrays(np.zeros((2, 6)))
        np.testing.assert_array_equal(truncated, [True, True])
        assert not np.array_equal(obs, final_obs)  # reset obs vs the episode's last obs


def test_render_for_videos():
    env = make_env_fn("Pendulum-v1", render_mode="rgb_array")()
    env.reset(seed=0)
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3


@pytest.mark.parametrize("int_obs", [False, True])
@pytest.mark.parametrize("backend", ["process", "sync"])
def test_make_builds_each_env_once(tmp_path, backend, int_obs):
    """make() reads the spaces for its batch transform off the envs the batch env builds:
    4 envs, 4 constructions, none in the calling process unless the backend is "sync"."""
    path = tmp_path / "builds"
    env_id = "envs_testlib:ConstructionCounting-v0"
    options = WorkerOptions(num_workers=2) if backend == "process" else None
    with make(
        env_id, 4, seed=0, backend=backend, options=options, path=str(path), int_obs=int_obs
    ) as env:
        built = [int(line) for line in path.read_text().split()]
        assert len(built) == 4, built
        assert built.count(os.getpid()) == (4 if backend == "sync" else 0)
        # The batch transform covers float observations; integer ones get the per-env stack.
        assert (env.transform is not None) != int_obs
        expected = make_env_fn(env_id, path=os.devnull, int_obs=int_obs)().observation_space
        assert env.single_observation_space == expected
        env.step(np.zeros((4, 1), np.float32))
    assert len(path.read_text().split()) == 4


def nested_batch(tags, t, episode, action):
    """What make()'s stack returns for NestedObsEnvs of ``tags`` (see envs_testlib)."""
    n = len(tags)
    return {
        "extra": (
            np.full(n, t),
            np.array([[episode % 3, t % 4]] * n),
            np.array([[0.25, 0.75 + tag] for tag in tags], np.float32),
        ),
        "inner": {
            "count": np.full((n, 1), t, np.int32),
            "flags": np.array([[t % 2, 1, 0]] * n, np.int8),
        },
        "pos": np.array([[tag, action] for tag in tags], np.float32),
    }


def assert_tree_equal(actual, expected):
    """Equal Dict/Tuple trees of arrays: same structure, dtypes and values at every leaf."""
    if isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            assert_tree_equal(actual[key], expected[key])
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_tree_equal(a, e)
    else:
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.filterwarnings("ignore:.*not within the observation space:UserWarning")
@pytest.mark.parametrize("backend", ["process", "sync"])
def test_make_with_nested_observations(backend):
    """Dict/Tuple observations get the per-env stack: every leaf converted and checked."""
    env_id = "envs_testlib:NestedObs-v0"
    options = WorkerOptions(num_workers=2) if backend == "process" else None
    with make(env_id, 3, backend=backend, options=options) as env:
        assert env.transform is None  # the batch transform covers flat spaces only
        space = env.single_observation_space
        assert space["pos"] == spaces.Box(-np.inf, np.inf, (2,), np.float32)
        assert space["inner"]["count"] == spaces.Box(0, np.iinfo(np.int32).max, (1,), np.int32)
        assert env.single_action_space == spaces.Box(-1, 1, (1,), np.float32)
        obs, _ = env.reset(seed=0)  # env i gets seed i, its tag
        tags = [0, 1, 2]
        assert_tree_equal(obs, nested_batch(tags, t=0, episode=1, action=0))
        # RangeNormalize maps the action 0.5 in [-1, 1] to 1.0 in the env's [-2, 2].
        action = np.full((3, 1), 0.5, np.float32)
        obs, reward, terminated, truncated, _ = env.step(action)
        assert_tree_equal(obs, nested_batch(tags, t=1, episode=1, action=1.0))
        assert_tree_equal(reward, np.array([1, 2, 3], np.float32))
        assert not terminated.any() and not truncated.any()
        # t == 2 ends the episodes: same-step autoreset, the last obs as final_obs.
        obs, reward, terminated, truncated, infos = env.step(action)
        assert_tree_equal(obs, nested_batch(tags, t=0, episode=2, action=0))
        assert_tree_equal(infos["final_obs"], nested_batch(tags, t=2, episode=1, action=1.0))
        assert_tree_equal(reward, np.array([2, 3, 4], np.float32))
        assert terminated.all() and not truncated.any()
        obs, reward, terminated, truncated, final_obs = env.step_arrays(action)
        assert_tree_equal(obs, nested_batch(tags, t=1, episode=2, action=1.0))
        assert_tree_equal(final_obs, obs)

    with make(env_id, 3, backend=backend, options=options, nan_tag=1) as env:
        env.reset(seed=0)
        with pytest.raises(
            ValueError,
            match=r"(?s)^envs_testlib:NestedObs-v0: non-finite observation leaf "
            r"obs\['extra'\]\[2\] at step 1 of the episode .*env 1",
        ):
            env.step(np.zeros((3, 1), np.float32))


@pytest.mark.parametrize(
    ("dtype", "kept"),
    [
        ("uint8", "uint8"),
        ("bool", "bool"),
        ("int32", "int32"),
        ("int64", "int32"),
        ("float64", "float32"),
        ("float32", "float32"),
        ("int8", "int8"),
    ],
)
def test_observation_dtypes_in_shared_memory(dtype, kept):
    """Integer and bool observations keep their dtype from the workers' envs to the arrays
    returned (uint8 stays uint8 in shared memory); float64 becomes float32, int64 int32."""
    options = WorkerOptions(num_workers=2)
    with make("envs_testlib:Dtype-v0", 3, options=options, dtype=dtype) as env:
        assert env.single_observation_space.dtype == np.dtype(kept)
        assert env.shared_layout.obs_leaves == (((2, 3), np.dtype(kept).str),)
        obs, _ = env.reset(seed=0)
        assert obs.dtype == np.dtype(kept) and obs.shape == (3, 2, 3)
        obs, reward, _, _, final_obs = env.step_arrays(np.zeros(3, np.int32))
        expected = np.full((3, 2, 3), 1 if dtype == "bool" else 8, np.dtype(kept))
        assert obs.dtype == final_obs.dtype == np.dtype(kept)
        np.testing.assert_array_equal(obs, expected)
        assert reward.dtype == np.float32 and reward.tolist() == [1.0, 1.0, 1.0]


def test_int64_observation_outside_int32_raises():
    """int64 becomes int32 without wrapping around: a value int32 cannot hold raises."""
    base = 2**31 - 2  # the reset's obs fits, the second step's does not
    with make("envs_testlib:Dtype-v0", 2, backend="sync", dtype="int64", base=base) as env:
        obs, _ = env.reset(seed=0)
        assert obs.dtype == np.int32 and obs.max() == base
        env.step(np.zeros(2, np.int32))
        with pytest.raises(
            ValueError,
            match=r"^envs_testlib:Dtype-v0: int64 observation at step 2 of the episode "
            r"\(0 = reset\) holds 2147483648, outside int32's range \[-2147483648, 2147483647\], "
            r"the dtype int64 observations are converted to; return values in that range, or a "
            r"float Box\.\n",
        ):
            env.step(np.zeros(2, np.int32))


# --- A user's own envs in make: render_mode, make_vec ------------------------------------


def test_render_mode_reaches_the_constructor_only_when_rendering(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    # Reach takes no render_mode: make() and make_env_fn() build it (gymnasium.make would
    # not, given render_mode=None).
    with make("myenvs:MyReach-v0", 2, seed=0, options=WorkerOptions(num_workers=1)) as env:
        obs, *_ = env.step_arrays(np.zeros((2, 2), np.float32))
        assert obs.shape == (2, 2)
    assert make_env_fn("myenvs:Reach")().unwrapped.size == 1.0
    env = make_env_fn("myenvs:RenderingReach", render_mode="rgb_array")()
    assert env.unwrapped.render_mode == "rgb_array"
    assert make_env_fn("myenvs:RenderingReach")().unwrapped.render_mode is None


def test_make_takes_an_autoreset_mode():
    from gymnasium.vector import AutoresetMode

    with make("CartPole-v1", 2, seed=0, backend="sync") as env:
        assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    with make("CartPole-v1", 2, seed=0, backend="sync", autoreset_mode="NextStep") as env:
        assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        # Gymnasium's observation wrappers need NEXT_STEP, and take this env.
        wrapped = gymnasium.wrappers.vector.NormalizeObservation(env)
        obs, _ = wrapped.reset(seed=0)
        assert obs.shape == (2, 4)


def test_gymnasium_make_vec_builds_make_s_env_through_a_registered_id(user_envs, monkeypatch):
    from gymnasium.vector import AutoresetMode

    monkeypatch.syspath_prepend(str(user_envs))
    vector_id = make_module.register_vector_env("myenvs:MyReach-v0")
    assert vector_id == "batchppo/MyReach-v0"
    env = gymnasium.make_vec(vector_id, num_envs=3, num_workers=1, max_episode_steps=2, size=2.0)
    try:
        assert isinstance(env, BatchEnv) and env.num_envs == 3
        # make_vec's keywords of WorkerOptions become make's options.
        assert env.worker_options == WorkerOptions(num_workers=1)
        assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        assert env.get_attr("size") == (2.0, 2.0, 2.0)
        env.reset(seed=0)
        flags = [env.step(np.zeros((3, 2), np.float32))[3].tolist() for _ in range(3)]
        assert flags == [[False] * 3, [True] * 3, [False] * 3]  # NEXT_STEP: a reset step
    finally:
        env.close()
    same = gymnasium.make_vec(vector_id, num_envs=2, backend="sync", autoreset_mode="SameStep")
    try:
        assert same.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    finally:
        same.close()
        gymnasium.registry.pop(vector_id)

"""JumanjiEnv: Jumanji's specs as spaces, its terminations and truncations apart, same-step reset,
and Jumanji envs trained fused by ``batchppo train --env module:factory`` (issue 42; jumanji is in
the test extra)."""

from __future__ import annotations

import types
from pathlib import Path

import jax
import jax.numpy as jnp
import jumanji
import numpy as np
import pytest
from jumanji import specs
from jumanji.wrappers import JumanjiToDMEnvWrapper

from batchppo import cli
from batchppo.backends import JumanjiEnv, check_jumanji_id, factory_backend, make_env
from batchppo.backends.jumanji_env import jumanji_spaces
from batchppo.core import spaces
from batchppo.core.env import Env
from batchppo.core.simulation import init_sim_state, rollout
from batchppo.experiment.config import configs, recipes

HERE = Path(__file__).parent
UP = 0  # Snake's actions: up, right, down, left

run_rollout = jax.jit(rollout, static_argnums=(0, 1, 4))


@pytest.fixture
def factories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def constant(action: np.ndarray):
    """A policy that always sends ``action`` (one env's action) to every env."""

    def policy(params, carry, obs, first, key):
        batch = (first.shape[0], *np.shape(action))
        return jnp.broadcast_to(jnp.asarray(action, jnp.int32), batch), {}, carry

    return policy


def assert_box(space, shape, dtype, low, high) -> None:
    assert isinstance(space, spaces.Box), space
    assert (space.shape, space.dtype) == (shape, np.dtype(dtype))
    np.testing.assert_array_equal(space.low, np.broadcast_to(np.float32(low), shape))
    np.testing.assert_array_equal(space.high, np.broadcast_to(np.float32(high), shape))


def test_the_api_is_read_by_shape():
    snake = jumanji.make("Snake-v1")
    assert factory_backend(snake) == "jumanji"
    # dm_env's specs are methods: not Jumanji's API.
    assert factory_backend(JumanjiToDMEnvWrapper(snake)) is None


def test_snake_specs_are_its_spaces_and_its_observations_a_dict():
    """Snake's ``Observation(grid, step_count, action_mask)`` is a dict of its three fields, the
    action mask kept; the float grid alone is range-normalised."""
    env = JumanjiEnv("Snake-v1", 2, normalize_ranges=False)
    assert isinstance(env, Env) and env.max_length == 4000  # Snake's own time_limit
    obs_space = env.spec.obs_space
    assert sorted(obs_space) == ["action_mask", "grid", "step_count"]
    assert_box(obs_space["grid"], (12, 12, 5), np.float32, 0.0, 1.0)
    assert_box(obs_space["action_mask"], (4,), np.bool_, 0.0, 1.0)
    assert isinstance(obs_space["step_count"], spaces.Discrete)
    assert obs_space["step_count"].n == 4000
    assert isinstance(env.spec.action_space, spaces.Discrete) and env.spec.action_space.n == 4
    assert env.spec.discrete and env.spec.num_actions == 4 and env.spec.obs_shape is None

    normalized = JumanjiEnv("Snake-v1", 2).spec.obs_space
    assert_box(normalized["grid"], (12, 12, 5), np.float32, -1.0, 1.0)
    assert_box(normalized["action_mask"], (4,), np.bool_, 0.0, 1.0)

    _, obs = jax.jit(env.reset)(jax.random.key(0))
    assert jax.tree.map(lambda x: (x.shape, x.dtype), obs) == {
        "action_mask": ((2, 4), np.dtype(np.bool_)),
        "grid": ((2, 12, 12, 5), np.dtype(np.float32)),
        "step_count": ((2,), np.dtype(np.int32)),
    }
    np.testing.assert_array_equal(obs["grid"][..., 1].sum(axis=(1, 2)), [1, 1])  # one head


def test_nested_multi_discrete_and_unbounded_specs():
    """Maze's positions are Specs inside the observation's Spec (dicts in the dict);
    Minesweeper's action a MultiDiscreteArray; Game2048's board an unbounded Array."""
    maze = JumanjiEnv("Maze-v0", 2)
    position = maze.spec.obs_space["agent_position"]
    assert sorted(position) == ["col", "row"]
    assert_box(position["row"], (), np.int32, 0, 9)
    assert_box(maze.spec.obs_space["step_count"], (), np.int32, -np.inf, np.inf)
    _, obs = jax.jit(maze.reset)(jax.random.key(1))
    assert obs["agent_position"]["row"].shape == (2,)
    assert np.all((obs["agent_position"]["row"] >= 0) & (obs["agent_position"]["row"] <= 9))

    minesweeper = JumanjiEnv("Minesweeper-v0", 2, max_length=100)
    assert isinstance(minesweeper.spec.action_space, spaces.MultiDiscrete)
    assert minesweeper.spec.action_space.nvec == (10, 10)

    board = JumanjiEnv("Game2048-v1", 2, max_length=100).spec.obs_space["board"]
    assert_box(board, (4, 4), np.int32, -np.inf, np.inf)


def expected_ends(head_row: np.ndarray, max_length: int, limit_ends: bool):
    """Snake moving up from its head's row ``r`` leaves the board at its ``r + 1``-th step
    (a termination); at ``max_length`` steps the episode ends first: a termination where Snake's
    own time limit ends it (a discount of 0), else our truncation."""
    count = np.zeros(head_row.shape[1], np.int64)
    terminated, truncated, lengths = [], [], []
    for row in head_row:
        count += 1
        at_limit = count >= max_length
        term = (row == 0) | (at_limit & limit_ends)
        trunc = at_limit & ~term
        terminated.append(term)
        truncated.append(trunc)
        lengths.append(count.copy())
        count[term | trunc] = 0
    return np.array(terminated), np.array(truncated), np.array(lengths)


@pytest.mark.parametrize("own_limit", [False, True], ids=["max_length", "snake_time_limit"])
def test_snake_ends_exactly_with_same_step_resets(own_limit):
    """Up, always, on a 6x6 board: the done flags and the step counts of ``obs`` and
    ``final_obs`` follow the head's starting row, step by step."""
    kwargs = {"num_rows": 6, "num_cols": 6, **({"time_limit": 3} if own_limit else {})}
    max_length = None if own_limit else 3
    env = JumanjiEnv(
        "Snake-v1", 4, max_length=max_length, normalize_ranges=False, env_kwargs=kwargs
    )
    assert env.max_length == 3
    steps = 24
    _, traj, stats = run_rollout(
        env, constant(np.int32(UP)), None, init_sim_state(env, (), jax.random.key(3)), steps
    )
    head_row = np.asarray(traj.obs["grid"][..., 1]).max(axis=-1).argmax(axis=-1)
    terminated, truncated, lengths = expected_ends(head_row, 3, own_limit)
    np.testing.assert_array_equal(traj.terminated, terminated)
    np.testing.assert_array_equal(traj.truncated, truncated)
    assert terminated.any() and (truncated.any() != own_limit)
    done = terminated | truncated
    np.testing.assert_array_equal(stats.length, np.where(done, lengths, 0))
    # final_obs is the step's own observation; obs the next one, a fresh episode where one ended.
    np.testing.assert_array_equal(traj.final_obs["step_count"], lengths)
    np.testing.assert_array_equal(traj.obs["step_count"][1:], np.where(done, 0, lengths)[:-1])
    np.testing.assert_array_equal(traj.first[1:], done[:-1])
    kept = ~done[:-1]
    np.testing.assert_array_equal(traj.final_obs["grid"][:-1][kept], traj.obs["grid"][1:][kept])
    assert traj.reward.dtype == jnp.float32


def test_jumanji_s_own_truncation_is_a_truncation(factories):
    """Connector (2 agents as one) ends at its time limit with Jumanji's ``truncation``: a last
    step with a nonzero discount, truncated with our max_length far away."""
    env = make_env(
        "jax_factories:connector", 2, "jumanji", max_length=100, env_kwargs={"time_limit": 3}
    )
    assert env.max_length == 100
    assert isinstance(env.spec.action_space, spaces.MultiDiscrete)
    noop = np.zeros(2, np.int32)  # each agent stays: none connects, none is blocked
    _, traj, stats = run_rollout(
        env, constant(noop), None, init_sim_state(env, (), jax.random.key(0)), 7
    )
    assert not bool(traj.terminated.any())
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(traj.truncated).all(axis=1)), [2, 5])
    assert int(np.asarray(traj.truncated).sum()) == 4
    np.testing.assert_array_equal(stats.length[2], [3, 3])


def test_autoreset_first_restarts_each_env_from_its_first_state():
    env = JumanjiEnv(
        "Snake-v1", 3, max_length=2, env_kwargs={"num_rows": 6, "num_cols": 6}, autoreset="first"
    )
    _, traj, _ = run_rollout(
        env, constant(np.int32(UP)), None, init_sim_state(env, (), jax.random.key(5)), 8
    )
    first = np.asarray(traj.first)
    grid = np.asarray(traj.obs["grid"])
    assert first[1:].any()
    for t, env_index in zip(*np.nonzero(first), strict=True):
        np.testing.assert_array_equal(grid[t, env_index], grid[0, env_index])


def test_autoreset_optimistic_shares_the_steps_fresh_resets():
    """Three envs at one fresh reset a step (``reset_ratio=3``), every episode cut at each
    step: the three restart from one and the same grid."""
    env = JumanjiEnv(
        "Snake-v1", 3, max_length=1, env_kwargs={"num_rows": 6, "num_cols": 6},
        autoreset="optimistic", reset_ratio=3,
    )  # fmt: skip
    state, _ = env.reset(jax.random.key(5))
    out = env.step(state, jnp.full((3,), UP, jnp.int32), jax.random.key(6))
    _, fresh = env._reset_all(jax.random.key(6), 1)
    grid = np.asarray(out.obs["grid"])
    np.testing.assert_array_equal(grid, np.repeat(np.asarray(fresh["grid"]), 3, axis=0))


def test_bad_envs_and_specs_are_one_line(factories):
    with pytest.raises(ValueError, match=r"its reward has shape \(10,\), one per agent; .*"):
        make_env("Connector-v3", 2, "jumanji")
    with pytest.raises(ValueError, match="wrapped in Jumanji's AutoResetWrapper; return it"):
        make_env("jax_factories:auto_reset_snake", 2, "jumanji")
    with pytest.raises(ValueError, match=r"unknown Jumanji env id 'Snake-v9'\. Did you mean"):
        check_jumanji_id("Snake-v9")
    with pytest.raises(ValueError, match="no time_limit of its own; set max_length"):
        make_env("Game2048-v1", 2, "jumanji")
    with pytest.raises(ValueError, match=r"returned gymnax's API; set backend=gymnax"):
        make_env("jax_factories:cartpole_env", 2, "jumanji")
    with pytest.raises(ValueError, match=r"returned jumanji's API; set backend=jumanji"):
        make_env("jax_factories:snake", 2, "gymnax")
    grid_action = types.SimpleNamespace(
        observation_spec=specs.Array((3,), jnp.float32, "obs"),
        action_spec=specs.MultiDiscreteArray(jnp.array([[2, 3], [4, 5]]), name="moves"),
    )
    with pytest.raises(spaces.UnsupportedSpaceError) as error:
        jumanji_spaces(grid_action, "'mine'")
    assert str(error.value) == (
        "'mine': action spec: MultiDiscreteArray 'moves' is not supported (needs a "
        "MultiDiscreteArray of rank 1); map it to a supported spec in a wrapper of the env "
        "(jumanji.wrappers.Wrapper)"
    )
    integer_box = types.SimpleNamespace(
        observation_spec=specs.Array((3,), jnp.float32, "obs"),
        action_spec=specs.BoundedArray((2,), jnp.int16, 0, 5, "moves"),  # as MultiCVRP's
    )
    with pytest.raises(spaces.UnsupportedSpaceError, match=r"^'mine': action spec: BoundedArray "):
        jumanji_spaces(integer_box, "'mine'")


def test_start_up_mistakes_are_one_line_with_exit_2(capsys, tmp_path):
    """The backend's probe builds one env before a run dir is made: from a recipe or a config,
    a Jumanji env that batchppo cannot run is one line, exit status 2."""
    logs = ["--logdir", str(tmp_path / "logs"), "--progress", "none"]
    code = cli.main(
        ["train", "--env", "jumanji:make", "--set", "env_kwargs={id: Connector-v3}", *logs]
    )
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "batchppo: error: env 'jumanji:make': its reward has shape (10,), one per agent; "
        "batchppo trains one agent per env: wrap it in jumanji.wrappers.MultiToSingleWrapper in "
        "a factory (--debug shows the traceback)"
    )
    argv = ["--config", "cartpole_jax", "--set", "backend=jumanji", "--env", "jumanji:make"]
    code = cli.main(["train", *argv, "--set", "env_kwargs={id: MultiCVRP-v0}", *logs])
    assert code == 2
    assert capsys.readouterr().err.startswith(
        "batchppo: error: env 'jumanji:make': action spec: BoundedArray 'actions' is not "
        "supported (needs one DiscreteArray, MultiDiscreteArray or float BoundedArray or Array)"
    )
    # Game2048 ends only when the board is full: with max_length null nothing bounds it.
    unbounded = ["--set", "env_kwargs={id: Game2048-v1}", "--set", "max_length=null"]
    assert cli.main(["train", "--env", "jumanji:make", *unbounded, *logs]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "batchppo: error: env 'jumanji:make' has no time limit of its own; set max_length "
        "(--set max_length=N) (--debug shows the traceback)"
    )
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").iterdir())


def test_recipes_of_jumanji_envs():
    config, message = recipes.recipe_for_env("jumanji:make", {"id": "Snake-v1"})
    assert (config.backend, config.max_length, config.cnn) == ("jumanji", None, "minatar")
    assert message == (
        "no --config: jumanji:make returns an env with Jumanji's API, observations "
        "{action_mask: Box((4,), bool), grid: Box((12, 12, 5), float32), step_count: "
        "Discrete(4000)}, Discrete(4) actions, so the run is fused on the jumanji backend from "
        "the breakout_minatar recipe (10,000,000 steps); the env's own time limit ends episodes"
    )
    config, message = recipes.recipe_for_env("jumanji:make", {"id": "Game2048-v1"})
    assert (config.backend, config.network, config.max_length) == (
        "jumanji",
        "feed_forward",
        recipes.RECIPE_MAX_LENGTH,
    )
    assert "from the cartpole_jax recipe with network=feed_forward" in message


# A second path: CI runs the same command, and checks the same, as docs/own_env.md's Jumanji
# block in tests/test_own_env_guide.py::test_the_guide_runs[jax].
@pytest.mark.extended
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("cold_training_programs")  # its run is a few iterations
def test_train_a_jumanji_env_by_its_registry_id(capsys, tmp_path):
    """``batchppo train --env jumanji:make --set env_kwargs={id: Game2048-v1}``: the factory
    is ``jumanji.make``, called with ``id``; fused, evaluated, checkpointed."""
    argv = ["--env", "jumanji:make", "--set", "env_kwargs={id: Game2048-v1}"]
    argv += ["--set", "steps=4096", "--logdir", str(tmp_path), "--progress", "none"]
    code = cli.main(["train", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.splitlines()[0].startswith(
        "batchppo: no --config: jumanji:make returns an env with Jumanji's API, observations "
        "{action_mask: Box((4,), bool), board: Box((4, 4), int32)}, Discrete(4) actions, so the "
        "run is fused on the jumanji backend from the cartpole_jax recipe with "
        "network=feed_forward"
    )
    assert "done: 4,096 steps, eval score" in out
    (run_dir,) = tmp_path.glob("*-make")
    stored = configs.load_config(run_dir / "config.yaml")
    assert (stored.backend, stored.env_kwargs) == ("jumanji", {"id": "Game2048-v1"})
    assert (run_dir / "checkpoints" / "ckpt-000000004096.msgpack").exists()

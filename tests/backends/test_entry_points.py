"""Backends of other packages, through the ``batchppo.backends`` entry-point group.

Each test installs a tiny package (``install_package``: its module and a ``.dist-info`` folder
whose ``entry_points.txt`` declares the group, found by ``importlib.metadata`` on ``sys.path``),
and makes the registry load the group afresh; nothing of batchppo is edited or told of the
package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest
import yaml

from batchppo import backends, cli
from batchppo.core.registry import EntryPointWarning

GROUP = backends.ENTRY_POINT_GROUP

pytestmark = pytest.mark.timeout(300)

TINY_MODULE = '''
"""A user's backend package: importing it registers the fused backend "tiny", whose env is a
corridor walk written in JAX against batchppo's Env protocol."""

import jax.numpy as jnp
import numpy as np

from batchppo.backends import Backend, FactoryRecipe, register
from batchppo.backends.factories import call_factory, is_factory_id
from batchppo.core import spaces
from batchppo.core.env import EnvSpec, StepResult

BUILT = []


class Corridor:
    """The game a factory returns: a corridor of ``length`` cells."""

    def __init__(self, length=5):
        self.length = length


def corridor(length=5):
    """The package's env factory (``--env tinybackend:corridor``)."""
    return Corridor(length)


class CorridorEnv:
    """A batch of walks from cell 0: action 1 steps right, 0 left; the last cell ends the
    episode (terminated, reward 1), each other step costs 0.01, ``max_length`` steps cut it."""

    def __init__(self, game, num_envs, max_length):
        self._game, self._num_envs, self._max_length = game, num_envs, max_length or 50

    @property
    def spec(self):
        obs = spaces.box((1,), np.float32, 0, self._game.length - 1)
        return EnvSpec.from_spaces(obs, spaces.Discrete(2))

    @property
    def num_envs(self):
        return self._num_envs

    def reset(self, key):
        cells = jnp.zeros(self._num_envs, jnp.int32)
        return (cells, cells), cells[:, None].astype(jnp.float32)

    def step(self, state, action, key):
        cell, steps = state
        cell = jnp.clip(cell + 2 * action.astype(jnp.int32) - 1, 0, self._game.length - 1)
        steps = steps + 1
        terminated = cell == self._game.length - 1
        truncated = (steps >= self._max_length) & ~terminated
        done = terminated | truncated
        final_obs = cell[:, None].astype(jnp.float32)
        cell, steps = jnp.where(done, 0, cell), jnp.where(done, 0, steps)
        return StepResult(
            state=(cell, steps),
            obs=cell[:, None].astype(jnp.float32),
            reward=jnp.where(terminated, 1.0, -0.01),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


def make_tiny_env(env_id, num_envs, *, max_length, env_kwargs, **_):
    game = call_factory(env_id, env_kwargs) if is_factory_id(env_id) else Corridor(**env_kwargs)
    BUILT.append((env_id, num_envs))
    return CorridorEnv(game, num_envs, max_length)


def check_tiny_id(env_id):
    if env_id != "Corridor-v0" and not is_factory_id(env_id):
        raise ValueError(f"unknown tiny env id {env_id!r}; the tiny backend has Corridor-v0")


def record(name):
    return Backend(
        name=name,
        make=make_tiny_env,
        check_env_id=check_tiny_id,
        host=False,
        description="a tiny package's envs",
        detect=lambda product: isinstance(product, Corridor),
        recipe=lambda env_id, game: FactoryRecipe(
            "cartpole_jax", f"a corridor of {game.length} cells", {"policy_layers": (8,)}
        ),
    )


def more_backends():
    """An entry point that is a callable: the records it returns are registered."""
    return [record("tiny-a"), record("tiny-b")]


NOT_A_BACKEND = 3

register(record("tiny"))
'''

BROKEN_MODULE = """
raise ImportError("no simulator here\\n(a second line that the warning leaves out)")
"""


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """The registry loads its entry points again, and forgets the tiny package's afterwards
    (those its module registered when a run imported it for its factory too)."""
    backends.BACKENDS.forget_entry_points()
    yield
    backends.BACKENDS.forget_entry_points()
    for name in ("tiny", "tiny-a", "tiny-b"):
        backends.BACKENDS.pop(name, None)


# One iteration of one epoch of one minibatch: the run's whole path on the tiny backend. Both
# runs of a tiny env compile the same programs (the recipe's network and max_length), with the
# options of the programs that run once.
SMALL_RUN = ["--set", "steps=1024", "--set", "update_epochs=1", "--set", "num_minibatches=1"]


@pytest.mark.usefixtures("cold_training_programs")
def test_a_backend_from_an_entry_point_trains_from_the_cli(
    tmp_path, install_package, fresh_registry
):
    install_package("tinybackend", {GROUP: {"tiny": "tinybackend"}}, {"tinybackend": TINY_MODULE})
    assert "tiny" not in backends.BACKENDS.registered()  # nothing imported the package
    logdir = tmp_path / "logs"
    code = cli.main(
        [
            "train", "--config", "cartpole_jax", "--set", "backend=tiny",
            "--set", "env=Corridor-v0", "--set", "policy_layers=[8]", "--set", "max_length=1000",
            *SMALL_RUN, "--logdir", str(logdir), "--progress", "none",
        ]
    )  # fmt: skip
    assert code == 0
    (config_file,) = logdir.glob("*/config.yaml")
    stored = yaml.safe_load(config_file.read_text())
    assert (stored["backend"], stored["env"]) == ("tiny", "Corridor-v0")
    assert ("Corridor-v0", 16) in sys.modules["tinybackend"].BUILT  # the package's make built it
    assert backends.get_backend("tiny").fused and backends.names()[-1] == "tiny"


@pytest.mark.usefixtures("cold_training_programs")
def test_a_backends_factory_env_trains_from_its_recipe_with_no_config(
    tmp_path, install_package, fresh_registry, capsys
):
    install_package("tinybackend", {GROUP: {"tiny": "tinybackend"}}, {"tinybackend": TINY_MODULE})
    logdir = tmp_path / "logs"
    argv = ["train", "--env", "tinybackend:corridor", *SMALL_RUN]
    assert cli.main([*argv, "--logdir", str(logdir), "--progress", "none"]) == 0
    assert capsys.readouterr().err == (
        "batchppo: no --config: tinybackend:corridor returns an env with a corridor of 5 cells, "
        "so the run is fused on the tiny backend from the cartpole_jax recipe (300,000 steps); "
        "max_length=1000 (--set max_length=N)\n"
    )  # the recipe's own steps, before --set
    (config_file,) = logdir.glob("*/config.yaml")
    stored = yaml.safe_load(config_file.read_text())
    assert (stored["backend"], stored["env"]) == ("tiny", "tinybackend:corridor")
    assert (stored["max_length"], stored["policy_layers"]) == (1000, [8])
    assert ("tinybackend:corridor", 16) in sys.modules["tinybackend"].BUILT


def test_a_broken_entry_point_warns_in_one_line_and_others_still_work(
    install_package, fresh_registry
):
    entry_points = {
        "broken": "brokenbackend",
        "tiny": "tinybackend",
        "pair": "tinybackend:more_backends",
        "number": "tinybackend:NOT_A_BACKEND",
    }
    modules = {"tinybackend": TINY_MODULE, "brokenbackend": BROKEN_MODULE}
    install_package("tinybackend", {GROUP: entry_points}, modules)
    with pytest.warns(EntryPointWarning) as caught:
        assert backends.get_backend("sync").host  # registered: no loading
        assert backends.get_backend("tiny-b").fused  # a miss: the entry points load
    messages = [str(w.message) for w in caught]
    assert messages == [
        "backend entry point 'broken' (brokenbackend) of group 'batchppo.backends' failed to "
        "load, its backends are unavailable: ImportError: no simulator here",
        "backend entry point 'number' (tinybackend:NOT_A_BACKEND) of group 'batchppo.backends' "
        "failed to load, its backends are unavailable: TypeError: int is neither a module, a "
        "Backend nor a callable",
    ]
    assert backends.names() == ("process", "sync", "ray", "gymnax", "brax", "jumanji", "ale",
                                "tiny", "tiny-a", "tiny-b")  # fmt: skip
    with pytest.raises(ValueError, match=r"^unknown backend 'tinny'\. Did you mean 'tiny'\?.*"):
        backends.get_backend("tinny")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backends.BACKENDS.load_entry_points()  # once: no second warning, no second registration
    with pytest.raises(ValueError, match=r"registered already"):
        backends.register(backends.get_backend("tiny"))


def test_the_cli_prints_a_broken_entry_point_as_one_warning_line(install_package):
    site = install_package("brokenbackend", {GROUP: {"broken": "brokenbackend"}}, {
        "brokenbackend": BROKEN_MODULE
    })  # fmt: skip
    paths = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    result = subprocess.run(
        [sys.executable, "-m", "batchppo", "list"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "batchppo: warning: backend entry point 'broken' (brokenbackend) of group "
        "'batchppo.backends' failed to load, its backends are unavailable: ImportError: no "
        "simulator here\n"
    )
    assert "cartpole_jax" in result.stdout

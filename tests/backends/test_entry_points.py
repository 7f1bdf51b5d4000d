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
"""A user's backend package: importing it registers the fused backend "tiny"."""

from batchppo.backends import Backend, register

BUILT = []


class TinyEnv:
    """gymnax's env of ``env_id`` behind the core Env protocol, in the package's own class."""

    def __init__(self, env_id, num_envs, *, max_length, normalize_ranges):
        from batchppo.backends import GymnaxEnv

        self._env = GymnaxEnv(
            env_id, num_envs, max_length=max_length, normalize_ranges=normalize_ranges
        )

    @property
    def spec(self):
        return self._env.spec

    @property
    def num_envs(self):
        return self._env.num_envs

    def reset(self, key):
        return self._env.reset(key)

    def step(self, state, action, key):
        return self._env.step(state, action, key)


def make_tiny_env(env_id, num_envs, *, max_length, normalize_ranges, **_):
    BUILT.append((env_id, num_envs))
    return TinyEnv(env_id, num_envs, max_length=max_length, normalize_ranges=normalize_ranges)


def check_tiny_id(env_id):
    if env_id != "CartPole-v1":
        raise ValueError(f"unknown tiny env id {env_id!r}; the tiny backend has CartPole-v1")


def record(name):
    return Backend(
        name=name,
        make=make_tiny_env,
        check_env_id=check_tiny_id,
        host=False,
        description="a tiny package's envs",
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
    """The registry loads its entry points again, and forgets the tiny package's afterwards."""
    backends.BACKENDS.forget_entry_points()
    yield
    backends.BACKENDS.forget_entry_points()


def test_a_backend_from_an_entry_point_trains_from_the_cli(
    tmp_path, install_package, fresh_registry
):
    install_package("tinybackend", {GROUP: {"tiny": "tinybackend"}}, {"tinybackend": TINY_MODULE})
    assert "tiny" not in backends.BACKENDS.registered()  # nothing imported the package
    logdir = tmp_path / "logs"
    code = cli.main(
        [
            "train", "--config", "cartpole_jax", "--set", "backend=tiny",
            "--set", "steps=4096", "--logdir", str(logdir), "--progress", "none",
        ]
    )  # fmt: skip
    assert code == 0
    (config_file,) = logdir.glob("*/config.yaml")
    assert yaml.safe_load(config_file.read_text())["backend"] == "tiny"
    assert ("CartPole-v1", 16) in sys.modules["tinybackend"].BUILT  # the package's make built it
    assert backends.get_backend("tiny").fused and backends.names()[-1] == "tiny"


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

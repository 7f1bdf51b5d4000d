"""Fixtures shared across the test packages."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

_RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "default_worker")

# One JAX compilation cache per test session, in a fresh directory that the xdist workers and
# the runs tests start in subprocesses share (they inherit the variable): many tests compile
# the same small training programs, and each is then compiled once. The cache is the one a
# user's `batchppo train` turns on, so the tests also cover its reads. Fresh per session so
# that no result depends on what an earlier session left; `BATCHPPO_TEST_CACHE=0` runs
# every compilation cold.
_CACHE_VARIABLE = "BATCHPPO_CACHE_DIR"
_CACHE_STASH = pytest.StashKey[str]()


# XLA's older CPU fusion emitters and no LLVM optimisation in every test process (subprocesses
# inherit the flags). Most tests are bound by compiling small programs that then run briefly,
# and these flags compile them faster; the programs compute the same functions, up to float
# rounding (LLVM's level changes how it orders and fuses float operations). The package already
# compiles its run-once programs so (``COLD_COMPILER_OPTIONS``); its hot programs pass their own
# optimisation level in ``compiler_options``, which the flag does not override, so they compile
# as a user's do. The level flag covers what passes no options: the tests' own jits, eager
# operations and the package's programs without options. A flag already in XLA_FLAGS is left as
# set; `BATCHPPO_TEST_XLA_DEFAULTS=1` compiles every test program with XLA's defaults.
_FAST_COMPILE_FLAGS = ("--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0")


def _compile_fast() -> None:
    if os.environ.get("BATCHPPO_TEST_XLA_DEFAULTS") == "1":
        return
    flags = os.environ.get("XLA_FLAGS", "")
    added = [flag for flag in _FAST_COMPILE_FLAGS if flag.split("=")[0] not in flags]
    os.environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()


def pytest_configure(config: pytest.Config) -> None:
    _compile_fast()  # before any test initialises JAX's backend, which reads XLA_FLAGS
    if os.environ.get("BATCHPPO_TEST_CACHE", "1") == "0":
        os.environ["BATCHPPO_COMPILATION_CACHE"] = "0"
        return
    if not hasattr(config, "workerinput"):  # the controller (or a run without workers)
        path = tempfile.mkdtemp(prefix="batchppo-test-jax-cache-")
        os.environ[_CACHE_VARIABLE] = config.stash[_CACHE_STASH] = path
    from batchppo.algorithms.training.programs import enable_compilation_cache

    enable_compilation_cache(os.environ[_CACHE_VARIABLE])


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CACHE_STASH in config.stash:
        shutil.rmtree(config.stash[_CACHE_STASH], ignore_errors=True)


@pytest.fixture
def no_compilation_cache() -> Iterator[None]:
    """The test compiles without the session's compilation cache, which it restores after.

    For tests of big programs that no other test compiles (a Brax env's physics): writing
    their executables to the cache costs time that no later read repays. JAX decides once
    per process whether the cache is in use; ``reset_cache`` makes it decide again.
    """
    import jax
    from jax._src import compilation_cache

    enabled = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    yield
    jax.config.update("jax_enable_compilation_cache", enabled)
    compilation_cache.reset_cache()


@pytest.fixture
def cold_training_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The training programs (iteration, update) compile with the XLA options of the programs
    that run once (``cold_compiler_options``), as the test's trainers are built.

    For end-to-end tests of a few iterations, whose compilation is most of their time and
    whose optimised code would run too briefly to matter; the training programs as the
    package compiles them are the other training tests' to cover.
    """
    _compile_training_programs_cold(monkeypatch)


@pytest.fixture(scope="module")
def module_cold_training_programs() -> Iterator[None]:
    """``cold_training_programs`` for a whole module: for module-scoped fixtures that train
    runs of a few iterations, which the module's tests then load (their programs compile
    with the same options)."""
    with pytest.MonkeyPatch.context() as patch:
        _compile_training_programs_cold(patch)
        yield


def _compile_training_programs_cold(patch: pytest.MonkeyPatch) -> None:
    from batchppo.algorithms.training import programs

    patch.setattr(programs, "COMPILER_OPTIONS", programs.cold_compiler_options())


def ray_children() -> list[str]:
    """Command lines of this process's Ray daemons and workers still running."""
    names = []
    for child in psutil.Process().children(recursive=True):
        try:
            name = " ".join(child.cmdline()) or child.name()
        except psutil.Error:
            continue
        if any(part in name for part in _RAY_PROCESSES):
            names.append(name)
    return names


def wait_no_ray_children(timeout: float = 10.0) -> list[str]:
    """Waits up to ``timeout`` s for this process's Ray processes to exit; returns those left."""
    deadline = time.monotonic() + timeout
    while (left := ray_children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="session")
def ray_processes_left() -> Callable[[], list[str]]:
    """``wait_no_ray_children``, for fixtures that check Ray shut down completely."""
    return wait_no_ray_children


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[Any]]:
    """``spy(owner, name, record)`` wraps ``owner.name``: each call from then on still runs,
    and ``record(*args, **kwargs)`` of it is appended to the list ``spy`` returns."""

    def wrap(owner: Any, name: str, record: Callable[..., Any]) -> list[Any]:
        calls: list[Any] = []
        real = getattr(owner, name)

        def spied(*args: Any, **kwargs: Any) -> Any:
            calls.append(record(*args, **kwargs))
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, spied)
        return calls

    return wrap


@pytest.fixture
def ray_init_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of each ``ray.init`` call, recorded instead of made: for tests
    that a path fails without ``ray.init``, which retries an address that does not answer for
    minutes."""
    ray = pytest.importorskip("ray")
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: calls.append(kwargs))
    return calls


# A user's own envs, as a new user writes them in ./myenvs.py: none takes ``render_mode``
# unless it renders, one registers an id, the others are reached through factories.
USER_ENVS = '''
import gymnasium
import numpy as np
from gymnasium import spaces


class Reach(gymnasium.Env):
    """Move a point to the origin: reward -|p|^2."""

    def __init__(self, size=1.0):
        self.size = size
        self.observation_space = spaces.Box(-size, size, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.p = self.np_random.uniform(-self.size, self.size, 2).astype(np.float32)
        return self.p, {}

    def step(self, action):
        self.p = np.clip(self.p + 0.1 * np.asarray(action), -self.size, self.size)
        self.p = self.p.astype(np.float32)
        return self.p, -float(np.sum(self.p**2)), False, False, {}


class RenderingReach(Reach):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, size=1.0, render_mode=None):
        super().__init__(size)
        self.render_mode = render_mode

    def render(self):
        return np.zeros((8, 8, 3), np.uint8)


class Choose(gymnasium.Env):
    """Pick the action the observation shows: reward 1 if right; episodes of 10 steps."""

    observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.right = 0, int(self.np_random.integers(2))
        return np.eye(2, dtype=np.float32)[self.right], {}

    def step(self, action):
        reward = float(int(action) == self.right)
        self.t, self.right = self.t + 1, int(self.np_random.integers(2))
        obs = np.eye(2, dtype=np.float32)[self.right]
        return obs, reward, False, self.t >= 10, {}


class Pixels(Choose):
    """Choose, shown as an HWC image: the right action's channel is lit."""

    observation_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)

    def _image(self, onehot):
        lit = np.zeros(self.observation_space.shape, np.uint8)
        lit[..., int(np.argmax(onehot))] = 255
        return lit

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return self._image(obs), info

    def step(self, action):
        obs, *rest = super().step(action)
        return self._image(obs), *rest


class Frames(Pixels):
    """Choose as CHW frames of 84x84 (Atari's size)."""

    observation_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)

    def _image(self, onehot):
        lit = np.zeros(self.observation_space.shape, np.uint8)
        lit[int(np.argmax(onehot))] = 255
        return lit


class Nested(Choose):
    observation_space = spaces.Dict({"x": spaces.Box(0.0, 1.0, (2,), np.float32)})

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return {"x": obs}, info

    def step(self, action):
        obs, *rest = super().step(action)
        return {"x": obs}, *rest


def make_reach(size=1.0):
    return Reach(size)


def make_choose():
    return Choose()


def make_pixels():
    return Pixels()


def make_frames():
    return Frames()


def make_nested():
    return Nested()


class Worded(Choose):
    observation_space = spaces.Text(5)


def make_worded():
    return Worded()


def make_broken():
    raise RuntimeError("the simulator licence expired")


class Unresettable(Reach):
    def reset(self, *, seed=None, options=None):
        raise RuntimeError("the simulator lost its state")


def make_unresettable():
    return Unresettable()


def make_nothing():
    return 3


def needs_size(size):
    return Reach(size)


NUMBER = 3

gymnasium.register("MyReach-v0", entry_point=Reach, max_episode_steps=50)
'''


@pytest.fixture
def user_envs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A working directory holding ``myenvs.py`` (``USER_ENVS``) and ``brokenenvs.py``
    (whose import fails), made the cwd, as a user's project is; yields its path."""
    root = tmp_path_factory.getbasetemp() / "user_envs"
    if not root.exists():
        root.mkdir()
        (root / "myenvs.py").write_text(USER_ENVS)
        (root / "brokenenvs.py").write_text("import gymnasium\nraise NameError('oops')\n")
    monkeypatch.chdir(root)
    return root


@pytest.fixture(autouse=True)
def forget_user_modules() -> Iterator[None]:
    """Each test imports ``myenvs`` and ``brokenenvs`` afresh (tests write modules of those
    names with other contents): they leave ``sys.modules``, and the id ``myenvs`` registers
    leaves Gymnasium's registry, when the test ends."""
    yield
    for name in ("myenvs", "brokenenvs"):
        sys.modules.pop(name, None)
    if "gymnasium" in sys.modules:
        sys.modules["gymnasium"].registry.pop("MyReach-v0", None)


InstallPackage = Callable[[str, Mapping[str, Mapping[str, str]], Mapping[str, str]], Path]
"""``install(name, entry_points, modules)``: see ``install_package``."""


@pytest.fixture
def install_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InstallPackage]:
    """Installs a user's package as pip would leave it, with nothing of batchppo told of it.

    ``install(name, entry_points, modules)`` writes the modules (name -> source) and a
    ``<name>-0.1.dist-info`` folder (its ``METADATA``, and an ``entry_points.txt`` of the groups
    in ``entry_points``: group -> entry point name -> value) into a fresh folder, puts that on
    ``sys.path``, where ``importlib.metadata`` finds the entry points, and returns the folder.
    The modules leave ``sys.modules`` (and the folder ``sys.path``) when the test ends.
    """
    written: list[str] = []

    def install(
        name: str, entry_points: Mapping[str, Mapping[str, str]], modules: Mapping[str, str]
    ) -> Path:
        root = tmp_path / f"site-{name}"
        info = root / f"{name}-0.1.dist-info"
        info.mkdir(parents=True)
        for module, source in modules.items():
            (root / f"{module}.py").write_text(textwrap.dedent(source))
            written.append(module)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        groups = "".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items())
            for group, points in entry_points.items()
        )
        (info / "entry_points.txt").write_text(groups)
        monkeypatch.syspath_prepend(str(root))
        return root

    yield install
    for module in written:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()

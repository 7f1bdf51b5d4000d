"""The built-in backends' records (``batchppo.backends``): the lists derived from them and their
env id checks."""

from __future__ import annotations

import types

import pytest

from batchppo import backends
from batchppo.backends import get_backend, names


def test_builtin_records_and_derived_lists():
    assert names() == ("process", "sync", "ray", "gymnax", "brax", "jumanji", "ale")
    assert names(host=True) == ("process", "sync", "ray", "ale")
    assert backends.HOST_BACKENDS == ("process", "sync", "ray")  # those envs.make builds
    assert names(host=False) == ("gymnax", "brax", "jumanji")
    assert names(supports_restarts=True) == ("process", "sync")
    assert all(get_backend(n).fused for n in ("gymnax", "brax", "jumanji"))
    assert not any(get_backend(n).fused for n in names(host=True))
    # A config's backend_options parse into the backend's options object, its defaults for
    # the keys not given; the run-level settings are the config's own fields.
    from batchppo.backends.host import ProcessOptions, SyncOptions
    from batchppo.backends.ray import RayOptions
    from batchppo.core.autoreset import RestartOptions

    given = {"address": "auto", "num_cpus": 1, "step_timeout": 7}
    assert get_backend("ray").check_options(given) == RayOptions(
        address="auto", num_cpus=1.0, step_timeout=7.0, startup_timeout=60.0
    )
    assert get_backend("process").check_options({}) == ProcessOptions(step_timeout=60.0)
    assert get_backend("sync").check_options({}) == SyncOptions(max_restarts=0)
    assert get_backend("gymnax").check_options({}) == RestartOptions("select", 16)
    assert vars(get_backend("brax").check_options({})) == {
        "autoreset": "cond",
        "reset_ratio": 16,
        "backend": None,
    }
    config = types.SimpleNamespace(env_wrappers=("minigrid.wrappers.ImgObsWrapper",))
    for name in ("process", "sync", "ray"):  # every host backend envs.make builds takes them
        assert get_backend(name).run_settings(config) == {"wrappers": config.env_wrappers}
    assert get_backend("gymnax").run_settings(config) == {}
    assert get_backend("ray").option_names() == (
        "num_workers",
        "envs_per_worker",
        "step_timeout",
        "address",
        "num_cpus",
        "startup_timeout",
    )
    # Every built-in backend declares its options; only the pure-JAX ones change learning.
    assert all(get_backend(n).options is not None for n in names())
    assert {
        n: get_backend(n).learned_options() for n in names() if get_backend(n).learned_options()
    } == {
        "gymnax": ("autoreset", "reset_ratio"),
        "brax": ("autoreset", "reset_ratio", "backend"),
        "jumanji": ("autoreset", "reset_ratio"),
    }
    assert backends.prose(["a", "b", "c"]) == "a, b and c"


def test_env_id_checks_are_one_line_with_close_matches():
    backends.check_gymnasium_id("Pendulum-v1")
    # module:EnvId imports the module (envs/make.py's rule, the one home of it).
    with pytest.raises(ValueError, match=r"^env 'some_module:Anything-v0': cannot import"):
        backends.check_gymnasium_id("some_module:Anything-v0")
    with pytest.raises(ValueError, match=r"unknown Gymnasium env id 'Pendulum-v9'\. Did you"):
        backends.check_gymnasium_id("Pendulum-v9")
    with pytest.raises(ValueError, match=r"unknown gymnax env id 'Cartpole'.*CartPole-v1"):
        backends.check_gymnax_id("Cartpole")


def test_every_backend_is_installed_where_the_tests_run():
    # The test extra installs every backend's optional package, so no backend (nor its
    # presets in `batchppo list`) ships untested; a new backend's package joins the extra.
    missing = [f"{b.name} ({b.requires})" for b in backends.BACKENDS.values() if not b.available()]
    assert not missing, f"add these backends' packages to the test extra: {missing}"


def test_gymnasium_ids_name_the_package_their_envs_need():
    from batchppo.backends.host import gymnasium_env_requires

    assert gymnasium_env_requires("HalfCheetah-v5") == "mujoco"
    assert gymnasium_env_requires("Humanoid-v5") == "mujoco"
    assert gymnasium_env_requires("ALE/Breakout-v5") == "ale_py"
    assert gymnasium_env_requires("craftax.craftax_env:make_craftax_env_from_name") == "craftax"
    assert gymnasium_env_requires("Pendulum-v1") is None
    assert gymnasium_env_requires("myenvs:MyReach-v0") is None
    assert gymnasium_env_requires("NoSuchEnv-v0") is None  # check_env_id names that one
    for name in ("process", "sync", "ray"):
        assert get_backend(name).env_requires is gymnasium_env_requires
    assert get_backend("ray").requires == "ray"


def test_every_extra_an_install_line_names_is_in_pyproject():
    import re
    from pathlib import Path

    from batchppo.core.backends import OPTIONAL_PACKAGES

    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    section = re.search(r"\[project\.optional-dependencies\]\n(.*?)\n\[", pyproject, re.S)
    extras = set(re.findall(r"^(\w+) = \[", section.group(1), re.M))
    for module, found in OPTIONAL_PACKAGES.items():
        assert found.module == module
        extra = re.fullmatch(r"batchppo\[(\w+)\]", found.name)
        if extra is None:  # a package in no extra: installed alone
            assert found.install.startswith(f"pip install {found.name}"), found
            continue
        assert extra.group(1) in extras, found
        assert found.install == f"pip install 'batchppo[{extra.group(1)}]'"

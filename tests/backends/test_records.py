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
    ray_config = types.SimpleNamespace(
        backend_options={"address": "auto", "num_cpus": 1, "startup_timeout": 5},
        env_step_timeout=7.0,
        env_wrappers=["minigrid.wrappers.ImgObsWrapper"],
    )
    wrappers = ("minigrid.wrappers.ImgObsWrapper",)  # every host backend's envs take them
    assert get_backend("ray").make_options(ray_config) == {
        "address": "auto",
        "num_cpus": 1.0,
        "startup_timeout": 5.0,
        "step_timeout": 7.0,
        "wrappers": wrappers,
    }
    process_config = types.SimpleNamespace(**{**vars(ray_config), "backend_options": {}})
    assert get_backend("process").make_options(process_config) == {
        "step_timeout": 7.0,
        "wrappers": wrappers,
    }
    assert get_backend("sync").make_options(process_config) == {"wrappers": wrappers}
    assert get_backend("gymnax").make_options(process_config) == {}
    assert get_backend("ray").option_names() == ("address", "num_cpus", "startup_timeout")
    assert [n for n in names() if get_backend(n).option_names()] == ["ray", "ale"]
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

"""The backend registry: records, lookups and the lists derived from them."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from batchppo import backends
from batchppo.backends import Backend, get_backend, lazy, names, register


def test_builtin_records_and_derived_lists():
    assert names() == ("process", "sync", "ray", "gymnax", "brax")
    assert names(host=True) == ("process", "sync", "ray")
    assert names(host=False) == ("gymnax", "brax")
    assert names(supports_restarts=True) == ("process", "sync")
    assert all(get_backend(n).fused for n in ("gymnax", "brax"))
    assert not any(get_backend(n).fused for n in names(host=True))
    assert get_backend("process").load_with == "sync" and get_backend("sync").load_with is None
    ray_config = types.SimpleNamespace(
        ray_address="auto",
        ray_num_cpus=1,
        ray_startup_timeout=5,
        env_step_timeout=7.0,
        env_wrappers=["minigrid.wrappers.ImgObsWrapper"],
    )
    wrappers = ("minigrid.wrappers.ImgObsWrapper",)  # every host backend's envs take them
    assert get_backend("ray").options(ray_config) == {
        "address": "auto",
        "num_cpus": 1,
        "startup_timeout": 5,
        "step_timeout": 7.0,
        "wrappers": wrappers,
    }
    assert get_backend("process").options(ray_config) == {
        "step_timeout": 7.0,
        "wrappers": wrappers,
    }
    assert get_backend("sync").options(ray_config) == {"wrappers": wrappers}
    assert get_backend("gymnax").options(object()) == {}
    assert backends.prose(["a", "b", "c"]) == "a, b and c"


def test_unknown_backend_is_one_line_with_a_suggestion():
    with pytest.raises(ValueError, match=r"unknown backend 'gymnx'\. Did you mean 'gymnax'\?"):
        get_backend("gymnx")


def test_register_refuses_a_taken_name_and_lazy_refs_bind_arguments():
    with pytest.raises(ValueError, match="registered already"):
        register(get_backend("sync"))
    descending = lazy("builtins:sorted", reverse=True)
    assert descending([1, 3, 2]) == [3, 2, 1]
    with pytest.raises(ValueError, match="module:name"):
        lazy("os.path.join")


def test_env_id_checks_are_one_line_with_close_matches():
    backends.check_gymnasium_id("Pendulum-v1")
    # module:EnvId imports the module (envs/make.py's rule, the one home of it).
    with pytest.raises(ValueError, match=r"^env 'some_module:Anything-v0': cannot import"):
        backends.check_gymnasium_id("some_module:Anything-v0")
    with pytest.raises(ValueError, match=r"unknown Gymnasium env id 'Pendulum-v9'\. Did you"):
        backends.check_gymnasium_id("Pendulum-v9")
    with pytest.raises(ValueError, match=r"unknown gymnax env id 'Cartpole'.*CartPole-v1"):
        backends.check_gymnax_id("Cartpole")


def test_render_ids():
    gymnax = get_backend("gymnax")
    assert gymnax.render_id is not None and gymnax.render_id("Pendulum-v1", {}) == "Pendulum-v1"
    with pytest.raises(ValueError, match="default parameters"):
        gymnax.render_id("Pendulum-v1", {"max_speed": 9.0})
    with pytest.raises(ValueError, match="Gymnasium twin"):
        gymnax.render_id("Catch-bsuite", {})
    assert get_backend("brax").render_id is None


def test_the_registry_and_config_parsing_import_nothing_heavy():
    code = (
        "import sys\n"
        "from batchppo import backends\n"
        "from batchppo.experiment import configs\n"
        "config = configs.apply_overrides(configs.get_preset('cartpole'), ['backend=sync'])\n"
        "assert configs.config_from_yaml(configs.config_to_yaml(config)) == config\n"
        "assert backends.get_backend(config.backend).host\n"
        "heavy = [m for m in ('jax', 'flax', 'gymnax', 'gymnasium', 'ray', 'brax') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_lazy_core_and_backends_packages_keep_their_names():
    import batchppo.core.simulation  # the module's name is not the function's
    from batchppo.backends import HostEnv, host_env, make_env
    from batchppo.core import simulate

    assert callable(simulate) and simulate is batchppo.core.simulation.simulate
    assert HostEnv is host_env.HostEnv and make_env is backends.make_env
    assert "rollout" in dir(batchppo.core) and "HostLoop" in dir(backends)


def test_a_record_is_frozen_and_fills_its_defaults():
    record = Backend(
        name="x",
        make=lazy("a:b"),
        check_env_id=lambda env_id: None,
        host=False,
        description="x envs",
        requires="xpkg",
    )
    assert record.title == "x" and record.install == "pip install xpkg" and record.fused
    with pytest.raises(AttributeError):
        record.host = True  # type: ignore[misc]


def test_every_backend_is_installed_where_the_tests_run():
    # The test extra installs every backend's optional package, so no backend (nor its
    # presets in `batchppo list`) ships untested; a new backend's package joins the extra.
    missing = [f"{b.name} ({b.requires})" for b in backends.BACKENDS.values() if not b.available()]
    assert not missing, f"add these backends' packages to the test extra: {missing}"

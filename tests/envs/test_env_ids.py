"""Env ids: registered ids, module:EnvId and module:factory, the start-up probe, and the
one-line errors of each (``batchppo.envs.env_ids``, re-exported by ``batchppo.envs.make``)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from batchppo.envs import env_ids, make_env_fn

pytestmark = pytest.mark.timeout(60)

# The function batchppo.envs.make shadows the module of the same name as an attribute.
make_module = importlib.import_module("batchppo.envs.make")


def test_make_re_exports_the_id_names():
    for name in env_ids.__all__:
        assert getattr(make_module, name) is getattr(env_ids, name)


def _errors(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_env_ids_name_registered_envs_module_ids_and_factories(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    source = env_ids.env_source("Pendulum-v1")
    assert (source.factory, source.path) == (None, None)
    source = env_ids.env_source("myenvs:MyReach-v0")
    assert (source.factory, source.path) == (None, str(user_envs.resolve()))
    assert env_ids.env_source("myenvs:make_reach").factory == "myenvs:make_reach"
    assert env_ids.env_source("myenvs:Reach").factory == "myenvs:Reach"  # a class
    # A factory's env gets the TimeLimit of max_length; its own limit otherwise (none here).
    env = make_env_fn("myenvs:make_reach", max_length=3, size=2.0)()
    assert env.unwrapped.size == 2.0
    env.reset(seed=0)
    truncated = [env.step(np.zeros(2, np.float32))[3] for _ in range(3)]
    assert truncated == [False, False, True]
    assert env_ids.probe_env("myenvs:make_reach").time_limit is None
    assert env_ids.probe_env("myenvs:MyReach-v0").time_limit == 50


def test_a_bad_max_length_is_refused_before_any_env_is_built():
    assert _errors(make_env_fn, "Pendulum-v1", max_length=0) == (
        "max_length must be >= 1 (or None for the env's own), got 0."
    )
    assert _errors(make_env_fn, "Pendulum-v1", max_length="200") == (
        "max_length must be an int or None, got '200'."
    )


def test_the_probe_resets_the_env_once_and_names_a_reset_that_raises(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    reach = importlib.import_module("myenvs").Reach
    reset, seeds = reach.reset, []

    def counting(self, *, seed=None, options=None):
        seeds.append(seed)
        return reset(self, seed=seed, options=options)

    monkeypatch.setattr(reach, "reset", counting)
    env_ids.probe_env("myenvs:make_reach")
    assert seeds == [0]
    message = _errors(env_ids.probe_env, "myenvs:make_unresettable")
    assert message.startswith(
        "env 'myenvs:make_unresettable': its reset raised RuntimeError: the simulator lost its "
        "state at myenvs.py:"
    )
    assert message.endswith("; fix the env (or env_kwargs)")


def test_env_id_errors_are_one_line_naming_the_fix(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    source = env_ids.env_source
    assert _errors(source, "nomodule:MyEnv-v0") == (
        "env 'nomodule:MyEnv-v0': cannot import 'nomodule' (No module named 'nomodule'): put "
        "nomodule.py in the working directory or on PYTHONPATH"
    )
    assert _errors(source, "brokenenvs:X") == (
        "env 'brokenenvs:X': importing 'brokenenvs' failed: NameError: oops"
    )
    assert _errors(source, "myenvs:make_reech") == (
        "env 'myenvs:make_reech': 'make_reech' is neither an env id that myenvs registers nor "
        "a name in myenvs. Did you mean 'make_reach'? Give 'module:EnvId' or 'module:factory'"
    )
    assert _errors(source, "myenvs:NUMBER") == (
        "env 'myenvs:NUMBER': myenvs.NUMBER is a int, not a callable that returns a gymnasium.Env"
    )


def test_start_up_errors_of_the_constructor_are_one_line(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    probe = env_ids.probe_env
    assert _errors(probe, "myenvs:make_reach", env_kwargs={"speed": 1}) == (
        "env 'myenvs:make_reach': its constructor does not take an argument of env_kwargs "
        "{'speed': 1} (TypeError: make_reach() got an unexpected keyword argument 'speed'): "
        "fix env_kwargs (--set 'env_kwargs={...}')"
    )
    assert _errors(probe, "myenvs:needs_size") == (
        "env 'myenvs:needs_size': its constructor needs arguments that env_kwargs {} does not "
        "give (TypeError: needs_size() missing 1 required positional argument: 'size'): set "
        "them, e.g. --set 'env_kwargs={name: value}'"
    )
    lines = (user_envs / "myenvs.py").read_text().splitlines()
    line = lines.index('    raise RuntimeError("the simulator licence expired")') + 1
    assert _errors(probe, "myenvs:make_broken") == (
        "env 'myenvs:make_broken': its constructor raised RuntimeError: the simulator licence "
        f'expired at myenvs.py:{line} (`raise RuntimeError("the simulator licence '
        'expired")`); fix the env (or env_kwargs)'
    )
    assert _errors(probe, "myenvs:make_nothing") == (
        "env 'myenvs:make_nothing': myenvs:make_nothing returned int, not a gymnasium.Env: "
        "return the env instance"
    )
    with pytest.raises(ValueError) as info:
        probe("myenvs:make_broken")
    assert isinstance(info.value.__cause__, RuntimeError)  # what --debug shows


def test_a_factory_is_recorded_by_module_and_name(user_envs, monkeypatch):
    monkeypatch.syspath_prepend(str(user_envs))
    import myenvs

    assert env_ids.factory_env_id(myenvs.make_reach) == "myenvs:make_reach"
    assert env_ids.factory_env_id(myenvs.Reach) == "myenvs:Reach"
    expected = (
        "env factory test_a_factory_is_recorded_by_module_and_name.<locals>.<lambda>: cannot be "
        "recorded in the run's config.yaml (a lambda, a nested function or a partial has no "
        "name to find it by): define it at the top level of your script or of a module (e.g. "
        "myenvs.py) and pass it, or pass 'module:name'; the factory's arguments go in env_kwargs"
    )
    assert _errors(env_ids.factory_env_id, lambda: myenvs.Reach()) == expected

    def local_factory():
        return myenvs.Reach()

    assert "<locals>.local_factory: cannot be recorded" in _errors(
        env_ids.factory_env_id, local_factory
    )

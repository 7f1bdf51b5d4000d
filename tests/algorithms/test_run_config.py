"""RunConfig's run-level checks (those not covered through an algorithm's config)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from batchppo.algorithms.a2c import A2CConfig
from batchppo.algorithms.ppo import PPOConfig
from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.backends.host import ProcessOptions
from batchppo.envs import WorkerOptions, make


def test_the_step_timeout_defaults_to_a_finite_limit_and_takes_none():
    assert get_backend("process").check_options({}).step_timeout == 60.0
    none = RunConfig(backend_options={"step_timeout": None})
    assert none.backend_options == {"step_timeout": None}
    assert (
        RunConfig(backend_options={"step_timeout": "none"}).backend_options == none.backend_options
    )
    assert RunConfig(backend_options={"step_timeout": 1}).backend_options == {"step_timeout": 1.0}


@pytest.mark.parametrize("bad", [0, -1.0, float("inf")])
def test_the_step_timeout_must_be_positive_seconds(bad):
    with pytest.raises(ValueError) as info:
        RunConfig(backend="ray", backend_options={"step_timeout": bad})
    # WorkerOptions' own check, named as the config key.
    assert str(info.value) == (
        "backend_options.step_timeout must be a number of seconds > 0, or None to wait for "
        f"ever; got {float(bad)!r}."
    )


def test_the_sync_batch_env_refuses_a_step_timeout():
    with pytest.raises(ValueError) as info:
        make("Pendulum-v1", 2, backend="sync", options=WorkerOptions(step_timeout=5.0))
    assert str(info.value) == (
        "step_timeout=5.0: the sync backend steps its envs in this process, which cannot bound "
        "them; use backend='process' (worker processes) for a timeout."
    )


@pytest.mark.parametrize(
    ("field", "meaning"),
    [("xla_convolutions", "true for CNN torsos"), ("host_loop", "the loop on an accelerator")],
)
def test_three_way_switches_take_true_false_or_none_only(field, meaning):
    assert getattr(RunConfig(), field) is None
    assert getattr(RunConfig(**{field: False}), field) is False
    with pytest.raises(ValueError) as info:
        RunConfig(**{field: "yes"})
    assert str(info.value) == f"{field}='yes': must be true, false or None ({meaning})"


def test_backend_options_are_checked_by_the_backend_record():
    assert RunConfig().backend_options == {}
    config = RunConfig(backend="ray", backend_options={"address": "auto", "num_cpus": 1})
    assert config.backend_options == {"address": "auto", "num_cpus": 1.0}  # as the type holds
    valid = (
        "Valid keys: num_workers, envs_per_worker, step_timeout, address, num_cpus, startup_timeout"
    )
    with pytest.raises(ValueError) as info:
        RunConfig(backend="ray", backend_options={"adress": "auto"})
    assert str(info.value) == (
        "backend_options.adress: backend 'ray' has no option 'adress'. Did you mean 'address'? "
        + valid
    )
    with pytest.raises(ValueError) as info:
        RunConfig(backend="ray", backend_options={"num_cpus": "two"})
    assert str(info.value) == (
        f"backend_options.num_cpus='two': backend 'ray' expects float. {valid}"
    )
    with pytest.raises(ValueError) as info:
        RunConfig(backend="process", backend_options={"address": "auto"})
    assert str(info.value) == (
        "backend_options.address: backend 'process' has no option 'address'. Valid keys: "
        "num_workers, envs_per_worker, step_in_parent, max_restarts, step_timeout, spin_us, "
        "worker_spin_us"
    )


def test_env_kwargs_that_are_options_of_the_backend_are_refused():
    with pytest.raises(ValueError) as info:
        RunConfig(backend="gymnax", env_kwargs={"autoreset": "first", "max_speed": 9.0})
    assert str(info.value) == (
        "env_kwargs ['autoreset']: backend 'gymnax' takes them as options, not as the env's "
        "keywords: give backend_options.autoreset (--set backend_options.KEY=VALUE)"
    )
    with pytest.raises(ValueError, match=r"^eval_env_kwargs \['backend'\]: backend 'brax'"):
        RunConfig(backend="brax", env="ant", eval_env_kwargs={"backend": "mjx"})
    # The host backends pass every keyword to the env: an env may take one named so.
    config = RunConfig(backend="process", env_kwargs={"autoreset": "first"})
    assert config.env_kwargs == {"autoreset": "first"}


@pytest.mark.parametrize("config_class", [RunConfig, PPOConfig, A2CConfig])
def test_a_config_keeps_its_parsed_options_through_replace_and_pickle(config_class):
    config = config_class(backend_options={"num_workers": 4})
    assert config.parsed_backend_options == ProcessOptions(num_workers=4)
    replaced = dataclasses.replace(config, seed=3)
    assert replaced.seed == 3 and replaced.parsed_backend_options == ProcessOptions(num_workers=4)
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config and copy.parsed_backend_options == config.parsed_backend_options

"""RunConfig's run-level checks (those not covered through an algorithm's config)."""

from __future__ import annotations

import pytest

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.envs import make


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
    assert str(info.value) == (
        f"backend_options.step_timeout={float(bad)}: must be a number of seconds > 0, or None "
        "to wait for ever"
    )


def test_the_sync_batch_env_refuses_a_step_timeout():
    with pytest.raises(ValueError) as info:
        make("Pendulum-v1", 2, backend="sync", step_timeout=5.0)
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
    valid = "Valid keys: num_workers, step_timeout, address, num_cpus, startup_timeout"
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
        "num_workers, step_timeout, max_restarts, spin_us, worker_spin_us"
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

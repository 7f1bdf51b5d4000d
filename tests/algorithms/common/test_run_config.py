"""RunConfig's run-level checks (those not covered through an algorithm's config)."""

from __future__ import annotations

import pytest

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.envs import make


def test_env_step_timeout_defaults_to_a_finite_limit_and_takes_none():
    assert RunConfig().env_step_timeout == 60.0
    assert RunConfig(env_step_timeout=None).env_step_timeout is None
    assert RunConfig(env_step_timeout=0.5).env_step_timeout == 0.5


@pytest.mark.parametrize("bad", [0, -1.0, float("inf")])
def test_env_step_timeout_must_be_positive_seconds(bad):
    with pytest.raises(ValueError) as info:
        RunConfig(env_step_timeout=bad)
    assert str(info.value) == (
        f"env_step_timeout={bad}: must be a number of seconds > 0, or None to wait for ever"
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
    assert config.backend_options == {"address": "auto", "num_cpus": 1}
    with pytest.raises(ValueError) as info:
        RunConfig(backend="ray", backend_options={"adress": "auto"})
    assert str(info.value) == (
        "backend_options.adress: backend 'ray' has no option 'adress'. Did you mean 'address'? "
        "Valid keys: address, num_cpus, startup_timeout"
    )
    with pytest.raises(ValueError) as info:
        RunConfig(backend="ray", backend_options={"num_cpus": "two"})
    assert str(info.value) == (
        "backend_options.num_cpus='two': backend 'ray' expects float. Valid keys: address, "
        "num_cpus, startup_timeout"
    )
    with pytest.raises(ValueError) as info:
        RunConfig(backend="process", backend_options={"address": "auto"})
    assert str(info.value) == (
        "backend_options {'address': 'auto'}: backend 'process' takes none (backends with "
        "options: ray and ale); drop backend_options"
    )

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

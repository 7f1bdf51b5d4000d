"""The env API's pytrees: what a step returns."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from batchppo.core.env import StepResult

FIELDS = ("state", "obs", "reward", "terminated", "truncated", "final_obs")


def test_step_result_has_the_six_documented_fields():
    values = [jnp.full((2,), i) for i in range(len(FIELDS))]
    positional = StepResult(*values)
    by_name = StepResult(**dict(zip(FIELDS, values, strict=True)))
    assert tuple(f.name for f in dataclasses.fields(StepResult)) == FIELDS
    leaves = jax.tree.leaves(positional)
    assert len(leaves) == len(FIELDS)
    assert jax.tree.all(jax.tree.map(jnp.array_equal, positional, by_name))
    # Nothing reads extras, so there is no field to drop them in silently.
    with pytest.raises(TypeError, match="info"):
        StepResult(*values, info={"x": values[0]})

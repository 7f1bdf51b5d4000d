"""The fields of a config class: their types and the valid key nearest to a misspelt one."""

from __future__ import annotations

from batchppo.experiment.config import config_fields


def test_nearest_key_by_initials_then_spelling():
    names = list(config_fields.field_types())
    assert config_fields.nearest_key("lr", names) == "learning_rate"
    assert config_fields.nearest_key("gae", names) == "gae_lambda"
    assert config_fields.nearest_key("stepz", names) == "steps"
    # Nothing in common: the first name, whatever the order (difflib alone ranks unrelated
    # names by their spelling).
    assert config_fields.nearest_key("qqqqqq", ["alpha", "beta"]) == "alpha"
    assert config_fields.nearest_key("qqqqqq", ["beta", "alpha"]) == "beta"
    # One shared letter beats none, far below the close-spelling cutoff.
    assert config_fields.nearest_key("zzzzt", ["alpha", "beta"]) == "beta"

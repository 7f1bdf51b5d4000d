"""The one parser of config values and backend options (``batchppo.core.values``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from batchppo.core.values import coerce, is_plain, optional_positive_int, positive_int, type_name


@pytest.mark.parametrize(
    ("value", "annotation", "expected"),
    [
        ("1e6", int, 1_000_000),  # YAML 1.1 reads 1e6 as a string
        (2.0, int, 2),
        (2, float, 2.0),
        ("none", float | None, None),
        (None, str | None, None),
        ("auto", str | None, "auto"),
        ([1, 2], tuple[int, ...], (1, 2)),
        ({"a": [1, "b"]}, dict[str, Any], {"a": [1, "b"]}),
        (True, bool, True),
    ],
)
def test_coerce_converts_a_value_that_fits(value, annotation, expected):
    result = coerce(value, annotation)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "annotation"),
    [(2.5, int), (True, float), ("two", float), (3, str), (1, bool), ({"a": {"b": 1}}, dict)],
)
def test_coerce_refuses_a_value_that_does_not(value, annotation):
    with pytest.raises(TypeError):
        coerce(value, dict[str, Any] if annotation is dict else annotation)


def test_type_names_and_plain_values():
    assert type_name(float | None) == "float or None"
    assert type_name(tuple[int, ...]) == "list of int"
    assert type_name(dict[str, Any]) == "mapping of names to values"
    assert is_plain([1, "a", None]) and not is_plain({"a": 1})


def test_a_count_is_an_int_of_at_least_one():
    assert positive_int("num_envs", 3) == 3
    count = positive_int("num_envs", np.int64(2))
    assert count == 2 and type(count) is int
    with pytest.raises(ValueError, match=r"^num_envs must be >= 1, got 0\.$"):
        positive_int("num_envs", 0)
    with pytest.raises(ValueError, match=r"^stack must be >= 1 \(frames\), got -2\.$"):
        positive_int("stack", -2, " (frames)")
    for value in (2.0, "4", True, None):
        with pytest.raises(ValueError) as info:
            positive_int("num_envs", value)
        assert str(info.value) == f"num_envs must be an int, got {value!r}."


def test_an_optional_count_takes_none_and_names_what_none_gives():
    assert optional_positive_int("max_length", None, "the env's own") is None
    assert optional_positive_int("max_length", 200, "the env's own") == 200
    with pytest.raises(ValueError) as info:
        optional_positive_int("max_length", 0, "the env's own")
    assert str(info.value) == "max_length must be >= 1 (or None for the env's own), got 0."
    with pytest.raises(ValueError) as info:
        optional_positive_int("max_length", False, "the env's own")
    assert str(info.value) == "max_length must be an int or None, got False."

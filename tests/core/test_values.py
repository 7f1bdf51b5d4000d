"""The one parser of config values and backend options (``batchppo.core.values``)."""

from __future__ import annotations

from typing import Any

import pytest

from batchppo.core.values import coerce, is_plain, type_name


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

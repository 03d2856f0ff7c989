"""Tests for typedrl._validation."""

import math

import pytest

from typedrl._validation import (
    describe,
    finite_float,
    float_mapping,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from typedrl.errors import ConfigError


def test_positive_and_non_negative_int_accept() -> None:
    """Valid ints pass through unchanged."""
    assert positive_int("O", "f", 3) == 3
    assert non_negative_int("O", "f", 0) == 0
    with pytest.raises(ConfigError, match="non-negative int, got -1"):
        non_negative_int("O", "f", -1)


def test_finite_float_converts_ints() -> None:
    """Ints are accepted and converted to float."""
    value = finite_float("O", "f", 2)
    assert value == 2.0
    assert isinstance(value, float)


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**1024])
def test_finite_float_refuses_an_int_beyond_floats(value: int) -> None:
    """An int past the largest float is refused like an infinity, not an OverflowError."""
    expected = r"O\.f must be a finite float, got an integer of \d+ bits"
    with pytest.raises(ConfigError, match=expected):
        finite_float("O", "f", value)


def test_describe_gives_the_size_of_a_very_long_int() -> None:
    """repr() of an int of 5,000 digits raises ValueError; describe() gives its size instead."""
    assert describe(10**5000) == "an integer of 16610 bits (type int)"
    assert describe(2**255) == f"{2**255} (type int)"


def test_non_negative_float() -> None:
    """Negative values are rejected."""
    assert non_negative_float("O", "f", 0) == 0.0
    with pytest.raises(ConfigError, match=">= 0"):
        non_negative_float("O", "f", -0.5)


def test_float_mapping_copies_and_freezes() -> None:
    """The result is a read-only copy with float values."""
    source = {"a": 1, "b": 2.5}
    result = float_mapping("O", "m", source)
    source["a"] = 100
    assert dict(result) == {"a": 1.0, "b": 2.5}
    with pytest.raises(TypeError):
        result["a"] = 3.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([1.0], "must be a mapping"),
        ({1: 1.0}, "keys must be str"),
        ({"a": "x"}, r"m\['a'\] must be a finite float"),
        ({"a": math.nan}, r"m\['a'\] must be a finite float"),
    ],
)
def test_float_mapping_rejects(bad: object, message: str) -> None:
    """Wrong containers, keys and values are named in the message."""
    with pytest.raises(ConfigError, match=message):
        float_mapping("O", "m", bad)


def test_describe_shortens_long_values() -> None:
    """Long reprs are cut so messages stay readable."""
    text = describe("x" * 500)
    assert text.endswith("(type str)")
    assert len(text) < 100

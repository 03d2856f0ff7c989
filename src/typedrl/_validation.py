"""Small validators shared by configs and value types.

Each returns the validated (and normalised) value or raises
:class:`~typedrl.errors.ConfigError` naming the field and showing the value.
"""

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

from typedrl.errors import ConfigError

__all__ = [
    "describe",
    "finite_float",
    "float_mapping",
    "no_type_check",
    "non_negative_float",
    "non_negative_int",
    "positive_int",
]


_T = TypeVar("_T")


def no_type_check(obj: _T) -> _T:
    """Mark a self-validating class as exempt from jaxtyping's runtime checks.

    The test suites run every annotated function of typedrl through jaxtyping
    and beartype (``--jaxtyping-packages``). That import hook skips any class
    or function carrying a decorator *named* ``no_type_check``. Value types
    and configs validate their own inputs and raise
    :class:`~typedrl.errors.TypedRLError` subclasses that name the field and
    show the value; a generic runtime type error would pre-empt those messages.

    Unlike :func:`typing.no_type_check`, this decorator is the identity, so
    static type checking of the decorated class is unaffected.
    """
    return obj


def describe(value: object) -> str:
    """Return ``repr(value)`` and its type, shortened for error messages."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} (type {type(value).__name__})"


def non_negative_int(owner: str, name: str, value: object) -> int:
    """Check that ``value`` is an ``int`` (not a ``bool``) that is zero or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{owner}.{name} must be a non-negative int, got {describe(value)}")
    return value


def positive_int(owner: str, name: str, value: object) -> int:
    """Check that ``value`` is an ``int`` (not a ``bool``) greater than zero."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{owner}.{name} must be a positive int, got {describe(value)}")
    return value


def finite_float(owner: str, name: str, value: object) -> float:
    """Check that ``value`` is a finite real number (``int`` or ``float``, not ``bool``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{owner}.{name} must be a finite float, got {describe(value)}")
    return float(value)


def non_negative_float(owner: str, name: str, value: object) -> float:
    """Check that ``value`` is a finite real number that is zero or more."""
    result = finite_float(owner, name, value)
    if result < 0.0:
        raise ConfigError(f"{owner}.{name} must be >= 0, got {describe(value)}")
    return result


def float_mapping(owner: str, name: str, value: object) -> Mapping[str, float]:
    """Check a mapping of ``str`` keys to finite floats; return a read-only copy."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{owner}.{name} must be a mapping of str to float, got {describe(value)}"
        )
    checked: dict[str, float] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ConfigError(f"{owner}.{name} keys must be str, got key {describe(key)}")
        checked[key] = finite_float(owner, f"{name}[{key!r}]", item)
    return MappingProxyType(checked)

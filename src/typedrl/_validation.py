"""Small validators shared by configs and value types.

Each returns the validated (and normalised) value or raises
:class:`~typedrl.errors.ConfigError` naming the field and showing the value.
"""

import math
import numbers
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, TypeVar, final

from typedrl.errors import ConfigError

__all__ = [
    "MAX_SEED",
    "FloatRange",
    "IntRange",
    "describe",
    "finite_float",
    "float_mapping",
    "half_open_unit_interval",
    "json_like",
    "json_object",
    "no_type_check",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "seed_int",
    "unit_interval",
]

MAX_SEED: Final = 2**32 - 1
"""The largest seed a run takes (env seeds must be non-negative, derived torch seeds in range)."""


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


_LONGEST_INT_BITS = 256
"""Ints longer than this are described by their size, not their digits."""


def describe(value: object) -> str:
    """Return ``repr(value)`` and its type, shortened for error messages.

    A tensor is described by its type, dtype, shape and device, never by its
    values (a state dict's tensors may hold millions).

    Example:
        >>> import torch
        >>> describe(torch.zeros(2, 3))
        'a Tensor of dtype torch.float32, shape [2, 3] on cpu'
        >>> describe(0)
        '0 (type int)'
    """
    if "torch" in sys.modules:  # a tensor exists only once torch is imported
        import torch  # noqa: PLC0415 - configs and the command's parser stay free of torch

        if isinstance(value, torch.Tensor):
            shape = list(value.shape)
            return (
                f"a {type(value).__name__} of dtype {value.dtype}, shape {shape} on {value.device}"
            )
    if isinstance(value, int) and value.bit_length() > _LONGEST_INT_BITS:
        # repr() of an int of more than 4,300 digits raises ValueError.
        return f"an integer of {value.bit_length()} bits (type {type(value).__name__})"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} (type {type(value).__name__})"


@final
@dataclass(frozen=True, slots=True)
class IntRange:
    """The check of an ``int`` (not a ``bool``) in ``[low, high]``; returns it unchanged.

    One check for every integer range (:data:`positive_int`, :data:`seed_int`,
    ...): each is a value that shows its bounds.

    Example:
        >>> IntRange(0, 3)("Owner", "field", 4)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Owner.field must be an int in [0, 3], got 4 (type int)
    """

    low: int
    """The smallest value accepted."""
    high: int | None = None
    """The largest value accepted (``None``: no bound)."""
    expected: str = ""
    """What the message says the value must be; default ``"an int in [low, high]"``
    (``"an int >= low"`` without ``high``)."""

    def __call__(self, owner: str, name: str, value: object) -> int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < self.low
            or (self.high is not None and value > self.high)
        ):
            bounds = f">= {self.low}" if self.high is None else f"in [{self.low}, {self.high}]"
            expected = self.expected or f"an int {bounds}"
            raise ConfigError(f"{owner}.{name} must be {expected}, got {describe(value)}")
        return value


non_negative_int: Final = IntRange(0, expected="a non-negative int")
"""Check that ``value`` is an ``int`` (not a ``bool``) that is zero or more."""

positive_int: Final = IntRange(1, expected="a positive int")
"""Check that ``value`` is an ``int`` (not a ``bool``) greater than zero."""

seed_int: Final = IntRange(0, MAX_SEED)
"""Check that ``value`` is an ``int`` (not a ``bool``) in ``[0, MAX_SEED]``."""


def finite_float(owner: str, name: str, value: object) -> float:
    """Check that ``value`` is a finite real number (``int`` or ``float``, not ``bool``).

    An ``int`` beyond a float's range (a YAML integer of 309 digits or more) is
    refused like an infinity.
    """
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an int past the largest float
            pass
        else:
            if math.isfinite(number):
                return number
    raise ConfigError(f"{owner}.{name} must be a finite float, got {describe(value)}")


@final
@dataclass(frozen=True, slots=True)
class FloatRange:
    """The check of a finite real number (:func:`finite_float`) within bounds; gives a ``float``.

    One check for every real range (:data:`positive_float`, :data:`unit_interval`,
    ...): each is a value that shows its bounds.

    Example:
        >>> FloatRange(0.0, 1.0, high_open=True)("Owner", "field", 1)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Owner.field must lie in [0, 1), got 1 (type int)
    """

    low: float
    """The lower bound."""
    high: float = math.inf
    """The upper bound (``math.inf``: none)."""
    low_open: bool = False
    """Whether :attr:`low` itself is refused."""
    high_open: bool = False
    """Whether :attr:`high` itself is refused."""

    def __call__(self, owner: str, name: str, value: object) -> float:
        result = finite_float(owner, name, value)
        above = result > self.low if self.low_open else result >= self.low
        below = result < self.high if self.high_open else result <= self.high
        if not (above and below):
            raise ConfigError(f"{owner}.{name} must {self._bounds()}, got {describe(value)}")
        return result

    def _bounds(self) -> str:
        if self.high == math.inf:
            return f"be {'>' if self.low_open else '>='} {self.low:g}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"lie in {left}{self.low:g}, {self.high:g}{right}"


non_negative_float: Final = FloatRange(0.0)
"""Check that ``value`` is a finite real number that is zero or more."""

positive_float: Final = FloatRange(0.0, low_open=True)
"""Check that ``value`` is a finite real number greater than zero."""

unit_interval: Final = FloatRange(0.0, 1.0)
"""Check that ``value`` is a finite real number in ``[0, 1]`` (a discount, a lambda)."""

half_open_unit_interval: Final = FloatRange(0.0, 1.0, high_open=True)
"""Check that ``value`` is a finite real number in ``[0, 1)`` (a momentum, an Adam beta)."""


def json_object(owner: str, name: str, value: object) -> dict[str, Any]:
    """Check a ``dict`` that is JSON-like all the way down (see :func:`json_like`)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{owner}.{name} must be a dict, got {describe(value)}")
    # The checkpoint's own rule, checked when the config is built rather than when the
    # first checkpoint is written, after training.
    json_like(f"{owner}.{name}", value)
    return value


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


def json_like(where: str, value: object) -> None:
    """Check that ``value`` is JSON-like all the way down, in builtin types only.

    JSON-like values are ``None``, ``str``, ``int``, ``float``, ``bool``,
    ``list`` and ``dict`` with ``str`` keys, nested freely. The types must be
    exactly these builtins: a subclass such as ``numpy.float64`` (a ``float``),
    a ``StrEnum`` member or a tuple is refused, because checkpoints store
    configs as they are and ``torch.load(weights_only=True)`` reads back only
    the builtin types. This is the one rule for every config stored in a
    checkpoint, so a config accepted at construction is also accepted when the
    first checkpoint is written.

    Args:
        where: Name of the value for the message (``"PPOConfig.extra"``); the
            path to a nested value is appended (``"PPOConfig.extra['net'][1]"``).
        value: The value to check.

    Raises:
        ConfigError: A value or key is not JSON-like; the message names its path,
            shows it and, where one exists, the conversion that fixes it.

    Example:
        >>> json_like("extra", {"note": "run", "sizes": [64, 64], "lr": 3e-4, "seed": None})
        >>> json_like("extra", {"sizes": (64, 64)})
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: extra['sizes'] must be JSON-like (str, int, float, bool,
        None, list, or dict with str keys), got (64, 64) (type tuple); use a list instead of
        a tuple
    """
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return
    if isinstance(value, list) and kind is list:
        for index, item in enumerate(value):
            json_like(f"{where}[{index}]", item)
        return
    if isinstance(value, dict) and kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ConfigError(
                    f"{where} keys must be str, got key {describe(key)}{_json_hint(key)}"
                )
            json_like(f"{where}[{key!r}]", item)
        return
    raise ConfigError(
        f"{where} must be JSON-like (str, int, float, bool, None, list, or dict with str keys), "
        f"got {describe(value)}{_json_hint(value)}"
    )


def _json_hint(value: object) -> str:
    """The conversion that turns ``value`` into its builtin JSON-like form, if one is known."""
    if isinstance(value, tuple):
        return "; use a list instead of a tuple"
    for builtin in (bool, int, float, str, list, dict):
        if isinstance(value, builtin):  # a subclass: numpy.float64, IntEnum, OrderedDict, ...
            return f"; convert it with {builtin.__name__}(...)"
    if isinstance(value, numbers.Integral):  # numpy integers
        return "; convert it with int(...)"
    if isinstance(value, numbers.Real):  # numpy floating-point scalars
        return "; convert it with float(...)"
    if callable(getattr(value, "tolist", None)):  # numpy arrays and bools, tensors
        return "; convert it with .tolist()"
    return ""

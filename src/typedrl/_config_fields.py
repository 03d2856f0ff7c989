"""Config fields that declare their constraints: one validator and one serialiser for all.

A config is a frozen, keyword-only dataclass. Each field says what it accepts:

- a field annotated ``bool``, ``str``, a :data:`~typing.Literal`, a config class,
  or a union of these (``None`` included) is checked against its annotation,
  with nothing more to declare;
- any other field names its check in its metadata:
  ``learning_rate: float = field(default=3e-4, metadata=check(positive_float))``.
  A check is a function ``(owner, name, value) -> value`` that returns the value
  normalised (an ``int`` as a ``float``, a list as a tuple) or raises
  :class:`~typedrl.errors.ConfigError` naming ``owner.name`` and showing the
  value: the checks of :mod:`typedrl._validation` (its ranges are
  :class:`~typedrl._validation.IntRange` and :class:`~typedrl._validation.FloatRange`
  values), or one that :func:`optional` or :func:`sequence_of` builds from them.

The checks those two build and the ones annotations imply are small frozen
values (:class:`OrNone`, :class:`SequenceOf`, :class:`Choice`, :class:`Nested`)
that show what they accept: through :func:`field_checks`, one test derives a
refused value for every field of every config.

:func:`validate`, called by each config's ``__post_init__``, runs every field's
check and stores the normalised values; the class itself checks only the rules
that span fields. :func:`to_dict` gives the config as JSON-like values (what
checkpoints and ``config.yaml`` store) and :func:`from_dict` reads them back:
it is the trust boundary for YAML, ``--set`` and checkpoints, so it refuses
unknown keys and runs every value's check before the class is built.

Example:
    >>> from dataclasses import dataclass, field
    >>> from typing import Literal
    >>> from typedrl._validation import positive_int
    >>> @dataclass(frozen=True, slots=True, kw_only=True)
    ... class Demo:
    ...     mode: Literal["fast", "slow"] = "fast"
    ...     sizes: tuple[int, ...] = field(
    ...         default=(64,), metadata=check(sequence_of(positive_int, expected="a list of ints"))
    ...     )
    ...     def __post_init__(self) -> None:
    ...         validate(self)
    >>> from_dict(Demo, {"sizes": [32, 32]})
    Demo(mode='fast', sizes=(32, 32))
    >>> to_dict(Demo(sizes=(8,)))
    {'mode': 'fast', 'sizes': [8]}
    >>> from_dict(Demo, {"mode": "medium"})
    Traceback (most recent call last):
    ...
    typedrl.errors.ConfigError: Demo.mode must be one of ['fast', 'slow'], got 'medium' (type str)
    >>> from_dict(Demo, {"size": [8]})
    Traceback (most recent call last):
    ...
    typedrl.errors.ConfigError: Demo has no fields ['size']; valid fields: ['mode', 'sizes']
"""

import dataclasses
import types
from collections.abc import Callable, Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    TypeAlias,
    TypeVar,
    Union,
    cast,
    final,
    get_args,
    get_origin,
    get_type_hints,
)

from typedrl._validation import describe, half_open_unit_interval
from typedrl.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "Check",
    "Choice",
    "Nested",
    "OrNone",
    "SequenceOf",
    "adam_betas",
    "at_most",
    "boolean",
    "check",
    "field_checks",
    "from_dict",
    "non_empty_text",
    "optional",
    "plain",
    "policy",
    "policy_fields",
    "sequence_of",
    "text",
    "to_dict",
    "validate",
]

Check: TypeAlias = Callable[[str, str, object], object]
"""A field's check: ``(owner, name, value)`` to the normalised value, or a ConfigError."""

_KEY: Final = "typedrl.check"
_POLICY: Final = "typedrl.policy"

_C = TypeVar("_C")


def check(rule: Check) -> dict[str, Check]:
    """The field metadata that declares ``rule`` as the field's check."""
    return {_KEY: rule}


def policy(metadata: Mapping[str, object] | None = None) -> dict[str, object]:
    """Field metadata (``metadata``, plus a mark) for a setting of the built-in policy.

    Such fields are still fields of the config; ``config.yaml`` and
    ``--print-config`` show them in a ``policy:`` section of their own
    (:func:`policy_fields`).
    """
    return {**(metadata or {}), _POLICY: True}


def policy_fields(cls: type) -> tuple[str, ...]:
    """The names of ``cls``'s fields marked with :func:`policy`, in declaration order."""
    if not dataclasses.is_dataclass(cls):
        return ()
    return tuple(field.name for field in dataclasses.fields(cls) if field.metadata.get(_POLICY))


def boolean(owner: str, name: str, value: object) -> bool:
    """Check that ``value`` is ``True`` or ``False`` (not ``1``, ``0`` or ``None``)."""
    if value is True or value is False:
        return value
    raise ConfigError(f"{owner}.{name} must be a bool, got {describe(value)}")


def text(owner: str, name: str, value: object) -> str:
    """Check that ``value`` is a builtin ``str`` (a subclass is refused)."""
    if type(value) is str:
        return value
    raise ConfigError(f"{owner}.{name} must be a str, got {describe(value)}")


def non_empty_text(owner: str, name: str, value: object) -> str:
    """Check that ``value`` is a builtin ``str`` with more than whitespace in it."""
    if type(value) is str and value.strip():
        return value
    raise ConfigError(f"{owner}.{name} must be a non-empty string, got {describe(value)}")


def optional(rule: Check) -> Check:
    """``rule``, or ``None``."""
    return OrNone(rule)


def sequence_of(item: Check, *, expected: str, length: int | None = None) -> Check:
    """A list or tuple (of ``length`` items when given) each passing ``item``; gives a tuple.

    Args:
        item: The check of each item; an item is named ``name[index]``.
        expected: What the message says the value must be (``"a pair of floats"``).
        length: The number of items required (``None``: any).
    """
    return SequenceOf(item=item, expected=expected, length=length)


@final
@dataclasses.dataclass(frozen=True, slots=True)
class OrNone:
    """The check :func:`optional` builds: ``None``, or a value passing :attr:`rule`."""

    rule: Check

    def __call__(self, owner: str, name: str, value: object) -> object:
        return None if value is None else self.rule(owner, name, value)


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SequenceOf:
    """The check :func:`sequence_of` builds: a list or tuple of items passing :attr:`item`."""

    item: Check
    expected: str
    length: int | None = None

    def __call__(self, owner: str, name: str, value: object) -> tuple[object, ...]:
        if not isinstance(value, list | tuple) or self.length not in (None, len(value)):
            raise ConfigError(f"{owner}.{name} must be {self.expected}, got {describe(value)}")
        return tuple(
            self.item(owner, f"{name}[{index}]", element) for index, element in enumerate(value)
        )


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """One of :attr:`values` (a field annotated with a ``Literal`` or ``bool``).

    ``bool`` and ``None`` match by identity (``1`` is not ``True``), a str by value.
    """

    values: tuple[object, ...]

    def __call__(self, owner: str, name: str, value: object) -> object:
        for valid in self.values:
            if value is valid or (type(valid) is str and isinstance(value, str) and value == valid):
                return valid
        raise ConfigError(
            f"{owner}.{name} must be one of {list(self.values)}, got {describe(value)}"
        )


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Nested:
    """A nested config: an instance of one of ``classes`` (a mapping, in :func:`from_dict`)."""

    classes: tuple[type, ...]

    def __call__(self, owner: str, name: str, value: object) -> object:
        if isinstance(value, self.classes):
            return value
        expected = " or ".join(_article(cls.__name__) for cls in self.classes)
        raise ConfigError(f"{owner}.{name} must be {expected}, got {describe(value)}")


adam_betas: Final = sequence_of(half_open_unit_interval, expected="a pair of floats", length=2)
"""The check of a pair (list or tuple) of Adam's moment decay rates, each in ``[0, 1)``."""


def _article(name: str) -> str:
    return f"an {name}" if name[0] in "AEIOU" else f"a {name}"


def _is_config(annotation: object) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _inferred(annotation: object) -> Check | None:
    """The check an annotation implies, or ``None`` when it needs declaring in the metadata."""
    union = get_origin(annotation) in (Union, types.UnionType)
    members = get_args(annotation) if union else (annotation,)
    present = tuple(member for member in members if member is not type(None))
    rule = _inferred_from(present)
    return optional(rule) if rule is not None and len(present) < len(members) else rule


def _inferred_from(members: tuple[object, ...]) -> Check | None:
    if members == (str,):
        return text
    if members == (bool,):
        return boolean
    if members and all(_is_config(member) for member in members):
        return Nested(tuple(member for member in members if isinstance(member, type)))
    choices: list[object] = []
    for member in members:
        if member is bool:
            choices += [True, False]
        elif get_origin(member) is Literal:
            choices += get_args(member)
        else:
            return None
    return Choice(tuple(choices))


_CHECKS: dict[type, tuple[tuple[dataclasses.Field[Any], Check], ...]] = {}


def field_checks(cls: type) -> tuple[tuple[dataclasses.Field[Any], Check], ...]:
    """Every field of ``cls`` with its check, in declaration order (computed once per class).

    Raises:
        TypeError: A field's annotation implies no check and its metadata declares none.
    """
    found = _CHECKS.get(cls)
    if found is None:
        hints = get_type_hints(cls)
        pairs: list[tuple[dataclasses.Field[Any], Check]] = []
        for field in dataclasses.fields(cls):
            rule: Check | None = field.metadata.get(_KEY) or _inferred(hints[field.name])
            if rule is None:
                raise TypeError(
                    f"{cls.__name__}.{field.name}: the annotation {hints[field.name]} implies no "
                    "check; declare one with metadata=check(...)"
                )
            pairs.append((field, rule))
        found = _CHECKS[cls] = tuple(pairs)
    return found


def validate(config: object, *, owner: str | None = None) -> None:
    """Run every field's check on ``config`` and store the normalised values.

    Args:
        config: A config dataclass instance, in its ``__post_init__``.
        owner: The name messages give the config (default: its class name).

    Raises:
        ConfigError: A field's value is invalid; the message names ``owner.field``
            and shows the value. Fields are checked in declaration order.
    """
    name = owner or type(config).__name__
    for field, rule in field_checks(type(config)):
        # Configs are frozen: the normalised value replaces the given one once, here.
        object.__setattr__(config, field.name, rule(name, field.name, getattr(config, field.name)))


def at_most(config: object, name: str, limit: str) -> None:
    """Refuse a config whose field ``name`` exceeds its field ``limit`` (after :func:`validate`).

    Raises:
        ConfigError: ``name`` is larger; the message shows both fields and values.
    """
    value, bound = getattr(config, name), getattr(config, limit)
    if value > bound:
        raise ConfigError(
            f"{type(config).__name__}.{name} ({value}) must not exceed {limit} ({bound})"
        )


def to_dict(config: object) -> dict[str, Any]:
    """``config`` as JSON-like values: nested configs as dicts, tuples as lists, in field order."""
    fields = dataclasses.fields(cast("DataclassInstance", config))
    return {field.name: plain(getattr(config, field.name)) for field in fields}


def plain(value: object) -> object:
    """``value`` as JSON-like values: configs as dicts, tuples as lists, recursively.

    What :func:`to_dict` writes, and what makes a config, a YAML document and a
    checkpoint's saved config compare equal by content.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    return value


def from_dict(cls: type[_C], data: object, *, owner: str | None = None) -> _C:
    """Build ``cls`` from JSON-like values (:func:`to_dict`'s, or a YAML file's).

    Fields the values leave out keep their defaults. A nested config given as a
    mapping is built the same way, as the class among the field's whose fields
    the mapping names most (the first on a tie), over the field's default when
    that is of the same class. Every value passes its field's check before
    ``cls`` is built, so a value of the wrong type from YAML or ``--set`` is
    reported as a :class:`~typedrl.errors.ConfigError`, never as a type error.

    Args:
        cls: The config class.
        data: Field names to values.
        owner: The name messages give the config (default: the class name).

    Raises:
        ConfigError: ``data`` is not a mapping, names a field ``cls`` does not
            have (the message lists the valid ones), or holds an invalid value.
    """
    name = owner or cls.__name__
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{name} must be a mapping of field names to values, got {describe(data)}"
        )
    checks = {field.name: (field, rule) for field, rule in field_checks(cls)}
    unknown = sorted(str(key) for key in data if key not in checks)
    if unknown:
        raise ConfigError(f"{name} has no fields {unknown}; valid fields: {sorted(checks)}")
    values: dict[str, object] = {}
    for key, value in data.items():
        field, rule = checks[key]
        given = _nested(field, rule, value) if isinstance(value, Mapping) else value
        values[key] = rule(name, key, given)
    return cls(**values)


def _field_names(cls: type) -> set[str]:
    return {field.name for field in dataclasses.fields(cls)}


def _nested(field: dataclasses.Field[Any], rule: Check, value: Mapping[Any, Any]) -> object:
    """A nested config built from ``value``, or ``value`` itself where no config belongs."""
    if not isinstance(rule, Nested):
        return value
    keys = set(value)
    # Ties go to the first class: max keeps the first of equal keys.
    chosen = max(rule.classes, key=lambda cls: len(keys & _field_names(cls)))
    default: object = field.default
    if field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    if isinstance(default, chosen):
        # Fields the mapping leaves out keep the field's default (SHAC's actor), not the class's.
        value = {**to_dict(default), **value}
    return from_dict(chosen, value)

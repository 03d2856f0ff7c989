"""Wrapper specs: what ``--wrapper`` and a run's ``wrappers:`` list take, read without importing.

A spec names a Gymnasium wrapper and, optionally, its keyword arguments in
call form:

- ``"RecordEpisodeStatistics"``: ``gymnasium.wrappers.RecordEpisodeStatistics``;
- ``"gymnasium.wrappers.TimeAwareObservation"``: a dotted import path;
- ``"mypkg.mod:MyWrapper"``: ``module:attribute``;
- any of these followed by keyword arguments whose values are Python
  literals: ``"FrameStackObservation(stack_size=4)"``,
  ``"FilterObservation(filter_keys=['image'])"``.

The call form is parsed with :mod:`ast` and each value read with
:func:`ast.literal_eval`: nothing in a spec is ever evaluated, so a config file
cannot run code. Positional arguments, ``**kwargs`` and non-literal values are
refused in one line.

Example:
    >>> parse_wrapper_spec("FrameStackObservation(stack_size=4)")
    WrapperSpec(name='FrameStackObservation', kwargs={'stack_size': 4})
    >>> parse_wrapper_spec("mypkg.mod:MyWrapper(scale=0.5, keys=['a'])").kwargs
    {'scale': 0.5, 'keys': ['a']}
    >>> parse_wrapper_spec("FrameStackObservation(4)")
    Traceback (most recent call last):
    ...
    typedrl.errors.ConfigError: wrapper 'FrameStackObservation(4)': positional arguments are
    not accepted; name each one: 'FrameStackObservation(name=value, ...)'
"""

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Final, final

from typedrl._validation import describe
from typedrl.errors import ConfigError

__all__ = ["WrapperSpec", "parse_wrapper_spec", "wrapper_text"]

_NAME: Final = re.compile(
    r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?", re.ASCII
)
"""A bare name, a dotted path, or ``module:attribute`` (each part an identifier)."""

_FORMS: Final = (
    "expected a wrapper name ('TimeLimit', 'gymnasium.wrappers.TimeAwareObservation', "
    "'mypkg.mod:MyWrapper'), optionally with keyword arguments of literal values, e.g. "
    "'FrameStackObservation(stack_size=4)'"
)


@final
@dataclass(frozen=True, slots=True)
class WrapperSpec:
    """A parsed wrapper spec: the wrapper's name and its keyword arguments."""

    name: str
    """``Name``, ``dotted.path.Name`` or ``module:Name``."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments the wrapper is called with, after the env."""


def parse_wrapper_spec(text: str) -> WrapperSpec:
    """Read a wrapper spec (see the module docstring) without importing anything.

    Raises:
        ConfigError: The text is no spec: not a name, a call with positional
            arguments, ``**kwargs``, a repeated keyword or a value that is not a
            Python literal; the message names the argument.
    """
    stripped = text.strip()
    name, paren, rest = stripped.partition("(")
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise ConfigError(f"wrapper {text!r}: {_FORMS}")
    if not paren:
        return WrapperSpec(name)
    try:
        tree = ast.parse(f"_({rest}", mode="eval")
    except SyntaxError:
        raise ConfigError(
            f"wrapper {text!r}: not a call with keyword arguments; {_FORMS}"
        ) from None
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_"):
        raise ConfigError(f"wrapper {text!r}: not a single call with keyword arguments; {_FORMS}")
    if call.args:
        raise ConfigError(
            f"wrapper {text!r}: positional arguments are not accepted; name each one: "
            f"'{name}(name=value, ...)'"
        )
    kwargs: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ConfigError(f"wrapper {text!r}: **kwargs is not accepted; name each argument")
        if keyword.arg in kwargs:
            raise ConfigError(f"wrapper {text!r}: argument {keyword.arg!r} is given twice")
        try:
            kwargs[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ConfigError(
                f"wrapper {text!r}: the value of {keyword.arg!r} "
                f"({ast.get_source_segment(f'_({rest}', keyword.value)}) is not a Python literal; "
                "give numbers, strings, True/False/None, or lists, tuples and dicts of them"
            ) from None
    return WrapperSpec(name, kwargs)


def wrapper_text(owner: str, name: str, value: object) -> str:
    """The config check of one ``wrappers`` entry: a ``str`` that :func:`parse_wrapper_spec` reads.

    Raises:
        ConfigError: Not a str, or not a spec; the message starts with ``owner.name``.
    """
    if type(value) is not str:
        raise ConfigError(
            f"{owner}.{name} must be a wrapper spec string such as "
            f"'FrameStackObservation(stack_size=4)', got {describe(value)}"
        )
    try:
        parse_wrapper_spec(value)
    except ConfigError as error:
        raise ConfigError(f"{owner}.{name}: {error}") from None
    return value

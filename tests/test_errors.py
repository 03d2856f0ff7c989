"""Tests for typedrl.errors."""

import pytest

from typedrl import errors

ALL_ERRORS = [getattr(errors, name) for name in errors.__all__ if name != "TypedRLError"]


@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: e.__name__)
def test_every_error_derives_from_the_root(error: type[Exception]) -> None:
    """Every public error is a TypedRLError and a standard built-in exception."""
    assert issubclass(error, errors.TypedRLError)
    builtin_bases = [b for b in error.__mro__ if b.__module__ == "builtins" and b is not object]
    assert builtin_bases[0] is not Exception or error is errors.TypedRLError


def test_root_catches_subclasses() -> None:
    """`except TypedRLError` catches a specific error with its message intact."""
    with pytest.raises(errors.TypedRLError, match="expected 3, got 4"):
        raise errors.SpecError("expected 3, got 4")


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (errors.ConfigError, ValueError),
        (errors.SpecError, TypeError),
        (errors.NonFiniteError, FloatingPointError),
        (errors.CheckpointError, OSError),
        (errors.MissingDependencyError, ImportError),
        (errors.DistributedError, RuntimeError),
        (errors.EnvContractError, RuntimeError),
    ],
)
def test_errors_keep_standard_bases(error: type[Exception], builtin: type[Exception]) -> None:
    """Code written against built-in exceptions keeps working."""
    assert issubclass(error, builtin)

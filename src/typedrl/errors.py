"""The exceptions typedrl raises for problems a user can cause.

Every error derives from :class:`TypedRLError`, so one ``except TypedRLError``
catches all of them. Each subclass also derives from the closest built-in
exception (``ValueError``, ``TypeError``, ...) so code written against the
standard hierarchy keeps working.

Messages follow one rule: say what was expected, what came, and where (the
key, the step, the file), and the fix when it is known.

Example:
    >>> from typedrl.errors import ConfigError, TypedRLError
    >>> try:
    ...     raise ConfigError("num_steps must be a positive int, got 0")
    ... except TypedRLError as err:
    ...     print(type(err).__name__, "-", err)
    ConfigError - num_steps must be a positive int, got 0
"""

from typing import final

__all__ = [
    "CheckpointError",
    "ConfigError",
    "DistributedError",
    "EnvContractError",
    "EnvError",
    "MissingDependencyError",
    "NonFiniteError",
    "SpecError",
    "StateError",
    "TypedRLError",
]


class TypedRLError(Exception):
    """Root of every exception typedrl raises on purpose."""


@final
class ConfigError(TypedRLError, ValueError):
    """A configuration value or value object is invalid.

    Raised by the ``__post_init__`` of configs and value types, before anything
    is built from them.
    """


@final
class SpecError(TypedRLError, TypeError):
    """A tensor, space or key does not have the shape, dtype or device expected."""


@final
class EnvContractError(TypedRLError, RuntimeError):
    """An environment broke the vector-env contract (autoreset, terminal observations, ...)."""


@final
class EnvError(TypedRLError, RuntimeError):
    """An env raised an exception of its own while a trainer used it (chained as the cause)."""


@final
class NonFiniteError(TypedRLError, FloatingPointError):
    """A NaN or infinity appeared in observations, rewards, losses or gradients."""


@final
class CheckpointError(TypedRLError, OSError):
    """A checkpoint file is missing, truncated, foreign or of an unsupported schema."""


@final
class DistributedError(TypedRLError, RuntimeError):
    """Ranks disagree on something that must be identical on every rank."""


@final
class StateError(TypedRLError, RuntimeError):
    """A method was called in the wrong state (an update finished that never began, ...)."""


@final
class MissingDependencyError(TypedRLError, ImportError):
    """An optional dependency needed by the requested feature is not installed."""

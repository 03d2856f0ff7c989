"""The optional ``newton`` dependency (Newton physics on NVIDIA Warp), imported on first use."""

from types import ModuleType

from typedrl._optional import require_extra

__all__ = ["EXTRA", "require"]

EXTRA = "newton"
"""Name of the package extra that installs the Newton backend."""


def require(module: str, *, where: str) -> ModuleType:
    """Import ``"newton"`` or ``"warp"``, or say that :data:`EXTRA` installs it.

    Raises:
        MissingDependencyError: If the module cannot be imported.
    """
    return require_extra(module, extra=EXTRA, where=where)

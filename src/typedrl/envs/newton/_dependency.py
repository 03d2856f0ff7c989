"""The optional ``newton`` dependency (Newton physics on NVIDIA Warp), imported on first use."""

import importlib
from types import ModuleType

from typedrl.errors import MissingDependencyError

__all__ = ["EXTRA", "require"]

EXTRA = "newton"
"""Name of the package extra that installs the Newton backend."""


def require(module: str, *, where: str) -> ModuleType:
    """Import ``newton`` or ``warp``, or say which extra installs it.

    Args:
        module: ``"newton"`` or ``"warp"``.
        where: What needed it, for the message.

    Raises:
        MissingDependencyError: If the module cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(
            f"{where} needs {module!r}, which is not installed (or failed to import: {err}); "
            f"install the extra: pip install 'typedrl[{EXTRA}]'"
        ) from err

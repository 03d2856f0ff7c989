"""Optional dependencies, imported on first use with the extra that installs them named."""

import importlib
from types import ModuleType

from typedrl.errors import MissingDependencyError

__all__ = ["require_extra"]


def require_extra(module: str, *, extra: str, where: str) -> ModuleType:
    """Import ``module``, or say which of the package's extras installs it.

    Args:
        module: The module to import.
        extra: The package extra that installs it.
        where: What needed it, for the message.

    Raises:
        MissingDependencyError: If the module cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(
            f"{where} needs {module!r}, which is not installed (or failed to import: {err}); "
            f"install the extra: pip install 'typedrl[{extra}]'"
        ) from err

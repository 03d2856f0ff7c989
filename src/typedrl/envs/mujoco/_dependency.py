"""The optional ``mujoco-torch`` dependency, imported on first use."""

import importlib
from types import ModuleType

from typedrl.errors import MissingDependencyError

__all__ = ["EXTRA", "require"]

EXTRA = "mujoco-torch"
"""Name of the package extra that installs the differentiable MuJoCo backend."""


def require(module: str, *, where: str) -> ModuleType:
    """Import ``mujoco`` or ``mujoco_torch``, or say which extra installs it.

    Args:
        module: ``"mujoco"`` or ``"mujoco_torch"``.
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

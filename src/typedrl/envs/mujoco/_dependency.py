"""The optional ``mujoco-torch`` dependency, imported on first use."""

from types import ModuleType

from typedrl._optional import require_extra

__all__ = ["EXTRA", "require"]

EXTRA = "mujoco-torch"
"""Name of the package extra that installs the differentiable MuJoCo backend."""


def require(module: str, *, where: str) -> ModuleType:
    """Import ``"mujoco"`` or ``"mujoco_torch"``, or say that :data:`EXTRA` installs it.

    Raises:
        MissingDependencyError: If the module cannot be imported.
    """
    return require_extra(module, extra=EXTRA, where=where)

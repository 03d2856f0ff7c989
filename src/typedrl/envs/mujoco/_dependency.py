"""The optional ``mujoco-torch`` dependency, imported on first use."""

__all__ = ["EXTRA"]

EXTRA = "mujoco-torch"
"""Name of the package extra that installs the differentiable MuJoCo backend."""

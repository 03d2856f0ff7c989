"""The optional ``newton`` dependency (Newton physics on NVIDIA Warp), imported on first use."""

__all__ = ["EXTRA"]

EXTRA = "newton"
"""Name of the package extra that installs the Newton backend (``newton`` and ``warp``)."""

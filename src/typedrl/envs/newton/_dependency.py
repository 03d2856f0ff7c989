"""The optional ``newton`` dependency (Newton physics on NVIDIA Warp), imported on first use."""

__all__ = ["EXTRA", "USD_EXTRA"]

EXTRA = "newton"
"""Name of the package extra that installs the Newton backend (``newton`` and ``warp``)."""

USD_EXTRA = "newton-usd"
"""The package extra that lets the Newton backend read USD models.

It installs ``usd-core`` and ``newton-usd-schemas``.
"""

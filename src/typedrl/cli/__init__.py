"""The ``typedrl`` command.

Subcommands are added as their features land; ``typedrl --help`` lists them.
"""

from typedrl.cli._main import main as main

__all__ = ["main"]

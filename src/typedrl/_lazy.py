"""Lazy re-exports: a package names its public API but imports a submodule on first use.

``typedrl --version`` and ``--help`` would otherwise pay for importing torch,
tensordict and Lightning (several seconds) before printing one line. A package
``__init__`` lists its names once, as explicit ``if TYPE_CHECKING:`` re-exports
for type checkers and as the table given to :func:`lazy_exports` for the
interpreter.
"""

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, serving ``table``'s names.

    Args:
        package: The package's ``__name__``.
        table: Each public name mapped to the module that defines it.

    Returns:
        ``(__getattr__, __dir__)``: the first imports the name's module on first
        access and caches the value in the package; the second lists the names.

    Example:
        >>> getattr_, dir_ = lazy_exports("typedrl", {"ConfigError": "typedrl.errors"})
        >>> getattr_("ConfigError").__name__
        'ConfigError'
        >>> "ConfigError" in dir_()
        True
    """

    def getattr_(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(importlib.import_module(package)), *table})

    return getattr_, dir_

"""Tests of the package surface: explicit re-exports and typing marker."""

import importlib.resources

import typedrl


def test_all_names_resolve() -> None:
    """Every name in typedrl.__all__ exists."""
    missing = [name for name in typedrl.__all__ if not hasattr(typedrl, name)]
    assert missing == []


def test_ships_py_typed() -> None:
    """The package ships the PEP 561 marker so users' type checkers read its types."""
    assert importlib.resources.files("typedrl").joinpath("py.typed").is_file()

"""Fixtures shared by the unit tests."""

import jaxtyping
import pytest


@pytest.fixture
def without_runtime_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch jaxtyping's checks off, as in production: the package's own checks answer."""
    monkeypatch.setattr(jaxtyping.config, "jaxtyping_disable", True)

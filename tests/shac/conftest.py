"""Fixtures of the SHAC tests."""

from collections.abc import Callable

import pytest

from tests.shac.windows import FitCall, record_fit_calls
from typedrl.shac import SHAC


@pytest.fixture
def fit_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[SHAC], list[FitCall]]:
    """:func:`~tests.shac.windows.record_fit_calls` with the test's monkeypatch."""
    return lambda shac: record_fit_calls(shac, monkeypatch)

"""Fixtures shared by the unit tests."""

import os

import jaxtyping
import pytest

# Runs the tests start (typedrl train in a subprocess) precompile nothing in the
# background: the suite's CPU time stays its own. The test of that feature turns
# it back on for its own runs.
os.environ["TYPEDRL_BACKGROUND_COMPILE"] = "0"


@pytest.fixture
def without_runtime_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch jaxtyping's checks off, as in production: the package's own checks answer."""
    monkeypatch.setattr(jaxtyping.config, "jaxtyping_disable", True)

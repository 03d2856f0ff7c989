"""Fixtures of the real Isaac Lab tests: one simulation per process, so each test closes its env."""

import pytest

from tests_isaaclab._real import cartpole_usd

# Warnings Isaac Lab 3.0.0 and its simulation stack raise on import and env creation; the
# suite turns every other warning into an error, as the default suite does.
_UPSTREAM_WARNINGS = (
    "ignore:warp.config.quiet is deprecated:DeprecationWarning",
    "ignore:Newton shape color replacement is enabled:FutureWarning",
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
    "ignore:Articulation.set_joint_effort_target_index is deprecated:DeprecationWarning",
    "ignore:newton.actuators.Clamping is deprecated:DeprecationWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    """Allow the upstream warnings listed above."""
    for line in _UPSTREAM_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


@pytest.fixture(scope="session", autouse=True)
def _local_cartpole_usd() -> None:
    """Write the local cartpole USD once, before any env is built."""
    cartpole_usd()

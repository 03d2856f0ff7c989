"""Settings shared by every test suite (tests/, property_tests/, the doctests of src/)."""

import os

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, share the cores among the workers instead of oversubscribing them.

    Each worker gets ``cpu_count // workers`` torch threads (at least one); a
    serial run keeps torch's default.
    """
    del config
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))

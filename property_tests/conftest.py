"""Hypothesis profiles for the property tests.

``dev`` (default) runs quickly while iterating; ``ci`` runs more examples with
derandomised, reproducible seeds. Select one with ``HYPOTHESIS_PROFILE``.
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from property_tests.rank_pair import RankPair

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def rank_pair() -> Iterator[RankPair]:
    """Two gloo ranks shared by every multi-process property test of the session."""
    pair = RankPair()
    try:
        yield pair
    finally:
        pair.close()

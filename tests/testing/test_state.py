"""Tests for typedrl.testing.CounterState."""

import pytest

from typedrl.errors import CheckpointError
from typedrl.testing import CounterState


def test_round_trip() -> None:
    """state_dict then load_state_dict restores the counter."""
    restored = CounterState()
    restored.load_state_dict(CounterState(steps=11).state_dict())
    assert restored.steps == 11


@pytest.mark.parametrize("bad", [{}, {"steps": "3"}, {"steps": True}])
def test_rejects_foreign_state(bad: dict[str, object]) -> None:
    """A state without an int counter raises CheckpointError."""
    with pytest.raises(CheckpointError, match="'steps'"):
        CounterState().load_state_dict(bad)

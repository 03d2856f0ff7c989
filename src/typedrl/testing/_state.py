"""A minimal checkpointable object."""

from typing import Any, final

from typedrl._validation import describe
from typedrl.errors import CheckpointError

__all__ = ["CounterState"]


@final
class CounterState:
    """A :class:`~typedrl.protocols.SupportsStateDict` holding one step counter.

    Example:
        >>> state = CounterState(steps=3)
        >>> restored = CounterState()
        >>> _ = restored.load_state_dict(state.state_dict())
        >>> restored.steps
        3
    """

    def __init__(self, *, steps: int = 0) -> None:
        self.steps = steps

    def state_dict(self) -> dict[str, Any]:
        """Return ``{"steps": steps}``."""
        return {"steps": self.steps}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore the counter; reject a state without an int ``"steps"``."""
        steps = state_dict.get("steps")
        if isinstance(steps, bool) or not isinstance(steps, int):
            raise CheckpointError(
                f"CounterState expects an int under 'steps', got {describe(steps)}"
            )
        self.steps = steps

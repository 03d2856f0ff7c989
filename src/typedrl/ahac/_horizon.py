"""AHAC's window length, learnt by dual ascent on a contact-force constraint."""

from collections.abc import Sequence
from typing import Any, Literal, final

from typedrl.training._update import schedule_factor

__all__ = ["AdaptiveHorizon"]


@final
class AdaptiveHorizon:
    """The horizon ``H`` and its Lagrange multiplier ``lambda``, updated once per update.

    AHAC asks each step of a window to keep the mean contact-force norm over the
    env's rows, ``c_t``, below the threshold ``C``. After a window of
    ``T = round(H)`` steps, with the dual step ``alpha`` (decayed by its schedule)::

        lambda_t = lambda - alpha * (C - c_t)          for t = 0 .. T - 1
        H       <- clip(H + alpha * sum_t lambda_t, H_min, H_max)
        lambda  <- lambda_0

    as the authors' ``ahac.py`` computes it (``AHAC.train``, "Train horizon",
    and ``init_buffers``, which refills the per-step multipliers with the
    first one for the next window). With the signs as written there, a
    multiplier rises while its step's contacts exceed ``C`` and ``H`` moves with
    the multipliers' sum: contacts above the threshold lengthen the window and
    contacts below it shorten it, down to ``H_min``. ``H``
    starts at ``H_min`` and ``lambda`` at 0. Python floats (float64); the
    reference keeps float32 tensors.

    It is checkpointed (:meth:`state_dict`): a resumed run continues with the
    same ``H``, ``lambda`` and place on the schedule. Loading with
    ``restart_schedule=True`` starts ``alpha``'s curve again
    (:meth:`restart_schedule`, a
    :class:`~typedrl.training.SupportsScheduleRestart`); ``H`` and ``lambda``
    are learned, not scheduled, and keep their values.

    Args:
        minimum: ``H_min``, the first window's length.
        maximum: ``H_max``.
        threshold: ``C``.
        learning_rate: ``alpha`` at the first update.
        schedule: How ``alpha`` decays over ``planned_updates``.
        min_learning_rate: Where a decaying ``alpha`` ends.
        planned_updates: Updates the run plans (``None`` with a constant schedule).

    Example:
        >>> horizon = AdaptiveHorizon(
        ...     minimum=8, maximum=64, threshold=500.0, learning_rate=0.01,
        ...     schedule="constant", min_learning_rate=0.0, planned_updates=None,
        ... )
        >>> horizon.steps
        8
        >>> horizon.update([100.0] * 8)  # lambda_t = -0.01 * 400 = -4: H -> 8 - 0.32, clipped
        >>> horizon.steps, horizon.multiplier
        (8, -4.0)
        >>> horizon.update([900.0] * 8)  # lambda_t = -4 + 4 = 0: H stays
        >>> horizon.horizon, horizon.multiplier
        (8.0, 0.0)
        >>> horizon.update([1500.0] * 8)  # lambda_t = 10: H -> 8 + 0.8
        >>> horizon.horizon, horizon.steps
        (8.8, 9)
    """

    def __init__(
        self,
        *,
        minimum: int,
        maximum: int,
        threshold: float,
        learning_rate: float,
        schedule: Literal["constant", "linear", "cosine"],
        min_learning_rate: float,
        planned_updates: int | None,
    ) -> None:
        self.minimum = float(minimum)
        self.maximum = float(maximum)
        self.threshold = threshold
        self.learning_rate = learning_rate
        self._factor = schedule_factor(
            schedule=schedule,
            planned_updates=planned_updates,
            floor=min_learning_rate / learning_rate,
        )
        self.horizon = float(minimum)
        self.multiplier = 0.0
        self.updates = 0

    @property
    def steps(self) -> int:
        """The next window's length: ``round(H)`` (half to even, as the reference's ``round``)."""
        return round(self.horizon)

    @property
    def rate(self) -> float:
        """``alpha`` of the next update."""
        return self.learning_rate * self._factor(self.updates)

    def update(self, contact_means: Sequence[float]) -> None:
        """One dual-ascent step from each step's mean contact-force norm ``c_t`` over the rows."""
        alpha = self.rate
        # lambda_t <- lambda - alpha (C - c_t) (the reference's self.lambd, one per step)
        multipliers = [self.multiplier - alpha * (self.threshold - mean) for mean in contact_means]
        # H <- clip(H + alpha sum_t lambda_t, H_min, H_max)
        self.horizon = min(max(self.horizon + alpha * sum(multipliers), self.minimum), self.maximum)
        # The next window starts from the first step's multiplier (the reference's init_buffers).
        if multipliers:
            self.multiplier = multipliers[0]
        self.updates += 1

    def restart_schedule(self) -> None:
        """Put ``alpha`` back at its schedule's beginning; ``H`` and ``lambda`` stay.

        Example:
            >>> horizon = AdaptiveHorizon(
            ...     minimum=8, maximum=64, threshold=500.0, learning_rate=0.01,
            ...     schedule="linear", min_learning_rate=0.0, planned_updates=2,
            ... )
            >>> horizon.update([1500.0] * 8)
            >>> horizon.rate, horizon.horizon
            (0.005, 8.8)
            >>> horizon.restart_schedule()
            >>> horizon.rate, horizon.horizon
            (0.01, 8.8)
        """
        self.updates = 0

    def state_dict(self) -> dict[str, Any]:
        """``H``, ``lambda`` and the updates taken (the schedule's place)."""
        return {"horizon": self.horizon, "multiplier": self.multiplier, "updates": self.updates}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`'s values."""
        self.horizon = float(state_dict["horizon"])
        self.multiplier = float(state_dict["multiplier"])
        self.updates = int(state_dict["updates"])

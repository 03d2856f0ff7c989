"""Tests for typedrl.ahac._horizon: the dual ascent on the contact constraint, step by step."""

import pytest

from typedrl.ahac import AdaptiveHorizon
from typedrl.errors import ConfigError


def horizon(**fields: object) -> AdaptiveHorizon:
    """H in [8, 64], C = 500, a constant alpha = 0.01 unless ``fields`` say otherwise."""
    values: dict[str, object] = {
        "minimum": 8,
        "maximum": 64,
        "threshold": 500.0,
        "learning_rate": 0.01,
        "schedule": "constant",
        "min_learning_rate": 0.0,
        "planned_updates": None,
        **fields,
    }
    return AdaptiveHorizon(**values)  # type: ignore[arg-type]


def test_it_starts_at_the_shortest_window_with_no_multiplier() -> None:
    """H = H_min, lambda = 0."""
    start = horizon()
    assert (start.horizon, start.multiplier, start.steps, start.updates) == (8.0, 0.0, 8, 0)


def test_each_update_written_out() -> None:
    """lambda_t = lambda - alpha (C - c_t); H += alpha sum_t lambda_t; lambda <- lambda_0."""
    dual = horizon(minimum=2, maximum=64)
    dual.horizon = 10.0
    # c = [600, 700]: lambda_t = 0 - 0.01 * (500 - c_t) = [1, 2]; H = 10 + 0.01 * 3
    dual.update([600.0, 700.0])
    assert dual.horizon == pytest.approx(10.03, abs=1e-12)
    assert dual.multiplier == pytest.approx(1.0, abs=1e-12)
    # lambda_t = 1 - 0.01 * (500 - c_t) = [1 - 4, 1 + 1, 1 + 0] for c = [100, 600, 500]
    dual.update([100.0, 600.0, 500.0])
    assert dual.horizon == pytest.approx(10.03 + 0.01 * (-3.0 + 2.0 + 1.0), abs=1e-12)
    assert dual.multiplier == pytest.approx(-3.0, abs=1e-12)
    assert dual.updates == 2


@pytest.mark.parametrize(
    ("contacts", "expected"),
    [([1e9] * 8, 64.0), ([0.0] * 8, 8.0)],
)
def test_the_horizon_is_clipped_to_its_range(contacts: list[float], expected: float) -> None:
    """Contacts far above C drive H to H_max, far below to H_min; no further."""
    dual = horizon()
    for _ in range(3):
        dual.update(contacts)
    assert dual.horizon == expected
    assert dual.steps == int(expected)


def test_steps_round_half_to_even() -> None:
    """The window is round(H), half to even as Python's (and the reference's) round."""
    dual = horizon()
    for value, steps in [(8.5, 8), (9.5, 10), (9.49, 9), (9.51, 10)]:
        dual.horizon = value
        assert dual.steps == steps


def test_a_linear_schedule_decays_alpha_to_its_floor() -> None:
    """alpha decays with the updates taken, as the learning rates do."""
    dual = horizon(schedule="linear", planned_updates=4, min_learning_rate=0.002)
    rates = []
    for _ in range(6):
        rates.append(dual.rate)
        dual.update([500.0])
    assert rates == pytest.approx([0.01, 0.008, 0.006, 0.004, 0.002, 0.002])


def test_a_decaying_schedule_needs_a_plan() -> None:
    """Without planned updates a linear alpha is refused, with the fix."""
    with pytest.raises(ConfigError, match=r"give the run a budget of total_updates"):
        horizon(schedule="linear", planned_updates=None)


def test_state_dict_round_trip() -> None:
    """H, lambda and the place on the schedule come back exactly."""
    dual = horizon(schedule="linear", planned_updates=10)
    dual.update([612.5] * 8)
    dual.update([100.25] * 9)
    restored = horizon(schedule="linear", planned_updates=10)
    restored.load_state_dict(dual.state_dict())
    assert restored.state_dict() == dual.state_dict()
    dual.update([777.0] * 8)
    restored.update([777.0] * 8)
    assert restored.state_dict() == dual.state_dict()

"""Tests for typedrl.apg._adjoint: per-row clipping and measurement of the action adjoint."""

import math

import pytest
import torch
from torch import Tensor

from typedrl.apg._adjoint import ADJOINT_METRICS, ActionAdjointClipper
from typedrl.errors import ConfigError

_CPU = torch.device("cpu")


def _backward(clipper: ActionAdjointClipper, grad: Tensor) -> Tensor:
    """The gradient that reaches a leaf action when ``grad`` comes back through the clipper."""
    action = torch.zeros_like(grad, requires_grad=True)
    torch.autograd.backward((clipper.attach(action) * grad).sum())
    assert action.grad is not None
    return action.grad


def test_clips_rows_above_the_threshold_and_keeps_the_others() -> None:
    """Rows above max_norm keep their direction at norm max_norm; rows below are untouched."""
    clipper = ActionAdjointClipper(max_norm=1.0, device=_CPU)
    grad = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64)
    out = _backward(clipper, grad)
    torch.testing.assert_close(out[0], torch.tensor([0.6, 0.8], dtype=torch.float64))
    assert torch.equal(out[1:], grad[1:])
    stats = clipper.statistics()
    assert tuple(stats) == ADJOINT_METRICS
    assert stats["adjoint/rows"] == 3.0
    assert stats["adjoint/clipped_fraction"] == pytest.approx(1 / 3)
    assert stats["adjoint/nonfinite_rows"] == 0.0
    assert stats["adjoint/norm_mean"] == pytest.approx((5.0 + 0.5 + 0.0) / 3)
    assert stats["adjoint/norm_max"] == pytest.approx(5.0)


def test_zeroes_non_finite_rows_when_clipping() -> None:
    """A row holding NaN or infinity becomes zero and is counted, not averaged."""
    clipper = ActionAdjointClipper(max_norm=10.0, device=_CPU)
    grad = torch.tensor([[math.nan, 1.0], [math.inf, 0.0], [1.0, 2.0]])
    out = _backward(clipper, grad)
    assert torch.equal(out[:2], torch.zeros(2, 2))
    assert torch.equal(out[2], grad[2])
    stats = clipper.statistics()
    assert stats["adjoint/nonfinite_rows"] == 2.0
    assert stats["adjoint/clipped_fraction"] == 0.0
    assert stats["adjoint/norm_mean"] == pytest.approx(math.sqrt(5.0))


def test_measures_only_without_a_threshold() -> None:
    """max_norm=None leaves every gradient as it is, non-finite rows included."""
    clipper = ActionAdjointClipper(max_norm=None, device=_CPU)
    grad = torch.tensor([[30.0, 40.0], [math.nan, 0.0]])
    out = _backward(clipper, grad)
    torch.testing.assert_close(out, grad, equal_nan=True, rtol=0, atol=0)
    stats = clipper.statistics()
    assert stats["adjoint/clipped_fraction"] == 0.0
    assert stats["adjoint/nonfinite_rows"] == 1.0
    assert stats["adjoint/norm_max"] == pytest.approx(50.0)


def test_huge_float32_gradients_do_not_overflow() -> None:
    """Entries near float32's maximum are measured and clipped, not turned into zeros."""
    clipper = ActionAdjointClipper(max_norm=2.0, device=_CPU)
    big = 3e38
    grad = torch.tensor([[big, big, -big]], dtype=torch.float32)
    out = _backward(clipper, grad)
    assert bool(torch.isfinite(out).all())
    expected = 2.0 / math.sqrt(3.0)
    torch.testing.assert_close(out[0], torch.tensor([expected, expected, -expected]))
    assert clipper.statistics()["adjoint/norm_max"] == pytest.approx(big * math.sqrt(3.0))


def test_rows_are_the_first_dimension_of_any_action_shape() -> None:
    """Scalar actions ([num_envs]) and matrix actions ([num_envs, 2, 3]) clip per row."""
    clipper = ActionAdjointClipper(max_norm=1.0, device=_CPU)
    out = _backward(clipper, torch.tensor([-4.0, 0.5]))
    torch.testing.assert_close(out, torch.tensor([-1.0, 0.5]))
    matrix = torch.full((2, 2, 3), 2.0)
    out = _backward(clipper, matrix)
    torch.testing.assert_close(out.reshape(2, -1).norm(dim=1), torch.ones(2))
    assert clipper.statistics()["adjoint/rows"] == 4.0


def test_only_the_gradient_through_the_alias_is_clipped() -> None:
    """Terms of the objective that use the original action directly pass unclipped."""
    clipper = ActionAdjointClipper(max_norm=1.0, device=_CPU)
    action = torch.zeros(1, 1, requires_grad=True)
    through_env = clipper.attach(action) * 5.0
    torch.autograd.backward((through_env + 3.0 * action).sum())
    assert action.grad is not None
    assert action.grad.item() == pytest.approx(1.0 + 3.0)


def test_statistics_accumulate_until_reset() -> None:
    """Every backward adds to the statistics; reset() zeroes them; accumulators stay on device."""
    clipper = ActionAdjointClipper(max_norm=1.0, device="cpu")
    assert clipper.statistics() == dict.fromkeys(ADJOINT_METRICS, 0.0)
    _backward(clipper, torch.tensor([[2.0]]))
    _backward(clipper, torch.tensor([[3.0]]))
    stats = clipper.statistics()
    assert stats["adjoint/rows"] == 2.0
    assert stats["adjoint/norm_mean"] == pytest.approx(2.5)
    assert stats["adjoint/norm_max"] == pytest.approx(3.0)
    assert clipper.rows.dtype == torch.int64
    assert clipper.norm_sum.dtype == torch.float64
    assert int(clipper.clipped) == 2
    clipper.reset()
    assert clipper.statistics() == dict.fromkeys(ADJOINT_METRICS, 0.0)


@pytest.mark.parametrize("max_norm", [0.0, -1.0, math.nan, math.inf])
def test_refuses_a_bad_threshold(max_norm: float) -> None:
    """max_norm must be a positive, finite float or None."""
    with pytest.raises(ConfigError, match="max_norm must"):
        ActionAdjointClipper(max_norm=max_norm, device=_CPU)

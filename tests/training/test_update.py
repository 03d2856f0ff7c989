"""Tests for typedrl.training._update: the update kernel, optimizers and schedules."""

import pytest
import torch
from torch import nn

from tests.two_ranks import TwoRanks
from typedrl.distributed import SingleProcess
from typedrl.training import GradientStep, UpdateOutcome, build_optimizer, build_scheduler
from typedrl.training._update import restart_schedule, resync_schedule


def _layer_with_gradient(weight: list[float], bias: float) -> nn.Linear:
    """A 2-to-1 linear layer whose weight and bias gradients are the given values."""
    layer = nn.Linear(2, 1)
    layer.weight.grad = torch.tensor([weight])
    assert layer.bias is not None
    layer.bias.grad = torch.tensor([bias])
    return layer


def test_reduce_packs_every_gradient_and_measures_the_norm() -> None:
    """One process: the flat gradient in parameter order, its norm, the pooled sums as given."""
    layer = _layer_with_gradient([3.0, 0.0], 4.0)
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=SingleProcess(),
        max_grad_norm=None,
    )
    reduced = kernel.reduce(torch.tensor([2.0, 5.0]), scale=0.5)
    assert reduced.flat.tolist() == [1.5, 0.0, 2.0]
    assert float(reduced.norm) == 2.5
    assert reduced.pooled.tolist() == [2.0, 5.0]


def test_a_missing_gradient_counts_as_zero() -> None:
    """A parameter without a gradient contributes zeros to the flat gradient."""
    layer = _layer_with_gradient([1.0, 1.0], 0.0)
    assert layer.bias is not None
    layer.bias.grad = None
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=SingleProcess(),
        max_grad_norm=None,
    )
    assert kernel.reduce().flat.tolist() == [1.0, 1.0, 0.0]


def test_two_ranks_average_the_gradient_and_sum_the_statistics_in_one_all_reduce() -> None:
    """The gradient is averaged over the ranks, the pooled statistics summed: one collective."""
    world = TwoRanks(remote=lambda tensor: tensor * 3.0)
    layer = _layer_with_gradient([1.0, 2.0], 3.0)
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=world,
        max_grad_norm=None,
    )
    reduced = kernel.reduce(torch.tensor([1.0]))
    assert world.calls == ["all_reduce_sum"]
    # (g + 3 g) / 2 = 2 g; the statistic 1 + 3 = 4
    assert reduced.flat.tolist() == [2.0, 4.0, 6.0]
    assert reduced.pooled.tolist() == [4.0]


def test_last_pooled_averages_over_every_ranks_samples() -> None:
    """average="last_pooled" divides the summed gradient by the summed sample count."""
    world = TwoRanks(remote=lambda tensor: tensor.clone())
    layer = _layer_with_gradient([4.0, 8.0], 2.0)
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=world,
        max_grad_norm=None,
    )
    reduced = kernel.reduce(torch.tensor([2.0]), average="last_pooled")
    # summed gradient (8, 16, 4) over 2 + 2 samples
    assert reduced.flat.tolist() == [2.0, 4.0, 1.0]


def test_synchronised_gradients_run_no_collective() -> None:
    """Gradients DDP already averaged are used as they are: no all-reduce, no division."""
    world = TwoRanks()
    layer = _layer_with_gradient([1.0, 2.0], 3.0)
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=world,
        max_grad_norm=None,
        synchronised=True,
    )
    assert kernel.reduce().flat.tolist() == [1.0, 2.0, 3.0]
    assert world.calls == []


def test_apply_clips_to_the_maximum_norm_and_steps() -> None:
    """g <- g * min(1, max_norm / (||g|| + 1e-6)); SGD with lr 1 subtracts the clipped g."""
    layer = _layer_with_gradient([3.0, 0.0], 4.0)
    with torch.no_grad():
        layer.weight.zero_()
        assert layer.bias is not None
        layer.bias.zero_()
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=SingleProcess(),
        max_grad_norm=1.0,
    )
    kernel.apply(kernel.reduce())
    factor = 1.0 / (5.0 + 1e-6)
    torch.testing.assert_close(layer.weight, torch.tensor([[-3.0 * factor, 0.0]]))
    assert layer.bias is not None
    torch.testing.assert_close(layer.bias, torch.tensor([-4.0 * factor]))
    assert layer.weight.grad is None


def test_a_small_gradient_is_not_scaled_up() -> None:
    """Below max_grad_norm the gradient is applied as it is."""
    layer = _layer_with_gradient([0.3, 0.0], 0.4)
    before = layer.weight.detach().clone()
    kernel = GradientStep(
        list(layer.parameters()),
        torch.optim.SGD(layer.parameters(), lr=1.0),
        dist=SingleProcess(),
        max_grad_norm=10.0,
    )
    kernel.apply(kernel.reduce())
    torch.testing.assert_close(layer.weight, before - torch.tensor([[0.3, 0.0]]))


def test_skip_changes_nothing_but_clears_the_gradients() -> None:
    """A skipped update leaves weights and optimizer state alone and drops the gradients."""
    layer = _layer_with_gradient([float("nan"), 1.0], 1.0)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1.0)
    before = [p.detach().clone() for p in layer.parameters()]
    kernel = GradientStep(
        list(layer.parameters()), optimizer, dist=SingleProcess(), max_grad_norm=1.0
    )
    reduced = kernel.reduce()
    assert not bool(torch.isfinite(reduced.norm))
    kernel.skip()
    for parameter, old in zip(layer.parameters(), before, strict=True):
        assert torch.equal(parameter, old)
        assert parameter.grad is None
    assert optimizer.state_dict()["state"] == {}


def test_update_outcome_is_a_frozen_value() -> None:
    """An outcome carries applied and its metrics, and cannot be changed."""
    outcome = UpdateOutcome(applied=True, metrics={"loss/policy": 1.0})
    assert outcome.applied
    with pytest.raises(AttributeError):
        outcome.applied = False  # type: ignore[misc]


def test_build_optimizer_fuses_adam_unless_told_not_to() -> None:
    """Adam is fused on CPU by default; fused=False gives the unfused one a scaler needs."""
    parameters = list(nn.Linear(2, 1).parameters())
    fused = build_optimizer(parameters, name="adam", learning_rate=1e-3)
    unfused = build_optimizer(parameters, name="adam", learning_rate=1e-3, fused=False)
    assert fused.defaults["fused"] is True
    assert unfused.defaults["fused"] is False


def test_resync_and_restart_put_the_rate_on_the_curve() -> None:
    """resync sets the rate of the scheduler's current update; restart goes back to the start."""
    layer = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=1.0)
    scheduler = build_scheduler(optimizer, schedule="linear", planned_updates=4, learning_rate=1.0)
    for _ in range(2):
        optimizer.step()
        scheduler.step()
    optimizer.param_groups[0]["lr"] = 123.0
    resync_schedule(scheduler)
    assert optimizer.param_groups[0]["lr"] == 0.5
    restart_schedule(scheduler)
    assert scheduler.last_epoch == 0
    assert optimizer.param_groups[0]["lr"] == 1.0

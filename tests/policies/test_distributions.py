"""Tests for typedrl.policies._distributions against torch.distributions."""

import torch

from typedrl.policies import Categorical, DiagonalGaussian


def test_gaussian_matches_torch() -> None:
    """Log-density and entropy equal torch.distributions.Normal summed over dimensions."""
    torch.manual_seed(0)
    mean, log_std = torch.randn(6, 3), torch.randn(3)
    ours = DiagonalGaussian(mean, log_std)
    reference = torch.distributions.Normal(mean, log_std.exp().expand_as(mean))
    action = ours.sample()
    expected_lp = reference.log_prob(action).sum(-1)  # type: ignore[no-untyped-call]
    expected_h = reference.entropy().sum(-1)  # type: ignore[no-untyped-call]
    assert torch.allclose(ours.log_prob(action), expected_lp, atol=1e-5)
    assert torch.allclose(ours.entropy(), expected_h, atol=1e-5)
    assert torch.equal(ours.mode(), mean)


def test_gaussian_sample_is_reparameterised() -> None:
    """Samples carry gradients to the mean and the log-std."""
    mean = torch.zeros(2, 1, requires_grad=True)
    log_std = torch.zeros(1, requires_grad=True)
    grad_mean, grad_log_std = torch.autograd.grad(
        DiagonalGaussian(mean, log_std).sample().sum(), [mean, log_std]
    )
    assert torch.equal(grad_mean, torch.ones(2, 1))
    assert grad_log_std.shape == (1,)


def test_categorical_matches_torch() -> None:
    """Log-probabilities and entropy equal torch.distributions.Categorical."""
    torch.manual_seed(0)
    logits = torch.randn(5, 4)
    ours = Categorical(logits)
    reference = torch.distributions.Categorical(logits=logits)
    action = ours.sample()
    assert action.dtype == torch.int64
    expected_lp = reference.log_prob(action)  # type: ignore[no-untyped-call]
    expected_h = reference.entropy()  # type: ignore[no-untyped-call]
    assert torch.allclose(ours.log_prob(action), expected_lp, atol=1e-6)
    assert torch.allclose(ours.entropy(), expected_h, atol=1e-6)
    assert torch.equal(ours.mode(), logits.argmax(-1))


def test_categorical_sampling_frequencies() -> None:
    """Sampled frequencies follow the probabilities."""
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.7]])).expand(20000, 3)
    counts = torch.bincount(Categorical(logits).sample(), minlength=3).double() / 20000
    assert torch.allclose(counts, torch.tensor([0.1, 0.2, 0.7], dtype=torch.float64), atol=0.02)

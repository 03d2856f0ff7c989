"""Tests for the mock policies in typedrl.testing."""

import math

import torch
from tensordict import TensorDict

from typedrl.testing import ConstantPolicy, LinearActorCritic, LinearDifferentiablePolicy


def _obs(batch: int, width: int) -> TensorDict:
    return TensorDict({"obs": torch.randn(batch, width)}, batch_size=[batch])


def test_constant_policy_repeats_action() -> None:
    """Every row gets the configured action."""
    policy = ConstantPolicy(torch.tensor([1, 0]))
    out = policy.act(_obs(3, 2), deterministic=True)
    assert out["action"].tolist() == [[1, 0]] * 3


def test_actor_critic_log_prob_matches_torch_normal() -> None:
    """The hand-written Gaussian log-density and entropy agree with torch.distributions."""
    torch.manual_seed(0)
    policy = LinearActorCritic(obs_dim=3, act_dim=2, log_std=-0.5)
    obs = _obs(5, 3)
    out = policy.act(obs)
    mean = policy.mean(obs["obs"])
    reference = torch.distributions.Normal(mean, torch.full_like(mean, math.exp(-0.5)))
    expected_log_prob = reference.log_prob(out["action"]).sum(-1)  # type: ignore[no-untyped-call]
    expected_entropy = reference.entropy().sum(-1)  # type: ignore[no-untyped-call]
    assert torch.allclose(out["log_prob"], expected_log_prob)
    assert torch.allclose(out["entropy"], expected_entropy)
    scored = policy.evaluate(obs, out["action"])
    assert torch.allclose(scored["log_prob"], out["log_prob"])
    assert torch.allclose(scored["value"], policy.value(obs))


def test_actor_critic_deterministic_is_mean() -> None:
    """Deterministic actions are the Gaussian mean; sampled actions carry no graph."""
    policy = LinearActorCritic(obs_dim=2, act_dim=1)
    obs = _obs(4, 2)
    assert torch.allclose(policy.act(obs, deterministic=True)["action"], policy.mean(obs["obs"]))
    assert not policy.act(obs)["action"].requires_grad


def test_differentiable_policy_gradient_reaches_parameters() -> None:
    """A loss on the action backpropagates to the linear layer."""
    policy = LinearDifferentiablePolicy(obs_dim=2, act_dim=1, noise_std=0.5)
    policy.act(_obs(4, 2))["action"].sum().backward()
    assert policy.linear.weight.grad is not None
    assert bool((policy.linear.weight.grad != 0).any())


def test_differentiable_policy_deterministic_has_no_noise() -> None:
    """Deterministic actions equal W x + b."""
    policy = LinearDifferentiablePolicy(obs_dim=2, act_dim=1, noise_std=1.0)
    obs = _obs(3, 2)
    assert torch.equal(policy.act(obs, deterministic=True)["action"], policy.linear(obs["obs"]))

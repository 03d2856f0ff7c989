"""Tiny policies implementing the policy protocols, for tests and examples."""

import math
from typing import final

import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._validation import positive_int
from typedrl.types import BatchAction, EnvScalar, Obs

__all__ = ["ConstantPolicy", "LinearActorCritic", "LinearDifferentiablePolicy"]


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _features(obs: Obs) -> Tensor:
    features: Tensor = obs["obs"]
    return features


def _gaussian_log_prob(action: Tensor, mean: Tensor, log_std: Tensor) -> Tensor:
    """Log-density of a diagonal Gaussian, summed over the action dimension."""
    z = (action - mean) * torch.exp(-log_std)
    return (-0.5 * z.square() - log_std - _LOG_SQRT_2PI).sum(-1)


def _gaussian_entropy(log_std: Tensor, batch: int) -> Tensor:
    """Entropy of a diagonal Gaussian, summed over the action dimension, per row."""
    return (0.5 + _LOG_SQRT_2PI + log_std).sum(-1).expand(batch)


@final
class ConstantPolicy(nn.Module):
    """A :class:`~typedrl.protocols.Policy` that always returns the same action.

    Args:
        action: One row's action; it is repeated for every row of a batch.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> policy = ConstantPolicy(torch.tensor([0.5]))
        >>> obs = TensorDict({"obs": torch.zeros(2, 3)}, batch_size=[2])
        >>> policy.act(obs)["action"].tolist()
        [[0.5], [0.5]]
    """

    def __init__(self, action: Tensor) -> None:
        super().__init__()
        self.register_buffer("_action", action.detach().clone())

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Return the constant action for every row."""
        del deterministic
        batch = obs.batch_size[0]
        action = self.get_buffer("_action")
        actions = action.to(obs.device).expand(batch, *action.shape).clone()
        return TensorDict({"action": actions}, batch_size=[batch], device=obs.device)


@final
class LinearActorCritic(nn.Module):
    """A linear Gaussian :class:`~typedrl.protocols.ActorCritic` over ``obs["obs"]``.

    Args:
        obs_dim: Width of ``obs["obs"]``.
        act_dim: Width of the continuous action.
        log_std: Initial log standard deviation of every action dimension.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> _ = torch.manual_seed(0)
        >>> policy = LinearActorCritic(obs_dim=3, act_dim=1)
        >>> out = policy.act(TensorDict({"obs": torch.zeros(4, 3)}, batch_size=[4]))
        >>> sorted(out.keys()), list(out["action"].shape)
        (['action', 'entropy', 'log_prob', 'value'], [4, 1])
    """

    def __init__(self, *, obs_dim: int, act_dim: int, log_std: float = 0.0) -> None:
        super().__init__()
        positive_int("LinearActorCritic", "obs_dim", obs_dim)
        positive_int("LinearActorCritic", "act_dim", act_dim)
        self.mean = nn.Linear(obs_dim, act_dim)
        self.critic = nn.Linear(obs_dim, 1)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std)))

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Sample (or take the mean of) the Gaussian and report its statistics."""
        mean: Tensor = self.mean(_features(obs))
        action = mean if deterministic else mean + self.log_std.exp() * torch.randn_like(mean)
        action = action.detach()
        return TensorDict(
            {
                "action": action,
                "log_prob": _gaussian_log_prob(action, mean, self.log_std),
                "entropy": _gaussian_entropy(self.log_std, action.shape[0]),
                "value": self.value(obs),
            },
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def evaluate(self, obs: Obs, action: BatchAction) -> Obs:
        """Log-probability, entropy and value for given actions, with gradients."""
        mean: Tensor = self.mean(_features(obs))
        return TensorDict(
            {
                "log_prob": _gaussian_log_prob(action, mean, self.log_std),
                "entropy": _gaussian_entropy(self.log_std, mean.shape[0]),
                "value": self.value(obs),
            },
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def value(self, obs: Obs) -> EnvScalar:
        """State value ``V(obs)``."""
        values: Tensor = self.critic(_features(obs)).squeeze(-1)
        return values


@final
class LinearDifferentiablePolicy(nn.Module):
    """A linear :class:`~typedrl.protocols.DifferentiablePolicy`: ``a = W x + b + std * eps``.

    Args:
        obs_dim: Width of ``obs["obs"]``.
        act_dim: Width of the action.
        noise_std: Standard deviation of the reparameterised exploration noise
            (``0`` for a deterministic policy).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> policy = LinearDifferentiablePolicy(obs_dim=1, act_dim=1, noise_std=0.1)
        >>> action = policy.act(TensorDict({"obs": torch.ones(2, 1)}, batch_size=[2]))["action"]
        >>> action.requires_grad, policy.reparameterized
        (True, True)
    """

    def __init__(self, *, obs_dim: int, act_dim: int, noise_std: float = 0.0) -> None:
        super().__init__()
        positive_int("LinearDifferentiablePolicy", "obs_dim", obs_dim)
        positive_int("LinearDifferentiablePolicy", "act_dim", act_dim)
        self.linear = nn.Linear(obs_dim, act_dim)
        self.noise_std = float(noise_std)

    @property
    def reparameterized(self) -> bool:
        """Always ``True``: the noise is added outside the graph of the parameters."""
        return True

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Return ``W x + b`` plus reparameterised noise unless ``deterministic``."""
        mean: Tensor = self.linear(_features(obs))
        action = mean
        if not deterministic and self.noise_std > 0.0:
            action = mean + self.noise_std * torch.randn_like(mean)
        return TensorDict({"action": action}, batch_size=obs.batch_size, device=obs.device)

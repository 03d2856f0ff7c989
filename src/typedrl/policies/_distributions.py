"""The two action distributions of the MLP actor-critic, written for speed and typing.

``torch.distributions`` validates arguments and is untyped; these small heads
compute exactly what PPO needs (sample, mode, log-probability, entropy).
"""

import math
from typing import final

import torch
from torch import Tensor

__all__ = ["Categorical", "DiagonalGaussian"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@final
class DiagonalGaussian:
    """A Gaussian with independent action dimensions.

    Example:
        >>> dist = DiagonalGaussian(torch.zeros(2, 3), torch.zeros(3))
        >>> dist.log_prob(torch.zeros(2, 3)).shape, dist.entropy().shape
        (torch.Size([2]), torch.Size([2]))
    """

    def __init__(self, mean: Tensor, log_std: Tensor) -> None:
        self.mean = mean
        self.log_std = log_std.expand_as(mean)

    def sample(self) -> Tensor:
        """A sample ``mean + std * noise`` (reparameterised)."""
        return self.mean + self.log_std.exp() * torch.randn_like(self.mean)

    def mode(self) -> Tensor:
        """The mean."""
        return self.mean

    def log_prob(self, action: Tensor) -> Tensor:
        """Log-density, summed over the action dimensions: ``[batch]``."""
        # log N(a | mu, sigma) = -(a - mu)^2 / (2 sigma^2) - log sigma - log sqrt(2 pi)
        z = (action - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z.square() - self.log_std - _LOG_SQRT_2PI).sum(-1)

    def entropy(self) -> Tensor:
        """Entropy, summed over the action dimensions: ``[batch]``."""
        # H = 1/2 + log sqrt(2 pi) + log sigma, per dimension
        return (0.5 + _LOG_SQRT_2PI + self.log_std).sum(-1)


@final
class Categorical:
    """A categorical distribution over ``logits.shape[-1]`` actions.

    Example:
        >>> dist = Categorical(torch.zeros(2, 4))
        >>> dist.entropy()
        tensor([1.3863, 1.3863])
    """

    def __init__(self, logits: Tensor) -> None:
        # Normalised log-probabilities: log p_k = l_k - logsumexp(l)
        self.log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)

    def sample(self) -> Tensor:
        """A sampled action index, int64 ``[batch]``."""
        return torch.multinomial(self.log_probs.exp(), 1).squeeze(-1)

    def mode(self) -> Tensor:
        """The most likely action, int64 ``[batch]``."""
        return self.log_probs.argmax(-1)

    def log_prob(self, action: Tensor) -> Tensor:
        """Log-probability of integer actions ``[batch]``."""
        return self.log_probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> Tensor:
        """Entropy ``-sum_k p_k log p_k``, ``[batch]``."""
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

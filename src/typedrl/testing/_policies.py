"""Tiny policies implementing the policy protocols, for tests and examples."""

import math
from typing import Any, final

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._validation import describe, positive_int
from typedrl.errors import ConfigError
from typedrl.types import BatchAction, EnvScalar, Obs

__all__ = ["ConstantPolicy", "LinearActorCritic", "LinearDifferentiablePolicy", "TinyActorCritic"]


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


@final
class TinyActorCritic(nn.Module):
    """A small user-style :class:`~typedrl.protocols.ActorCritic`, built from the env's spaces.

    The shape of an actor-critic you write yourself: one hidden layer shared
    by a policy head and a value head over ``obs["obs"]`` (a ``Box``
    observation), a categorical head for a ``Discrete`` action space and a
    diagonal Gaussian (state-independent log-std) for a ``Box`` one. It
    implements only the protocol (``act``, ``evaluate``, ``value``): no
    tensor fast path, no normaliser, no export form of its own, so it takes
    every generic path of the trainers, ``typedrl evaluate`` and ``export``.
    Its constructor is a policy factory
    (``PolicyFactory("typedrl.testing:TinyActorCritic", kwargs={"hidden": 32})``).

    Args:
        observation_space: The env's single observation space, a ``Box``.
        action_space: ``Discrete`` or ``Box``.
        hidden: Width of the hidden layer.

    Example:
        >>> import gymnasium as gym
        >>> from tensordict import TensorDict
        >>> policy = TinyActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
        >>> out = policy.act(TensorDict({"obs": torch.zeros(3, 4)}, batch_size=[3]))
        >>> sorted(out.keys()), out["action"].dtype
        (['action', 'entropy', 'log_prob', 'value'], torch.int64)
    """

    def __init__(
        self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, hidden: int = 32
    ) -> None:
        super().__init__()
        positive_int("TinyActorCritic", "hidden", hidden)
        if not isinstance(observation_space, gym.spaces.Box):
            raise ConfigError(
                f"TinyActorCritic reads a Box observation, got {describe(observation_space)}"
            )
        obs_dim = math.prod(observation_space.shape)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.action_shape: tuple[int, ...] = ()
        if isinstance(action_space, gym.spaces.Discrete):
            outputs = int(action_space.n)
        elif isinstance(action_space, gym.spaces.Box):
            self.action_shape = tuple(action_space.shape)
            outputs = math.prod(self.action_shape)
        else:
            raise ConfigError(
                f"TinyActorCritic acts in Discrete or Box spaces, got {describe(action_space)}"
            )
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh())
        self.policy_head = nn.Linear(hidden, outputs)
        self.value_head = nn.Linear(hidden, 1)
        # Every parameter takes part in evaluate (DDP averages the gradients of all of them).
        self.log_std: Tensor
        if self.discrete:
            self.register_buffer("log_std", torch.zeros(0))
        else:
            self.log_std = nn.Parameter(torch.zeros(outputs))

    def _distribution(self, obs: Obs) -> tuple[torch.distributions.Distribution, Tensor]:
        features = obs["obs"]
        # Observations of any dtype meet the network's (float64 under 64-true precision).
        dtype = self.value_head.weight.dtype
        hidden: Tensor = self.body(features.reshape(features.shape[0], -1).to(dtype))
        out: Tensor = self.policy_head(hidden)
        value: Tensor = self.value_head(hidden).squeeze(-1)
        # No argument validation: its data-dependent checks would stop torch.export.
        if self.discrete:
            return torch.distributions.Categorical(logits=out, validate_args=False), value
        normal = torch.distributions.Normal(out, self.log_std.exp(), validate_args=False)
        return torch.distributions.Independent(normal, 1, validate_args=False), value

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Sample (or take the mode of) the policy; also return log-prob, value, entropy."""
        dist, value = self._distribution(obs)
        flat = dist.mode if deterministic else dist.sample()
        action = flat if self.discrete else flat.reshape(flat.shape[0], *self.action_shape)
        return TensorDict(
            {
                "action": action,
                "log_prob": dist.log_prob(flat),
                "value": value,
                "entropy": dist.entropy(),
            },
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def evaluate(self, obs: Obs, action: BatchAction) -> Obs:
        """Log-probability, entropy and value of given actions, with gradients."""
        dist, value = self._distribution(obs)
        flat = action if self.discrete else action.reshape(action.shape[0], -1)
        return TensorDict(
            {"log_prob": dist.log_prob(flat), "entropy": dist.entropy(), "value": value},
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def value(self, obs: Obs) -> EnvScalar:
        """State value ``V(obs)``."""
        return self._distribution(obs)[1]

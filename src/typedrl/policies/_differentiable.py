"""The MLP policy of the analytic-policy-gradient trainers (APG, SHAC)."""

import math
from collections.abc import Sequence
from typing import Any, cast, final

import gymnasium as gym
import numpy as np
import torch
from jaxtyping import Bool
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl import _validation
from typedrl._validation import describe
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError, SpecError
from typedrl.normalization import RunningMeanStd
from typedrl.policies._distributions import DiagonalGaussian
from typedrl.policies._encoders import default_keys, flat_size
from typedrl.policies._flat_actor import FlatActor
from typedrl.policies._mlp import Activation, build_mlp
from typedrl.types import Obs, ObsMask, ObsVector

__all__ = ["DifferentiableMLPPolicy"]

_OWNER = "DifferentiableMLPPolicy"
_LOG_2 = math.log(2.0)


def _log_one_minus_tanh_squared(pre: Tensor) -> Tensor:
    """``log(1 - tanh(u)^2)``, finite for every finite ``u``."""
    # 1 - tanh(u)^2 = 4 / (e^u + e^-u)^2, so its log is 2 * (log 2 - u - softplus(-2u)).
    return 2.0 * (_LOG_2 - pre - nn.functional.softplus(-2.0 * pre))


def _as_float(value: Tensor) -> Tensor:
    """Floating-point observations as they are; integer or bool ones as float32."""
    return value if value.is_floating_point() else value.float()


@final
class DifferentiableMLPPolicy(nn.Module):
    """A Gaussian MLP policy whose actions keep the autograd graph to its parameters.

    Made for trainers that backpropagate through a differentiable env (APG,
    SHAC): :meth:`act` samples with the reparameterisation trick, ``u = mean +
    std * eps`` with ``eps ~ N(0, I)`` drawn from torch's global generator (so a
    seeded run repeats), and nothing on the way from the parameters (or the
    observation) to ``"action"`` is detached. The mean comes from an MLP over the
    flat observation features; the log standard deviation is state-independent,
    a learned parameter or a fixed buffer.

    With ``squash=True`` the action is ``low + (tanh(u) + 1) / 2 * (high - low)``
    (computed with :func:`torch.lerp`, so rounding never leaves the bounds):
    always inside the Box, and the bounds never cut a gradient, as a clamp
    would (Brax's APG and SHAC squash the same way). With ``squash=False`` the
    action is ``u`` itself, unbounded; clip it in the trainer or env if needed.

    :meth:`act` returns a TensorDict with ``batch_size == [batch]`` holding:

    - ``"action"``: ``[batch, *action_shape]``, with its graph.
    - ``"log_prob"``: ``[batch]``, the log-density of the returned action. When
      squashed it includes the change of variables, ``log N(u) - sum log|da/du|``
      with ``log|da/du| = log((high - low) / 2) + log(1 - tanh(u)^2)``, the latter
      computed as ``2 * (log 2 - u - softplus(-2u))`` so it stays finite when
      ``tanh`` saturates.
    - ``"entropy"``: ``[batch]``, the entropy of the *pre-squash* Gaussian,
      ``sum(1/2 + log sqrt(2 pi) + log_std)``. The squashed distribution's
      entropy has no closed form; this one depends on ``log_std`` alone, so an
      entropy bonus on it widens the exploration noise.

    Observations: the policy reads the keys ``obs_keys`` of the observation
    TensorDict, flattens each to ``[batch, -1]`` and concatenates them in order
    (``obs_dim`` features in all). With ``normalize_observations`` each key has
    a :class:`~typedrl.normalization.RunningMeanStd` in ``obs_normalizers``,
    inside the module, so a saved or exported policy normalises as it was
    trained. Normalising is differentiable with respect to the observation (up
    to the ``observation_clip`` clamp); the statistics are buffers, never get
    gradients, and change only through :meth:`update_normalizers`. Features
    whose ``observation_normalize_mask`` entry is ``False`` (sines, cosines,
    one-hot codes) pass through unnormalised.

    The policy never changes its own train/eval mode (nothing in it depends on
    the mode).

    Implements :class:`~typedrl.protocols.DifferentiablePolicy`, with
    :class:`~typedrl.protocols.SupportsNormalizerUpdate` and
    :class:`~typedrl.protocols.SupportsDeterministicActor`.

    Args:
        observation_space: The env's single observation space (``Box`` stored
            under ``"obs"``, or a ``Dict`` of ``Box`` entries).
        action_space: The env's single action space; ``Box`` only.
        hidden: Hidden layer widths of the MLP.
        activation: Hidden activation.
        layer_norm: Put a :class:`~torch.nn.LayerNorm` after each hidden
            ``Linear`` and before its activation (``Linear -> LayerNorm ->
            activation``; SHAC's reference code, DiffRL, puts it after the
            activation).
        squash: Map the Gaussian sample into the Box bounds with ``tanh``
            (the bounds must then be finite with ``high > low``).
        log_std_init: Initial log standard deviation of every action dimension.
        learn_log_std: Whether the log standard deviation is a learnable
            parameter (else a fixed buffer, saved in the state dict).
        normalize_observations: Normalise the observation features with
            running statistics held in the module.
        observation_normalize_mask: ``torch.bool`` ``[obs_dim]`` over the
            concatenated features (or a list of ``obs_dim`` bools, as a
            :class:`~typedrl.policies.PolicyFactory` records it); ``False``
            features are never normalised.
            ``None`` normalises every feature. Used only with
            ``normalize_observations``; taken from the constructor, not from
            the state dict.
        observation_clip: Clamp normalised features to ``[-clip, clip]``;
            ``None`` disables.
        obs_keys: Observation keys to read; default ``"obs"``, else
            ``"policy"``, else every key of the ``Dict`` space.

    Raises:
        ConfigError: On a non-Box action space, infinite or empty bounds with
            ``squash``, an observation key that is not a Box, or an invalid option.

    Example:
        >>> import gymnasium as gym, torch
        >>> from tensordict import TensorDict
        >>> policy = DifferentiableMLPPolicy(
        ...     gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(-2.0, 2.0, (2,)), hidden=(16,)
        ... )
        >>> out = policy.act(TensorDict({"obs": torch.randn(3, 4)}, batch_size=[3]))
        >>> out["action"].shape, out["log_prob"].shape, out["entropy"].shape
        (torch.Size([3, 2]), torch.Size([3]), torch.Size([3]))
        >>> bool(out["action"].abs().max() <= 2.0), out["action"].requires_grad
        (True, True)
        >>> out["action"].sum().backward()
        >>> policy.log_std.grad is not None
        True
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: Sequence[int] = (64, 64),
        activation: Activation = "elu",
        layer_norm: bool = False,
        squash: bool = True,
        log_std_init: float = -1.0,
        learn_log_std: bool = True,
        normalize_observations: bool = False,
        observation_normalize_mask: ObsMask | Sequence[bool] | None = None,
        observation_clip: float | None = 10.0,
        obs_keys: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.squash = squash
        log_std_value = _validation.finite_float(_OWNER, "log_std_init", log_std_init)
        if observation_clip is not None:
            _validation.positive_float(_OWNER, "observation_clip", observation_clip)
        self.obs_keys = self._validate_keys(observation_space, obs_keys)
        spaces = (
            dict(observation_space.spaces)
            if isinstance(observation_space, gym.spaces.Dict)
            else {"obs": observation_space}
        )
        obs_dim = flat_size(observation_space, self.obs_keys, _OWNER)
        # flat_size checked that every key is a Box, whose shape is a tuple.
        shapes = {key: tuple(spaces[key].shape or ()) for key in self.obs_keys}
        self._key_widths = {key: math.prod(shape) for key, shape in shapes.items()}
        if not isinstance(action_space, gym.spaces.Box):
            raise ConfigError(
                f"{_OWNER} supports Box action spaces only, got {describe(action_space)}"
            )
        self.action_shape: tuple[int, ...] = tuple(action_space.shape)
        act_dim = math.prod(self.action_shape)
        low, high = self._validate_bounds(action_space)
        mask = self._validate_mask(observation_normalize_mask, obs_dim)

        self.obs_normalizers: nn.ModuleDict | None = None
        if normalize_observations:
            self.obs_normalizers = nn.ModuleDict(
                {key: RunningMeanStd(shape, clip=observation_clip) for key, shape in shapes.items()}
            )
        # Whether some features bypass the normaliser (decided once, not per forward).
        self._partial_mask = mask is not None and not bool(mask.all())
        self.observation_normalize_mask: Tensor
        self.register_buffer(
            "observation_normalize_mask",
            torch.ones(obs_dim, dtype=torch.bool) if mask is None else mask,
            persistent=False,
        )
        self.mean_net = build_mlp(
            obs_dim,
            hidden,
            act_dim,
            activation=activation,
            output_gain=0.01,
            layer_norm=layer_norm,
        )
        log_std = torch.full((act_dim,), log_std_value)
        self.log_std: Tensor
        if learn_log_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)
        # The bounds follow the module's device and dtype but come from the action
        # space, not from the state dict.
        self.action_low: Tensor
        self.action_high: Tensor
        self.register_buffer("action_low", low, persistent=False)
        self.register_buffer("action_high", high, persistent=False)

    # ------------------------------------------------------------------ validation

    @staticmethod
    def _validate_keys(space: gym.Space[Any], obs_keys: Sequence[str] | None) -> tuple[str, ...]:
        if obs_keys is None:
            return default_keys(space, ("obs", "policy"))
        if isinstance(obs_keys, str):  # a str is a Sequence[str] of its characters
            raise ConfigError(
                f"{_OWNER}.obs_keys must be a sequence of str such as ['obs'], "
                f"got {describe(obs_keys)}"
            )
        keys = tuple(obs_keys)
        if not keys or len(set(keys)) < len(keys):
            raise ConfigError(
                f"{_OWNER}.obs_keys must be distinct str keys, at least one, got {list(keys)}"
            )
        return keys

    def _validate_bounds(self, space: gym.spaces.Box) -> tuple[Tensor, Tensor]:
        dtype = torch.get_default_dtype()
        low = torch.tensor(np.asarray(space.low, dtype=np.float64).reshape(-1), dtype=dtype)
        high = torch.tensor(np.asarray(space.high, dtype=np.float64).reshape(-1), dtype=dtype)
        # Checked in the dtype the bounds are used in, where a tiny width may round to 0.
        if self.squash and not bool(torch.isfinite(high - low).all() and (high > low).all()):
            raise ConfigError(
                f"{_OWNER} with squash=True needs finite action bounds with high > low "
                f"(and high - low finite in {dtype}), got low={low.tolist()}, "
                f"high={high.tolist()}; pass squash=False for an unbounded action"
            )
        return low, high

    @staticmethod
    def _validate_mask(mask: ObsMask | Sequence[bool] | None, obs_dim: int) -> Tensor | None:
        if mask is None:
            return None
        if not isinstance(mask, Tensor):
            flags = list(mask)
            if not all(type(flag) is bool for flag in flags):
                raise ConfigError(
                    f"{_OWNER}.observation_normalize_mask must be a torch.bool tensor or a "
                    f"list of bools, got {describe(mask)}"
                )
            mask = torch.tensor(flags, dtype=torch.bool)
        if mask.dtype != torch.bool or mask.shape != (obs_dim,):
            raise ConfigError(
                f"{_OWNER}.observation_normalize_mask must be a torch.bool tensor of shape "
                f"[{obs_dim}] (one flag per observation feature), got {describe(mask)}"
            )
        return mask.detach().to("cpu", copy=True)

    # ------------------------------------------------------------------ features

    @property
    def reparameterized(self) -> bool:
        """Always ``True``: :meth:`act` keeps the graph from the parameters to ``"action"``."""
        return True

    @property
    def _dtype(self) -> torch.dtype:
        first: Tensor = next(iter(self.mean_net.parameters()))
        return first.dtype

    def _read(self, obs: Obs, key: str) -> Tensor:
        if key not in obs.keys():  # noqa: SIM118 - TensorDict
            raise SpecError(f"{_OWNER}: observation lacks key {key!r}; it has {sorted(obs.keys())}")
        value = obs[key]
        if not isinstance(value, Tensor):
            raise SpecError(
                f"{_OWNER}: observation {key!r} must be a tensor, got {describe(value)}"
            )
        return value

    @staticmethod
    def _normalizer(normalizers: nn.ModuleDict, key: str) -> RunningMeanStd:
        # __init__ puts a RunningMeanStd under every key.
        return cast("RunningMeanStd", normalizers[key])

    def features(self, obs: Obs) -> ObsVector:
        """The MLP's input: flat, concatenated and (if configured) normalised features.

        Differentiable with respect to the observation. Useful to a critic that
        should see exactly what the policy sees.

        Args:
            obs: Observation TensorDict with ``batch_size == [batch]``.

        Returns:
            ``[batch, obs_dim]`` in the module's dtype.

        Raises:
            SpecError: If ``obs`` lacks a key or a key has the wrong width.
        """
        if len(obs.batch_size) != 1:
            raise SpecError(
                f"{_OWNER}: observations must have batch_size [batch], got {list(obs.batch_size)}"
            )
        batch = obs.batch_size[0]
        normalizers = self.obs_normalizers
        raw: list[Tensor] = []
        normalized: list[Tensor] = []
        for key in self.obs_keys:
            value = _as_float(self._read(obs, key))
            flat = value.reshape(batch, -1)
            if flat.shape[1] != self._key_widths[key]:
                raise SpecError(
                    f"{_OWNER}: observation {key!r} has shape {list(value.shape)}, "
                    f"expected {self._key_widths[key]} features per row"
                )
            raw.append(flat)
            if normalizers is not None:
                value = self._normalizer(normalizers, key).normalize(value)
                normalized.append(value.reshape(batch, -1))
        parts = normalized or raw
        features = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        if normalized and self._partial_mask:
            plain = raw[0] if len(raw) == 1 else torch.cat(raw, dim=-1)
            # Unmasked features pass through unnormalised; both branches keep their graph.
            features = torch.where(self.observation_normalize_mask, features, plain)
        # Observations of any dtype meet the network's dtype.
        return features.to(self._dtype)

    def update_normalizers(
        self, obs: Obs, *, dist: Distributed, mask: Bool[Tensor, " batch"] | None = None
    ) -> None:
        """Merge a batch of observations into the running statistics (all ranks must call it).

        Does nothing (and runs no collective) without ``normalize_observations``.

        Args:
            obs: Observations with ``batch_size == [batch]``; read without gradient.
            dist: The ranks whose statistics are pooled (identical on every rank
                afterwards).
            mask: ``[batch]``; rows where it is ``False`` (dead or ghost rows) are
                left out.

        Raises:
            SpecError: If ``obs`` lacks a key, or on a wrong shape or mask.
        """
        normalizers = self.obs_normalizers
        if normalizers is None:
            return
        for key in self.obs_keys:
            value = _as_float(self._read(obs, key)).detach()
            self._normalizer(normalizers, key).update(value, dist=dist, mask=mask)

    # ------------------------------------------------------------------ acting

    def _squash(self, pre: Tensor) -> Tensor:
        """``low + (tanh(u) + 1) / 2 * (high - low)``, never outside ``[low, high]``."""
        weight = (torch.tanh(pre) + 1.0) * 0.5
        return torch.lerp(self.action_low.to(pre.dtype), self.action_high.to(pre.dtype), weight)

    def _squash_log_det(self, pre: Tensor) -> Tensor:
        """``sum log|da/du|`` of the squashing map, ``[batch]``."""
        # da/du = (high - low) / 2 * (1 - tanh(u)^2), per dimension.
        log_half_width = torch.log(self.action_high - self.action_low).to(pre.dtype) - _LOG_2
        return (log_half_width + _log_one_minus_tanh_squared(pre)).sum(-1)

    def deterministic_actor(self, observation_space: gym.Space[Any]) -> FlatActor:
        """The deterministic (squashed) mean from flat ``obs_keys`` features (export).

        The observation normalisers are baked in, with the normalise mask.
        """
        return FlatActor(
            observation_space=observation_space,
            keys=self.obs_keys,
            net=self.mean_net,
            action_shape=self.action_shape,
            normalizers=self.obs_normalizers,
            normalize_mask=self.observation_normalize_mask,
            squash=self.squash,
            action_low=self.action_low,
            action_high=self.action_high,
        )

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Sample an action with the reparameterisation trick (or take the mean).

        Args:
            obs: Observation TensorDict with ``batch_size == [batch]``.
            deterministic: Return the (squashed) mean instead of a sample.

        Returns:
            A TensorDict with ``"action"`` ``[batch, *action_shape]`` (with its
            graph), ``"log_prob"`` and ``"entropy"`` ``[batch]``; see the class
            docstring for their definitions.

        Raises:
            SpecError: If ``obs`` lacks a key or a key has the wrong width.
        """
        mean: Tensor = self.mean_net(self.features(obs))
        dist = DiagonalGaussian(mean, self.log_std.to(mean.dtype))
        pre = dist.mode() if deterministic else dist.sample()
        log_prob = dist.log_prob(pre)
        if self.squash:
            action = self._squash(pre)
            log_prob = log_prob - self._squash_log_det(pre)
        else:
            action = pre
        return TensorDict(
            {
                "action": action.reshape(action.shape[0], *self.action_shape),
                "log_prob": log_prob,
                "entropy": dist.entropy(),
            },
            batch_size=obs.batch_size,
            device=obs.device,
        )

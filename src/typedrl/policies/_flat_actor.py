"""The deterministic actor of the MLP policies as a flat-tensor module (their export form)."""

import copy
import math
from typing import Any, cast, final

import gymnasium as gym
import torch
from jaxtyping import Float
from torch import Tensor, nn

from typedrl import _validation
from typedrl.errors import ConfigError
from typedrl.normalization import RunningMeanStd
from typedrl.policies._encoders import DiscreteOneHot, ObservationEncoder, key_spaces

__all__ = ["FlatActor"]


def _normalization_stats(
    normalizers: nn.ModuleDict | None, keys: tuple[str, ...], widths: dict[str, int]
) -> tuple[Tensor, Tensor, Tensor, float | None]:
    """The layout's float64 mean, ``rsqrt(var + epsilon)``, normalised columns and clip.

    A key without a normaliser (an index or 0/1 key) has mean 0, scale 1 and is left out of
    the mask.
    """
    means: list[Tensor] = []
    scales: list[Tensor] = []
    masks: list[Tensor] = []
    clips: set[float | None] = set()
    for key in keys:
        width = widths[key]
        if normalizers is None or key not in normalizers:
            means.append(torch.zeros(width, dtype=torch.float64))
            scales.append(torch.ones(width, dtype=torch.float64))
            masks.append(torch.zeros(width, dtype=torch.bool))
            continue
        # The policies put a RunningMeanStd under every Box key.
        normalizer = cast("RunningMeanStd", normalizers[key])
        # (x - mean) * rsqrt(var + epsilon), as RunningMeanStd.normalize computes it.
        variance = normalizer.var.detach().to(torch.float64)
        means.append(normalizer.mean.detach().to(torch.float64).reshape(-1))
        scales.append(torch.rsqrt(variance + normalizer.epsilon).reshape(-1))
        masks.append(torch.ones(width, dtype=torch.bool))
        clips.add(normalizer.clip)
    if len(clips) > 1:
        raise ConfigError(f"FlatActor: the observation keys are clipped differently: {clips}")
    return torch.cat(means), torch.cat(scales), torch.cat(masks), clips.pop() if clips else None


@final
class FlatActor(nn.Module):
    """An MLP policy's deterministic action, from a flat observation tensor.

    Observation normalisation is baked in (the saved running statistics,
    clamped as in training, features outside ``normalize_mask`` passed
    through); a Gaussian head returns its mean (squashed into the bounds when
    ``squash``), a categorical one the index of its most likely action. The
    module holds copies of what it is given, and its forward is made of
    tensor operations only (no TensorDict, no Python branches on values), so
    it traces and exports with a dynamic batch size.

    Built by :meth:`MLPActorCritic.deterministic_actor
    <typedrl.policies.MLPActorCritic.deterministic_actor>` and
    :meth:`DifferentiableMLPPolicy.deterministic_actor
    <typedrl.policies.DifferentiableMLPPolicy.deterministic_actor>`.

    Its input is the flat layout of the actor's keys (an index observation is
    one column, an image its bytes in the space's order, as floats), encoded
    as the policy encodes it (:class:`~typedrl.policies.DiscreteOneHot`, or
    the policy's :class:`~typedrl.policies.ObservationEncoder` with its image
    encoders and their scaling).

    Raises:
        ConfigError: An observation key is of a space a network cannot read,
            or the keys' normalisers clip differently.
    """

    def __init__(
        self,
        *,
        observation_space: gym.Space[Any],
        keys: tuple[str, ...],
        net: nn.Module,
        action_shape: tuple[int, ...],
        normalizers: nn.ModuleDict | None = None,
        normalize_mask: Tensor | None = None,
        discrete: bool = False,
        action_start: int = 0,
        squash: bool = False,
        action_low: Tensor | None = None,
        action_high: Tensor | None = None,
        encoding: ObservationEncoder | None = None,
    ) -> None:
        super().__init__()
        self.net = copy.deepcopy(net)
        self.encoding: ObservationEncoder | DiscreteOneHot = (
            DiscreteOneHot(observation_space, keys, "FlatActor")
            if encoding is None
            else copy.deepcopy(encoding)
        )
        self.obs_dim = self.encoding.layout_width
        self.action_shape = action_shape
        self.discrete = discrete
        self.action_start = action_start
        self.squash = squash
        self.net_dtype = next(iter(self.net.parameters())).dtype
        spaces = key_spaces(observation_space)
        widths = {key: math.prod(spaces[key].shape or ()) for key in keys}
        mean, scale, normalized, self.clip = _normalization_stats(normalizers, keys, widths)
        self.normalizes = normalizers is not None and bool(normalized.any())
        self.obs_mean: Tensor
        self.obs_scale: Tensor
        self.register_buffer("obs_mean", mean)
        self.register_buffer("obs_scale", scale)
        mask = None if normalize_mask is None else normalize_mask.detach().clone()
        if self.normalizes and not bool(normalized.all()):
            mask = normalized if mask is None else mask & normalized
        # Features whose mask entry is False (sines, one-hot codes) bypass the normaliser.
        self.partial_mask = mask is not None and not bool(mask.all())
        self.normalize_mask: Tensor
        self.register_buffer(
            "normalize_mask",
            mask if mask is not None else torch.ones(self.obs_dim, dtype=torch.bool),
        )
        self.action_low: Tensor
        self.action_high: Tensor
        self.register_buffer(
            "action_low", torch.zeros(0) if action_low is None else action_low.detach().clone()
        )
        self.register_buffer(
            "action_high", torch.zeros(0) if action_high is None else action_high.detach().clone()
        )
        self.eval()

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, obs: Float[Tensor, "batch obs_dim"]) -> Tensor:
        """The action for each row of ``obs`` (``[batch, obs_dim]``, float32 or float64).

        Returns:
            ``[batch, *action_shape]`` actions in the network's dtype for a
            ``Box`` action space; int64 ``[batch]`` indices (offset by the
            space's ``start``) for ``Discrete``.
        """
        features = obs
        if self.normalizes:
            scaled = (obs.to(torch.float64) - self.obs_mean) * self.obs_scale
            if self.clip is not None:
                scaled = scaled.clamp(-self.clip, self.clip)
            normalized = scaled.to(obs.dtype)
            features = (
                torch.where(self.normalize_mask, normalized, obs)
                if self.partial_mask
                else normalized
            )
        out: Tensor = self.net(self.encoding(features.to(self.net_dtype)))
        if self.discrete:
            index = out.argmax(-1)
            return index + self.action_start if self.action_start else index
        if self.squash:
            weight = (torch.tanh(out) + 1.0) * 0.5
            out = torch.lerp(self.action_low.to(out.dtype), self.action_high.to(out.dtype), weight)
        return out.reshape((-1, *self.action_shape))

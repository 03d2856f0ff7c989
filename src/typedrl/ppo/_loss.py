"""The PPO loss of a minibatch: what ``PPOConfig.compile`` hands to :func:`torch.compile`."""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs._spaces import new_tensordict
from typedrl.metrics import (
    LOSS_ENTROPY,
    LOSS_POLICY,
    LOSS_TOTAL,
    LOSS_VALUE,
    TRAIN_APPROX_KL,
    TRAIN_CLIP_FRACTION,
)
from typedrl.ppo._config import PPOConfig

__all__ = ["LOSS_STATISTICS", "EpochData", "Evaluate", "masked_mean", "ppo_loss"]

LOSS_STATISTICS = (
    LOSS_POLICY,
    LOSS_VALUE,
    LOSS_ENTROPY,
    LOSS_TOTAL,
    TRAIN_APPROX_KL,
    TRAIN_CLIP_FRACTION,
)
"""The names of the statistics :func:`ppo_loss` returns, in order."""

Evaluate = Callable[[TensorDict, Tensor], tuple[Tensor, Tensor, Tensor]]
"""``(obs, action) -> (log_prob, entropy, value)`` of the current policy, with gradients."""


@dataclass(frozen=True, slots=True)
class EpochData:
    """One epoch's flattened samples, as plain tensors plus the observation TensorDict."""

    obs: TensorDict
    action: Tensor
    log_prob: Tensor
    value: Tensor
    valid: Tensor | None
    """``None`` when every sample of the epoch is valid (the loss then takes plain means)."""
    advantage: Tensor
    returns: Tensor

    def select(self, indices: Tensor) -> "EpochData":
        """The samples at ``indices`` (one ``index_select`` per field).

        ``index_select`` gathers rows three to four times faster than advanced
        indexing (``x[indices]``) on a CPU, with the same result. ``indices`` may
        live on the CPU (the sampler's generator does) whatever the data's device.
        """
        indices = indices.to(self.advantage.device, non_blocking=True)
        return EpochData(
            obs=_take_rows(self.obs, indices),
            action=self.action.index_select(0, indices),
            log_prob=self.log_prob.index_select(0, indices),
            value=self.value.index_select(0, indices),
            valid=None if self.valid is None else self.valid.index_select(0, indices),
            advantage=self.advantage.index_select(0, indices),
            returns=self.returns.index_select(0, indices),
        )


def _take_rows(obs: TensorDict, indices: Tensor) -> TensorDict:
    """``obs[indices]`` for a 1-D batch of ``indices``: leaf by leaf where the keys are flat."""
    device = obs.device
    if device is None:
        # Leaves on several devices: TensorDict's own indexing.
        return obs[indices]
    rows: dict[str, Tensor] = {}
    for key, leaf in obs.items():
        if not isinstance(leaf, Tensor):
            # A nested TensorDict: TensorDict's own indexing.
            return obs[indices]
        rows[key] = leaf.index_select(0, indices)
    return new_tensordict(rows, torch.Size((indices.shape[0],)), device)


def ppo_loss(config: PPOConfig, batch: EpochData, evaluate: Evaluate) -> tuple[Tensor, Tensor]:
    """The PPO loss of a minibatch and its statistics, without side effects.

    Returns the loss and ``[policy loss, value loss, entropy, loss, approx KL,
    clip fraction]`` (:data:`LOSS_STATISTICS`). Pure, so that :func:`torch.compile`
    traces it in one graph (``PPOConfig.compile``).
    """
    valid, advantages, returns, old_value = (
        batch.valid,
        batch.advantage,
        batch.returns,
        batch.value,
    )
    # Means run over the valid samples; valid is None when all are (no masks needed).
    count = None if valid is None else valid.sum().clamp(min=1)
    new_log_prob, new_entropy, value = evaluate(batch.obs, batch.action)
    # log r = log pi(a|s) - log pi_old(a|s), zeroed on ghost samples with torch.where
    # (not a product), so neither their values nor their gradients can be non-finite.
    log_ratio = new_log_prob - batch.log_prob
    if valid is not None:
        log_ratio = torch.where(valid, log_ratio, 0.0)
    ratio = log_ratio.exp()
    if config.normalize_advantages:
        # A_hat = (A - mean(A)) / (std(A) + 1e-8), over the valid samples
        mean = _mean(advantages, valid, count)
        std = _mean((advantages - mean).square(), valid, count).sqrt()
        advantages = (advantages - mean) / (std + 1e-8)
    # Clipped surrogate: L_clip = E[min(r A, clip(r, 1 - eps, 1 + eps) A)]
    surrogate = ratio * advantages
    clipped = ratio.clamp(1.0 - config.clip_range, 1.0 + config.clip_range) * advantages
    policy_loss = -_mean(torch.minimum(surrogate, clipped), valid, count)
    # Value loss: (V - R)^2, optionally clipped around the old value V_old
    value_error = (value - returns).square()
    if config.clip_value_loss:
        clipped_value = old_value + (value - old_value).clamp(-config.clip_range, config.clip_range)
        value_error = torch.maximum(value_error, (clipped_value - returns).square())
    value_loss = 0.5 * _mean(value_error, valid, count)
    entropy = _mean(new_entropy, valid, count)
    loss = policy_loss + config.value_loss_coef * value_loss - config.entropy_coef * entropy
    with torch.no_grad():
        # Approximate KL(old || new) = E[(r - 1) - log r] (Schulman's k3 estimator)
        approx_kl = _mean((ratio - 1.0) - log_ratio, valid, count)
        clip_fraction = _mean((ratio - 1.0).abs() > config.clip_range, valid, count)
    stats = torch.stack((policy_loss, value_loss, entropy, loss, approx_kl, clip_fraction)).detach()
    return loss, stats


def _mean(x: Tensor, valid: Tensor | None, count: Tensor | None) -> Tensor:
    """Mean of ``x`` over the valid samples (``valid=None``: over all; no host sync)."""
    if valid is None or count is None:
        return x.mean(dtype=None if x.is_floating_point() else torch.float32)
    return _sum_where(x, valid) / count


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """``sum(x[mask]) / max(1, count(mask))`` for floating ``x``, without a host sync."""
    return _sum_where(x, mask) / mask.sum().to(x.dtype).clamp(min=1.0)


def _sum_where(x: Tensor, mask: Tensor) -> Tensor:
    # sum(x[mask]) without a host sync; torch.where, not a product, so that a
    # non-finite value in a masked (ghost) sample cannot leak into the result.
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum(
        dtype=torch.float32 if not x.is_floating_point() else None
    )

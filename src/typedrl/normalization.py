"""Running statistics for observation and reward normalisation, rank-synchronised.

- :class:`RunningMeanStd` tracks the exact mean and variance of a stream of
  batches and normalises with them.
- :class:`RewardNormalizer` scales rewards by the standard deviation of the
  discounted return, without centring them.

Every update takes a :class:`~typedrl.distributed.Distributed`: each rank
computes its batch statistics ``(count, mean, var)``, one all-gather exchanges
them, and every rank merges them in rank order. All ranks therefore end with
identical statistics, equal to those of all ranks' data pooled, with one
collective per update and no host synchronisation (unless ``check_finite``).
Pass :class:`~typedrl.distributed.SingleProcess` in a single process.

Statistics are float64 and counts int64, whatever the data's dtype.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast, final

import torch
from jaxtyping import Bool, Float
from torch import Tensor, nn
from torch.nn.modules.module import _IncompatibleKeys

from typedrl import _validation
from typedrl._validation import describe
from typedrl.distributed import Distributed, agree_on
from typedrl.errors import CheckpointError, NonFiniteError, SpecError

__all__ = ["RewardNormalizer", "RunningMeanStd"]

# The shape string reads as a product to ruff, hence the F821 waiver.
_Batch: TypeAlias = Float[Tensor, "batch *shape"]  # noqa: F821
_BatchMask: TypeAlias = Bool[Tensor, " batch"]
_AnyFloat: TypeAlias = Float[Tensor, "*dims"]
_Stats: TypeAlias = Float[Tensor, "*shape"]
_Count: TypeAlias = Float[Tensor, ""]
_Moments: TypeAlias = tuple[_Count, _Stats, _Stats]
_StepReward: TypeAlias = Float[Tensor, "num_steps num_envs"]
_StepDone: TypeAlias = Bool[Tensor, "num_steps num_envs"]

_COUNT, _MEAN, _VAR = "running_count", "running_mean", "running_var"


def _merge(a: _Moments, b: _Moments) -> _Moments:
    """Chan et al.'s parallel merge of two sets' (count, mean, population variance).

    Counts are float64 tensors; a set with count 0 contributes nothing and two
    empty sets stay empty (their statistics are kept from ``a``).
    """
    count_a, mean_a, var_a = a
    count_b, mean_b, var_b = b
    count = count_a + count_b
    safe = count.clamp(min=1.0)
    delta = mean_b - mean_a
    # mean = mean_a + delta * n_b / n
    mean = mean_a + delta * (count_b / safe)
    # M2 = M2_a + M2_b + delta^2 * n_a * n_b / n, and var = M2 / n
    m2 = var_a * count_a + var_b * count_b + delta.square() * (count_a * count_b / safe)
    var = m2 / safe
    empty = count == 0
    return count, torch.where(empty, mean_a, mean), torch.where(empty, var_a, var)


@final
class RunningMeanStd(nn.Module):
    """Mean and variance of a stream of batches; normalises with them.

    Each row of a batch ``[batch, *shape]`` is one sample. The statistics are
    float64 buffers (``running_count`` int64, ``running_mean`` and
    ``running_var`` float64 of ``shape``) that follow the module across devices
    but stay float64 when the module is cast to another dtype (``.half()``,
    Fabric's ``"bf16-true"``). The variance is the population variance
    (``ddof=0``). Before the first sample, mean is 0 and variance 1. The
    statistics are exact over every sample seen: merging is Chan et al.'s
    parallel algorithm, so updates in any split give the statistics of the
    concatenated data (up to float64 rounding).

    Normalisation computes ``(x - mean) / sqrt(var + epsilon)`` in float64,
    clamps it to ``[-clip, clip]`` when ``clip`` is set and returns ``x``'s
    dtype; it keeps the autograd graph of ``x``. :meth:`forward` normalises and
    never updates, so a setup forward neither changes the statistics nor runs
    a collective.

    The device is the module's (``device=`` or :meth:`~torch.nn.Module.to`);
    inputs must be on it. Inputs are not re-checked per call: jaxtyping checks
    their dtypes and shapes where runtime checks are on, torch refuses a
    device mismatch, and :meth:`update` refuses a batch of another feature shape.

    Freezing: while :attr:`frozen` is ``True``, :meth:`update` returns at once,
    without a collective. Every rank must freeze and unfreeze together.

    Args:
        shape: Feature shape of one sample (``()`` for scalars).
        epsilon: Added to the variance before the square root in
            :meth:`normalize` and :meth:`denormalize`.
        clip: Clamp normalised values to ``[-clip, clip]``; ``None`` disables.
        check_finite: Raise :class:`~typedrl.errors.NonFiniteError` when an
            input holds NaN or infinity. Costs a host synchronisation per call
            (the flag rides on the update's all-gather, so every rank raises
            together); off by default, when non-finite inputs poison the
            statistics.
        device: Device of the statistics.

    Raises:
        ConfigError: If an option is invalid.

    Example:
        >>> import torch
        >>> from typedrl.distributed import SingleProcess
        >>> rms = RunningMeanStd((1,), epsilon=0.0)
        >>> rms.update(torch.tensor([[1.0], [3.0]]), dist=SingleProcess())
        >>> rms.update(torch.tensor([[5.0]]), dist=SingleProcess())
        >>> rms.count.item(), rms.mean.tolist(), round(rms.var.item(), 4)
        (3, [3.0], 2.6667)
        >>> rms.normalize(torch.tensor([[3.0], [7.0]])).squeeze(-1).tolist()
        [0.0, 2.4494898319244385]
    """

    def __init__(
        self,
        shape: Sequence[int],
        *,
        epsilon: float = 1e-8,
        clip: float | None = None,
        check_finite: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        owner = "RunningMeanStd"
        for index, size in enumerate(shape):
            _validation.non_negative_int(owner, f"shape[{index}]", size)
        self.epsilon = _validation.non_negative_float(owner, "epsilon", epsilon)
        self.clip = None if clip is None else _validation.positive_float(owner, "clip", clip)
        self.check_finite = check_finite
        self._frozen = False
        # Whether the ranks have confirmed that they share this shape (once per process).
        self._shape_agreed = False
        self.register_buffer(_COUNT, torch.zeros((), dtype=torch.int64, device=device))
        self.register_buffer(_MEAN, torch.zeros(tuple(shape), dtype=torch.float64, device=device))
        self.register_buffer(_VAR, torch.ones(tuple(shape), dtype=torch.float64, device=device))

    # ------------------------------------------------------------------ state

    def _tensor(self, name: str) -> Tensor:
        # Every buffer is registered at construction (a module attribute), never None.
        return cast("Tensor", getattr(self, name))

    @property
    def device(self) -> torch.device:
        """Device of the statistics."""
        return self._tensor(_COUNT).device

    @property
    def shape(self) -> tuple[int, ...]:
        """Feature shape of one sample."""
        return tuple(self._tensor(_MEAN).shape)

    @property
    def count(self) -> Tensor:
        """Number of samples seen (int64 scalar tensor)."""
        return self._tensor(_COUNT)

    @property
    def mean(self) -> _Stats:
        """Running mean (float64, ``shape``)."""
        return self._tensor(_MEAN)

    @property
    def var(self) -> _Stats:
        """Running population variance (float64, ``shape``)."""
        return self._tensor(_VAR)

    @property
    def std(self) -> _Stats:
        """Square root of :attr:`var` (without ``epsilon``)."""
        return self.var.sqrt()

    @property
    def frozen(self) -> bool:
        """While ``True``, :meth:`update` does nothing (identical on every rank)."""
        return self._frozen

    @frozen.setter
    def frozen(self, value: bool) -> None:
        self._frozen = bool(value)

    # ------------------------------------------------------------------ update

    def update(self, batch: _Batch, *, dist: Distributed, mask: _BatchMask | None = None) -> None:
        """Merge every rank's batch into the statistics (a collective: call on every rank).

        Args:
            batch: ``[batch, *shape]`` samples of this rank (gradients are not tracked).
            dist: The ranks to synchronise with.
            mask: ``[batch]`` bool; rows where it is ``False`` (ghost or dead
                transitions) are ignored, even if they hold NaN.

        Raises:
            SpecError: If ``batch`` is not ``[batch, *shape]``.
            NonFiniteError: With ``check_finite``, on every rank, if any rank's
                unmasked rows hold NaN or infinity; the statistics are unchanged.
            DistributedError: If ranks disagree on the feature shape (checked at
                the first update of each process).
        """
        if self._frozen:
            return
        shape = self.shape
        if tuple(batch.shape[1:]) != shape:
            raise SpecError(
                f"RunningMeanStd.update batch must have shape [batch, "
                f"{', '.join(map(str, shape))}], got {list(batch.shape)}"
            )
        data = batch.detach()
        if dist.world_size > 1 and not self._shape_agreed:
            agree_on("RunningMeanStd feature shape", shape, dist)
        self._shape_agreed = True
        rows = data.shape[0]
        flat = data.reshape(rows, math.prod(shape)).to(torch.float64)
        if mask is None:
            keep = torch.ones(rows, 1, dtype=torch.bool, device=flat.device)
        else:
            keep = mask.to(flat.device).reshape(rows, 1)
        # Masked rows are replaced, not multiplied, so that NaN in them cannot leak.
        values = torch.where(keep, flat, 0.0)
        count = keep.sum(dtype=torch.float64)
        safe = count.clamp(min=1.0)
        mean = values.sum(dim=0) / safe
        # Two-pass variance: mean of squared deviations of the kept rows.
        var = torch.where(keep, flat - mean, 0.0).square().sum(dim=0) / safe
        if self.check_finite:
            non_finite = (~torch.isfinite(values)).any().to(torch.float64)
        else:
            non_finite = torch.zeros((), dtype=torch.float64, device=flat.device)
        # One collective: [count, non_finite, mean..., var...] from every rank.
        packet = torch.cat([count.reshape(1), non_finite.reshape(1), mean, var])
        gathered = dist.all_gather(packet)
        if self.check_finite:
            bad = [rank for rank, flag in enumerate(gathered[:, 1].tolist()) if flag]
            if bad:
                raise NonFiniteError(
                    f"RunningMeanStd.update: the batch holds NaN or infinity on rank(s) {bad}; "
                    "the statistics were not changed"
                )
        self._merge_gathered(gathered, shape)

    @torch.no_grad()
    def _merge_gathered(self, gathered: Tensor, shape: tuple[int, ...]) -> None:
        numel = (gathered.shape[1] - 2) // 2
        counts = gathered[:, 0]
        means = gathered[:, 2 : 2 + numel]
        variances = gathered[:, 2 + numel :]
        # Pool the ranks' batches in rank order: identical arithmetic on every rank.
        pooled = (counts[0], means[0], variances[0])
        for rank in range(1, gathered.shape[0]):
            pooled = _merge(pooled, (counts[rank], means[rank], variances[rank]))
        running_count = self._tensor(_COUNT)
        old_count = running_count.to(torch.float64)
        old = (old_count, self.mean.reshape(-1), self.var.reshape(-1))
        _, new_mean, new_var = _merge(old, pooled)
        running_count.add_(pooled[0].round().to(torch.int64))
        self.mean.copy_(new_mean.reshape(shape))
        self.var.copy_(new_var.reshape(shape))

    # ------------------------------------------------------------------ normalise

    def normalize(self, x: _AnyFloat) -> _AnyFloat:
        """Return ``(x - mean) / sqrt(var + epsilon)``, clamped, in ``x``'s dtype.

        Args:
            x: ``[..., *shape]``, on the statistics' device.

        Raises:
            NonFiniteError: With ``check_finite``, if ``x`` holds NaN or infinity.
        """
        if self.check_finite and not bool(torch.isfinite(x).all()):
            raise NonFiniteError(
                f"RunningMeanStd.normalize input holds NaN or infinity: {_non_finite_summary(x)}"
            )
        mean, var = self._tensor(_MEAN), self._tensor(_VAR)
        out = (x.to(torch.float64) - mean) * torch.rsqrt(var + self.epsilon)
        if self.clip is not None:
            out = out.clamp(-self.clip, self.clip)
        return out.to(x.dtype)

    def denormalize(self, x: _AnyFloat) -> _AnyFloat:
        """Return ``x * sqrt(var + epsilon) + mean`` in ``x``'s dtype (clamping is not undone)."""
        out = x.to(torch.float64) * torch.sqrt(self.var + self.epsilon) + self.mean
        return out.to(x.dtype)

    def forward(self, x: _AnyFloat) -> _AnyFloat:
        """Same as :meth:`normalize`; never updates the statistics."""
        return self.normalize(x)

    def extra_repr(self) -> str:
        """Shape and options, for ``repr``."""
        return (
            f"shape={self.shape}, epsilon={self.epsilon}, clip={self.clip}, "
            f"check_finite={self.check_finite}"
        )

    # ------------------------------------------------------------------ module hooks

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Load a ``state_dict()``; any problem raises :class:`~typedrl.errors.CheckpointError`.

        ``assign`` is accepted for compatibility; the statistics are always copied.

        Raises:
            CheckpointError: On missing (with ``strict``), unknown (with
                ``strict``) or malformed entries; nothing is changed then.
        """
        if strict:
            # Key problems first: torch would report them only after copying.
            names = {_COUNT, _MEAN, _VAR}
            unknown = sorted(set(state_dict) - names)
            missing = sorted(names - set(state_dict))
            if unknown or missing:
                raise CheckpointError(
                    f"normaliser state has unknown keys {unknown} and misses keys {missing}; "
                    f"expected {_COUNT!r}, {_MEAN!r} and {_VAR!r}"
                )
        result: _IncompatibleKeys = super().load_state_dict(
            state_dict, strict=strict, assign=assign
        )
        return result

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> "RunningMeanStd":
        """Follow device moves but keep the float64/int64 statistics' dtypes."""

        def keep_dtype(tensor: Tensor) -> Tensor:
            result = fn(tensor)
            if result.dtype == tensor.dtype:
                return result
            return tensor.to(device=result.device)

        # Module._apply is untyped in torch.
        return super()._apply(keep_dtype, recurse)  # type: ignore[no-untyped-call,no-any-return]

    def _load_from_state_dict(  # noqa: PLR0917 - torch's hook signature
        self,
        state_dict: Mapping[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Validate the whole state first, then copy it.

        torch always calls this hook with ``strict=True`` and decides itself
        whether missing or unexpected keys are errors; malformed entries raise
        :class:`~typedrl.errors.CheckpointError` here, before anything changes.
        """
        names = (_COUNT, _MEAN, _VAR)
        unexpected_keys.extend(
            key
            for key in state_dict
            if key.startswith(prefix)
            and "." not in key[len(prefix) :]
            and key[len(prefix) :] not in names
        )
        absent = [prefix + name for name in names if prefix + name not in state_dict]
        if absent:
            missing_keys.extend(absent)
            return
        count, mean, var = (state_dict[prefix + name] for name in names)
        mean, var = _validate_state(prefix, count, mean, var, self.shape)
        with torch.no_grad():
            self.mean.copy_(mean)
            self.var.copy_(var)
            self._tensor(_COUNT).copy_(count)


def _validate_state(
    prefix: str,
    count: object,
    mean: object,
    var: object,
    shape: tuple[int, ...],
) -> tuple[Tensor, Tensor]:
    """Check a loaded (count, mean, var); return (mean, var)."""
    where = f"normaliser state {prefix!r}"
    if (
        not isinstance(count, Tensor)
        or count.shape != ()
        or count.dtype.is_floating_point
        or count.dtype.is_complex
        or count.dtype == torch.bool
    ):
        raise CheckpointError(
            f"{where}: {_COUNT} must be an integer scalar tensor, got {describe(count)}"
        )
    if int(count) < 0:
        raise CheckpointError(f"{where}: {_COUNT} must be >= 0, got {int(count)}")
    for name, value in ((_MEAN, mean), (_VAR, var)):
        if not isinstance(value, Tensor) or not value.is_floating_point():
            raise CheckpointError(
                f"{where}: {name} must be a floating-point tensor, got {describe(value)}"
            )
        if tuple(value.shape) != shape:
            raise CheckpointError(
                f"{where}: {name} has shape {list(value.shape)}, expected {list(shape)} "
                "(the normaliser's feature shape)"
            )
        if not bool(torch.isfinite(value).all()):
            raise CheckpointError(f"{where}: {name} holds NaN or infinity")
    # The loop above proved both tensors.
    mean, var = cast("Tensor", mean), cast("Tensor", var)
    if bool((var < 0).any()):
        raise CheckpointError(f"{where}: {_VAR} has negative entries")
    return mean, var


def _non_finite_summary(x: Tensor) -> str:
    bad = ~torch.isfinite(x)
    return f"{int(bad.sum())} of {x.numel()} values, first at index {bad.nonzero()[0].tolist()}"


@final
class RewardNormalizer:
    """Scale rewards by the standard deviation of the discounted return.

    Rewards are divided by ``sqrt(var(G) + epsilon)``, where ``G`` is the
    discounted return each env has accumulated so far; they are not centred,
    so their sign (and the meaning of "no reward") survives. Per env and step:

    .. code-block:: text

        G_t = gamma * G_{t-1} + r_t       # statistics of G are updated with G_t
        G_t = 0      if terminated_t or truncated_t

    The running return restarts on termination *and* truncation: after either,
    the next reward belongs to a new episode. Rows where ``mask`` is ``False``
    (ghost transitions) leave their return untouched and add nothing.

    The statistics of ``G`` (a :class:`RunningMeanStd`) are synchronised over
    ranks at each :meth:`update`; the running returns belong to this rank's
    envs and are not. Keep the normaliser out of DDP-wrapped modules (DDP
    would broadcast rank 0's per-env state) and save its state per rank, like
    RNG states, for an exact resume.

    Args:
        gamma: Discount of the return, in ``[0, 1]``.
        epsilon: Added to the variance before the square root.
        clip: Clamp scaled rewards to ``[-clip, clip]``; ``None`` disables.
        check_finite: Raise :class:`~typedrl.errors.NonFiniteError` on NaN or
            infinite rewards (one host synchronisation per call).
        device: Device of the running returns and statistics.

    Raises:
        ConfigError: If an option is invalid.

    Example:
        >>> import torch
        >>> from typedrl.distributed import SingleProcess
        >>> norm = RewardNormalizer(gamma=0.5, epsilon=0.0)
        >>> reward = torch.tensor([[1.0, 2.0], [1.0, 2.0]])  # [num_steps, num_envs]
        >>> done = torch.tensor([[False, True], [False, False]])
        >>> norm.update(reward, done, torch.zeros_like(done), dist=SingleProcess())
        >>> norm.running_return.tolist()  # env 1 restarted after its first step
        [1.5, 2.0]
        >>> round(norm.return_stats.var.item(), 4)  # returns seen: 1, 2, 1.5, 2
        0.1719
    """

    def __init__(
        self,
        *,
        gamma: float,
        epsilon: float = 1e-8,
        clip: float | None = 10.0,
        check_finite: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        owner = "RewardNormalizer"
        self.gamma = _validation.unit_interval(owner, "gamma", gamma)
        self.clip = None if clip is None else _validation.positive_float(owner, "clip", clip)
        self._stats = RunningMeanStd((), epsilon=epsilon, check_finite=check_finite, device=device)
        self._returns: Tensor | None = None

    @property
    def return_stats(self) -> RunningMeanStd:
        """Statistics of the discounted return (scalar shape)."""
        return self._stats

    @property
    def running_return(self) -> Float[Tensor, " num_envs"]:
        """Discounted return accumulated by each env of this rank (float64)."""
        if self._returns is None:
            raise SpecError("RewardNormalizer has no running returns before its first update")
        return self._returns

    @property
    def scale(self) -> Float[Tensor, ""]:
        """The current divisor ``sqrt(var(G) + epsilon)`` (float64 scalar)."""
        return torch.sqrt(self._stats.var + self._stats.epsilon)

    def update(
        self,
        reward: _StepReward,
        terminated: _StepDone,
        truncated: _StepDone,
        *,
        dist: Distributed,
        mask: Bool[Tensor, "num_steps num_envs"] | None = None,
    ) -> None:
        """Advance the running returns over ``num_steps`` steps and merge their statistics.

        One collective for the whole block, whatever ``num_steps``; pass a
        single step as ``reward[None]``. Call it on every rank.

        Args:
            reward: ``[num_steps, num_envs]`` rewards in time order.
            terminated: ``[num_steps, num_envs]`` bool.
            truncated: ``[num_steps, num_envs]`` bool.
            dist: The ranks to synchronise the statistics with.
            mask: ``[num_steps, num_envs]`` bool; ``False`` marks ghost rows.

        Raises:
            SpecError: If ``num_envs`` differs from the running returns' (a
                restored state of another number of env rows).
            NonFiniteError: With ``check_finite``, on every rank, if a rank's
                rewards hold NaN or infinity; nothing is changed.
        """
        num_steps, num_envs = reward.shape
        returns = self._returns
        if returns is None:
            returns = torch.zeros(num_envs, dtype=torch.float64, device=reward.device)
        elif returns.shape != (num_envs,) or returns.device != reward.device:
            raise SpecError(
                f"RewardNormalizer.update got {num_envs} envs on {reward.device}, but the "
                f"running returns have {returns.shape[0]} on {returns.device}"
            )
        done = terminated | truncated
        keep = torch.ones_like(done) if mask is None else mask
        rewards = reward.detach().to(torch.float64)
        seen = []
        for step in range(num_steps):
            # G_t = gamma * G_{t-1} + r_t on real rows; ghost rows keep G.
            returns = torch.where(keep[step], self.gamma * returns + rewards[step], returns)
            seen.append(returns)
            # A new episode starts after termination or truncation.
            returns = torch.where(keep[step] & done[step], 0.0, returns)
        self._stats.update(torch.cat(seen), dist=dist, mask=keep.reshape(-1))
        self._returns = returns

    def normalize(self, reward: _AnyFloat) -> _AnyFloat:
        """Return ``reward / sqrt(var(G) + epsilon)``, clamped, in ``reward``'s dtype.

        Raises:
            NonFiniteError: With ``check_finite``, if ``reward`` holds NaN or infinity.
        """
        if self._stats.check_finite and not bool(torch.isfinite(reward).all()):
            raise NonFiniteError(
                f"RewardNormalizer.normalize reward holds NaN or infinity: "
                f"{_non_finite_summary(reward)}"
            )
        out = reward.to(torch.float64) / self.scale
        if self.clip is not None:
            out = out.clamp(-self.clip, self.clip)
        return out.to(reward.dtype)

    def denormalize(self, reward: _AnyFloat) -> _AnyFloat:
        """Return ``reward * sqrt(var(G) + epsilon)`` in ``reward``'s dtype (no un-clamping)."""
        return (reward.to(torch.float64) * self.scale).to(reward.dtype)

    def state_dict(self) -> dict[str, Any]:
        """Statistics (``return_stats.*``) and, once known, this rank's ``running_return``."""
        state: dict[str, Any] = {
            f"return_stats.{key}": value for key, value in self._stats.state_dict().items()
        }
        if self._returns is not None:
            state["running_return"] = self._returns.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore a :meth:`state_dict` exactly.

        Raises:
            CheckpointError: On a missing, unknown or malformed entry; nothing
                is changed then.
        """
        known = {"running_return"} | {f"return_stats.{name}" for name in (_COUNT, _MEAN, _VAR)}
        unknown = sorted(set(state_dict) - known)
        if unknown:
            raise CheckpointError(f"reward normaliser state has unknown keys {unknown}")
        returns = state_dict.get("running_return")
        if returns is not None and (
            not isinstance(returns, Tensor) or not returns.is_floating_point() or returns.ndim != 1
        ):
            raise CheckpointError(
                "reward normaliser state: running_return must be a float tensor of shape "
                f"[num_envs], got {describe(returns)}"
            )
        if returns is not None and not bool(torch.isfinite(returns).all()):
            raise CheckpointError("reward normaliser state: running_return holds NaN or infinity")
        if (
            returns is not None
            and self._returns is not None
            and returns.shape != self._returns.shape
        ):
            raise CheckpointError(
                f"reward normaliser state: running_return has shape {list(returns.shape)}, "
                f"expected {list(self._returns.shape)} (this rank's num_envs)"
            )
        stats = {
            key.removeprefix("return_stats."): value
            for key, value in state_dict.items()
            if key.startswith("return_stats.")
        }
        self._stats.load_state_dict(stats)
        device = self._stats.count.device
        self._returns = (
            None if returns is None else returns.to(dtype=torch.float64, device=device).clone()
        )

    def load_shared_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore the return statistics of a :meth:`state_dict` (the same on every rank).

        For a resume on another number of ranks: the running returns belong to
        the saved rank's env rows, which are reset, so they start again at zero.

        Raises:
            CheckpointError: As :meth:`load_state_dict`; nothing is changed then.
        """
        self.load_state_dict({k: v for k, v in state_dict.items() if k != "running_return"})

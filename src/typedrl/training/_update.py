"""The one update kernel every algorithm steps its optimizers through, and what an update returns.

An optimizer update of any algorithm (PPO's minibatch, APG's and SHAC's actor
update, SHAC's critic minibatch) is the same five steps:

1. pack this rank's gradients and the statistics that must be pooled into one
   flat tensor;
2. one all-reduce sums it over the ranks (skipped when the gradients are
   already averaged, as DDP does during PPO's backward);
3. the averaged gradient's norm and finiteness, identical on every rank, so
   every rank takes the same decision to apply or skip;
4. clipping to ``max_grad_norm``;
5. the clipped gradient written back to the parameters, and the optimizer's step.

:class:`GradientStep` holds steps 1-3 (:meth:`GradientStep.reduce`) and 4-5
(:meth:`GradientStep.apply`); the caller decides between them, from the
returned :class:`ReducedGradient`, whether to apply or :meth:`GradientStep.skip`.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, final

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from typedrl.distributed import Distributed
from typedrl.errors import ConfigError

__all__ = [
    "GradientStep",
    "ReducedGradient",
    "UpdateOutcome",
    "build_optimizer",
    "build_scheduler",
    "restart_schedule",
    "resync_schedule",
    "schedule_factor",
]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateOutcome:
    """What one update of an algorithm did: applied or skipped, and its metrics.

    The metrics are identical on every rank (the algorithm pools them in its
    update's all-reduce).
    """

    applied: bool
    """Whether the optimizer stepped (a skipped update changes no weight, moment or rate)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The update's metrics by name."""


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ReducedGradient:
    """The result of :meth:`GradientStep.reduce`: the averaged gradient and pooled sums."""

    flat: Tensor
    """Every parameter's averaged gradient, concatenated in parameter order."""
    pooled: Tensor
    """The pooled statistics, summed over the ranks (empty when none were given)."""
    norm: Tensor
    """``||flat||``, the global gradient norm before clipping (a 0-dim tensor)."""


@final
class GradientStep:
    """Packs, all-reduces, measures, clips and applies the gradient of a set of parameters.

    Args:
        parameters: The trainable parameters, in a fixed order (the same on every rank).
        optimizer: The optimizer that steps them.
        dist: The ranks to average over.
        max_grad_norm: Clip the averaged gradient to this global norm (``None``: no clipping).
        synchronised: The gradients are already averaged over the ranks (DDP's
            backward does it): :meth:`reduce` runs no collective.
        in_place: Leave the gradients where the backward put them (needs
            ``synchronised=True``; :meth:`reduce` then takes no pooled statistics,
            scale or average): :meth:`reduce` measures ``sqrt(sum_i ||g_i||^2)``
            over the parameters' gradients without packing them (``flat`` and
            ``pooled`` are empty) and :meth:`apply` clips them in place, which
            saves the packing copies per update (PPO's minibatches).

    Example:
        >>> from typedrl.distributed import SingleProcess
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        >>> kernel = GradientStep(
        ...     list(layer.parameters()), optimizer, dist=SingleProcess(), max_grad_norm=1.0
        ... )
        >>> layer(torch.ones(1, 2)).sum().backward()
        >>> reduced = kernel.reduce()
        >>> round(float(reduced.norm), 4)
        1.7321
        >>> kernel.apply(reduced)
    """

    def __init__(
        self,
        parameters: Sequence[Tensor],
        optimizer: Optimizer,
        *,
        dist: Distributed,
        max_grad_norm: float | None,
        synchronised: bool = False,
        in_place: bool = False,
    ) -> None:
        if in_place and not synchronised:
            raise ConfigError(
                "GradientStep(in_place=True) averages nothing across ranks: it needs "
                "synchronised=True (gradients DDP averaged), got synchronised=False"
            )
        self.parameters = list(parameters)
        self.optimizer = optimizer
        self.dist = dist
        self.max_grad_norm = max_grad_norm
        self.synchronised = synchronised
        self.in_place = in_place

    def reduce(
        self,
        pooled: Tensor | None = None,
        *,
        scale: float = 1.0,
        average: Literal["ranks", "last_pooled"] = "ranks",
    ) -> ReducedGradient:
        """Steps 1-3: the gradient averaged over the ranks, the statistics summed, the norm.

        Args:
            pooled: This rank's statistics to sum over the ranks with the gradient
                (1-D; cast to the gradient's dtype).
            scale: Multiplies this rank's gradient before the reduction (a per-step mean).
            average: ``"ranks"`` divides the summed gradient by the world size;
                ``"last_pooled"`` by the last pooled statistic (a sample count
                summed over the ranks, at least 1), for a mean over every rank's samples.
        """
        if self.in_place:
            return self._reduce_in_place(pooled, scale=scale, average=average)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.parameters]
        flat = torch.cat([g.reshape(-1) for g in grads])
        count = flat.numel()
        sums = (
            pooled.to(flat.dtype)
            if pooled is not None
            else torch.zeros(0, dtype=flat.dtype, device=flat.device)
        )
        packed = torch.cat((flat * scale if scale != 1.0 else flat, sums))
        world = self.dist.world_size
        if world > 1 and not self.synchronised:
            # The update's one collective: gradients and statistics of every rank.
            packed = self.dist.all_reduce_sum(packed)
            if average == "ranks":
                packed[:count] /= world
        flat, sums = packed[:count], packed[count:]
        if average == "last_pooled":
            flat = flat / sums[-1].clamp(min=1.0)
        # ||g|| over every parameter's gradient at once
        norm = torch.linalg.vector_norm(flat)
        return ReducedGradient(flat=flat, pooled=sums, norm=norm)

    def _reduce_in_place(
        self, pooled: Tensor | None, *, scale: float, average: str
    ) -> ReducedGradient:
        """Step 3 alone (``in_place=True``): the norm of the gradients left in place."""
        if pooled is not None or scale != 1.0 or average != "ranks":
            raise ConfigError(
                "GradientStep(in_place=True).reduce() packs nothing: expected no pooled "
                f"statistics, scale 1 and average 'ranks', got pooled={pooled is not None}, "
                f"scale={scale}, average={average!r}"
            )
        first = self.parameters[0]
        empty = torch.zeros(0, dtype=first.dtype, device=first.device)
        grads = [p.grad for p in self.parameters if p.grad is not None]
        # ||g|| = sqrt(sum_i ||g_i||^2) over every parameter's gradient g_i
        norm = (
            torch.nn.utils.get_total_norm(grads)
            if grads
            else torch.zeros((), dtype=first.dtype, device=first.device)
        )
        return ReducedGradient(flat=empty, pooled=empty, norm=norm)

    def apply(self, reduced: ReducedGradient) -> None:
        """Steps 4-5: clip to ``max_grad_norm``, write the gradient back, step the optimizer."""
        if self.in_place:
            if self.max_grad_norm is not None:
                # g <- g * min(1, max_norm / (||g|| + 1e-6)), in place
                torch.nn.utils.clip_grads_with_norm_(
                    self.parameters, self.max_grad_norm, reduced.norm
                )
            self.optimizer.step()
            self.clear()
            return
        flat = reduced.flat
        if self.max_grad_norm is not None:
            # g <- g * min(1, max_norm / (||g|| + 1e-6))
            flat = flat * (self.max_grad_norm / (reduced.norm + 1e-6)).clamp(max=1.0)
        offset = 0
        for parameter in self.parameters:
            count = parameter.numel()
            parameter.grad = flat[offset : offset + count].view_as(parameter).clone()
            offset += count
        self.optimizer.step()
        self.clear()

    def skip(self) -> None:
        """Skip the update: gradients cleared, nothing stepped."""
        self.clear()

    def clear(self) -> None:
        """Drop the parameters' gradients (``zero_grad(set_to_none=True)``)."""
        for parameter in self.parameters:
            parameter.grad = None


def build_optimizer(
    parameters: Sequence[nn.Parameter],
    *,
    name: Literal["adam", "adamw", "sgd"],
    learning_rate: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    fused: bool | None = None,
) -> Optimizer:
    """The named torch optimizer over ``parameters`` (Adam and AdamW fused into one kernel).

    Args:
        parameters: The trainable parameters.
        name: ``"adam"``, ``"adamw"`` or ``"sgd"``.
        learning_rate: The initial learning rate.
        betas: Adam's moment decay rates.
        eps: Adam's denominator term.
        weight_decay: L2 penalty (decoupled for AdamW).
        momentum: SGD's momentum.
        fused: Fuse Adam's step into one kernel; by default wherever torch can
            (floating-point parameters on CPU or CUDA). A float16 gradient scaler
            needs the unfused one.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> type(build_optimizer(list(layer.parameters()), name="sgd", learning_rate=0.1))
        <class 'torch.optim.sgd.SGD'>
    """
    params = list(parameters)
    if not params:
        raise ConfigError("build_optimizer: the policy has no trainable parameters")
    if name == "sgd":
        return torch.optim.SGD(
            params, lr=learning_rate, momentum=momentum, weight_decay=weight_decay
        )
    optimizer_type = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    if fused is None:
        fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return optimizer_type(
        params, lr=learning_rate, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused
    )


def build_scheduler(
    optimizer: Optimizer,
    *,
    schedule: Literal["constant", "linear", "cosine"],
    planned_updates: int | None,
    learning_rate: float,
    min_learning_rate: float = 0.0,
) -> LambdaLR:
    """A learning-rate schedule bound to the run's planned number of (applied) updates.

    ``"linear"`` goes from ``learning_rate`` to ``min_learning_rate`` in
    ``planned_updates`` steps, ``"cosine"`` follows half a cosine between them,
    ``"constant"`` stays. Past the plan the rate stays at its end value.

    Raises:
        ConfigError: A decaying schedule without a positive ``planned_updates``.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(layer.parameters(), lr=1.0)
        >>> scheduler = build_scheduler(
        ...     optimizer, schedule="linear", planned_updates=4, learning_rate=1.0
        ... )
        >>> rates = []
        >>> for _ in range(5):
        ...     rates.append(optimizer.param_groups[0]["lr"])
        ...     optimizer.step()
        ...     scheduler.step()
        >>> rates
        [1.0, 0.75, 0.5, 0.25, 0.0]
    """
    return LambdaLR(
        optimizer,
        schedule_factor(
            schedule=schedule,
            planned_updates=planned_updates,
            floor=min_learning_rate / learning_rate,
        ),
    )


def schedule_factor(
    *,
    schedule: Literal["constant", "linear", "cosine"],
    planned_updates: int | None,
    floor: float,
) -> Callable[[int], float]:
    """The factor of a rate after ``update`` updates, from 1 down to ``floor`` (see above).

    Raises:
        ConfigError: A decaying schedule without a positive ``planned_updates``.

    Example:
        >>> factor = schedule_factor(schedule="linear", planned_updates=4, floor=0.5)
        >>> [factor(update) for update in range(6)]
        [1.0, 0.875, 0.75, 0.625, 0.5, 0.5]
    """
    if schedule != "constant" and (planned_updates is None or planned_updates <= 0):
        raise ConfigError(
            f"a {schedule!r} learning-rate schedule is bound to the planned number of updates, "
            f"got {planned_updates!r}; give the run a budget of total_updates (a run whose "
            "horizon varies cannot plan its updates from total_timesteps)"
        )
    total = float(planned_updates or 1)

    def factor(update: int) -> float:
        progress = min(update, total) / total
        if schedule == "linear":
            return 1.0 - (1.0 - floor) * progress
        if schedule == "cosine":
            return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


def resync_schedule(scheduler: LambdaLR) -> None:
    """Set its optimizer's learning rate to the schedule's value at its current update.

    After loading a checkpoint into a run with another plan (a longer budget),
    the saved rate belongs to the old curve; this puts the optimizer on the new
    one. Within the same plan it changes nothing.
    """
    _set_rates(scheduler, scheduler.last_epoch)


def restart_schedule(scheduler: LambdaLR) -> None:
    """Start the learning-rate curve again from its beginning; optimizer moments stay."""
    scheduler.last_epoch = 0
    _set_rates(scheduler, 0)


def _set_rates(scheduler: LambdaLR, update: int) -> None:
    for group, base, factor in zip(
        scheduler.optimizer.param_groups,
        scheduler.base_lrs,
        scheduler.lr_lambdas,
        strict=True,
    ):
        group["lr"] = base * factor(update)

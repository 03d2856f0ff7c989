"""APG, the analytic policy gradient, and what every policy update through an env shares.

An APG update has one life cycle, driven by
:class:`~typedrl.apg.DifferentiableTrainer`: :meth:`~DifferentiableAlgorithm.begin_update`,
then one or more ``accumulate_*`` calls (each runs its backward at once, so the
simulator's graph is freed segment by segment), then
:meth:`~DifferentiableAlgorithm.finish_update` (the update kernel: one gradient
all-reduce across ranks, the finite check, clipping, the optimizer step; then,
when applied, everything that follows an applied update) or
:meth:`~DifferentiableAlgorithm.cancel_update` (nothing changes).

The module functions are what any update of a policy through a differentiable
env shares, APG's and :class:`~typedrl.shac.SHAC`'s alike: the statistics pooled
with the gradient (:func:`policy_statistics`), the update's metrics
(:func:`policy_metrics`) and the refusals that stop a run (:func:`refuse_update`).
"""

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast, final

import torch
from jaxtyping import Float
from tensordict import TensorDict
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from typedrl.advantages import discount_weights
from typedrl.apg._adjoint import ActionAdjointClipper
from typedrl.apg._collector import DifferentiableRollout
from typedrl.apg._config import APGConfig
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError, EnvContractError, NonFiniteError, StateError
from typedrl.metrics import (
    ADJOINT_CLIPPED_FRACTION,
    ADJOINT_NONFINITE_ROWS,
    ADJOINT_NORM_MAX,
    ADJOINT_NORM_MEAN,
    ADJOINT_ROWS,
    LOSS_POLICY,
    TRAIN_ENTROPY,
    TRAIN_GRAD_NORM,
    TRAIN_LEARNING_RATE,
    TRAIN_OBJECTIVE,
    TRAIN_SKIPPED_LARGE,
    TRAIN_SKIPPED_NONFINITE,
)
from typedrl.protocols import SupportsNormalizerUpdate, SupportsStateDict
from typedrl.training import Counters
from typedrl.training._update import (
    GradientStep,
    UpdateOutcome,
    build_optimizer,
    build_scheduler,
)

__all__ = [
    "APG",
    "POLICY_STATISTICS",
    "ZERO_GRADIENT_UPDATES",
    "AlgorithmState",
    "DifferentiableAlgorithm",
    "UpdateData",
    "actor_step",
    "policy_metrics",
    "policy_statistics",
    "refuse_update",
]

_Mode = Literal["segmented", "complete"]
POLICY_STATISTICS: Final = (
    "loss",
    "objective",
    "entropy",
    "adjoint_rows",
    "adjoint_clipped",
    "adjoint_nonfinite",
    "adjoint_norm_sum",
)
"""The scalars a policy update reduces with its gradient in its one all-reduce, in order."""
ZERO_GRADIENT_UPDATES: Final = 3
"""A run whose policy gradient is exactly zero on each of its first this many updates stops
with :class:`~typedrl.errors.EnvContractError`: its objective does not depend on the actions."""
# Rows named at most in a message about non-finite env outputs.
_ROWS_SHOWN = 8


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class UpdateData:
    """The detached observations of one update's rollouts, for the observation normaliser.

    The trainer builds it from the rollouts it accumulated and hands it to
    :meth:`DifferentiableAlgorithm.finish_update`.
    """

    observations: TensorDict
    """Every observation the update acted on, flat ``[samples]`` and detached."""
    observation_mask: Tensor
    """Which of them update the observation normaliser (alive, valid rows): bool ``[samples]``."""

    @classmethod
    def of(
        cls, rollouts: Sequence[DifferentiableRollout], masks: Sequence[Tensor] | None = None
    ) -> "UpdateData":
        """The data of an update's rollouts (detached here).

        Args:
            rollouts: The update's rollouts, in order.
            masks: Per rollout, which ``[num_steps, num_envs]`` observations update the
                normaliser; by default the valid ones.
        """
        detached = tuple(rollout.detach() for rollout in rollouts)
        chosen = masks if masks is not None else [rollout.valid for rollout in detached]
        observations: list[Any] = [rollout.observations.reshape(-1) for rollout in detached]
        return cls(
            observations=cast("TensorDict", torch.cat(observations)),
            observation_mask=torch.cat([mask.reshape(-1) for mask in chosen]),
        )


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AlgorithmState:
    """An algorithm's checkpointable objects, by group (merged into the trainer's state)."""

    modules: dict[str, SupportsStateDict] = field(default_factory=dict)
    """Shared across ranks: counters, critics."""
    optimizers: dict[str, SupportsStateDict] = field(default_factory=dict)
    """Optimizers by name."""
    schedulers: dict[str, SupportsStateDict] = field(default_factory=dict)
    """Learning-rate schedulers by name."""
    rank_local: dict[str, SupportsStateDict] = field(default_factory=dict)
    """Per rank: samplers."""


class DifferentiableAlgorithm(ABC):
    """The life cycle of an analytic policy gradient update, whatever its objective.

    A subclass implements the objective (:meth:`_segment_loss`,
    :meth:`_complete_loss`). The life cycle, the state checks, the update
    kernel (:class:`~typedrl.training.GradientStep`: one gradient all-reduce,
    the finite checks, clipping, the optimizer step) and what follows an
    applied update (:meth:`_after_applied_update`) are written here once.
    :class:`~typedrl.shac.SHAC` writes its own update from the same parts.

    Args:
        policy: The differentiable policy (on the trainer's device, identical on
            every rank).
        config: The policy optimisation's hyper-parameters.
        dist: The ranks whose gradients are averaged (one all-reduce per update).
        planned_updates: Updates the run plans (what linear and cosine schedules
            are bound to); ``None`` with a constant schedule.
        normalize_observations: Update the policy's observation normaliser
            (``policy.update_normalizers``) after each applied update, from the
            update's alive rows.
    """

    def __init__(
        self,
        policy: nn.Module,
        config: APGConfig,
        *,
        dist: Distributed,
        planned_updates: int | None,
        normalize_observations: bool = False,
    ) -> None:
        self.policy = policy
        self.config = config
        self.dist = dist
        self.normalize_observations = normalize_observations
        self.parameters = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer, self.scheduler, self.kernel = actor_step(
            self.parameters, config, dist=dist, planned_updates=planned_updates
        )
        self.counters = Counters("applied", "skipped")
        self._pending: _Pending | None = None
        # How many of the run's first ZERO_GRADIENT_UPDATES updates had a gradient of 0.
        self._zero_gradients = 0

    # ------------------------------------------------------------------ objective

    @abstractmethod
    def _segment_loss(
        self, rollout: DifferentiableRollout, discount: Float[Tensor, " num_envs"]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(loss, objective, entropy, next discount)`` of one segment (sums over rows)."""

    @abstractmethod
    def _complete_loss(
        self, rollout: DifferentiableRollout, objective_scale: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``(loss, objective, entropy)`` of one complete rollout (means over rows)."""

    def state(self) -> AlgorithmState:
        """What the algorithm checkpoints besides the policy: optimizer, schedule, counters."""
        return AlgorithmState(
            modules={"algorithm": self.counters},
            optimizers={"policy": self.optimizer},
            schedulers={"policy": self.scheduler},
        )

    # ------------------------------------------------------------------ life cycle

    @property
    def updating(self) -> bool:
        """Whether an update has begun and not yet finished or been cancelled."""
        return self._pending is not None

    def begin_update(self) -> None:
        """Start accumulating one optimizer update (gradients cleared).

        Raises:
            StateError: An update is already in progress.
        """
        if self._pending is not None:
            raise StateError(
                f"{type(self).__name__}.begin_update: an update is already in progress; "
                "finish_update() or cancel_update() it first"
            )
        self.kernel.clear()
        self._pending = _Pending()

    def accumulate_segment(self, rollout: DifferentiableRollout) -> None:
        """Backpropagate one truncated segment of a segmented update.

        The discount continues from the update's previous segment and restarts
        at 1 after a done (and at the next :meth:`begin_update`). The backward
        runs at once, so the segment's graph is freed (the caller then detaches
        the env's state).

        Raises:
            StateError: No update in progress, or this update accumulates complete rollouts.
        """
        pending = self._require("accumulate_segment", "segmented")
        if rollout.num_steps == 0:
            return
        discount = pending.discount
        if discount is None:
            discount = torch.ones(
                rollout.num_envs, dtype=rollout.rewards.dtype, device=rollout.rewards.device
            )
        loss, objective, entropy, next_discount = self._segment_loss(rollout, discount)
        # Always backward, even a non-finite loss: it frees the simulator's graph.
        torch.autograd.backward(loss)
        pending.discount = next_discount.detach()
        pending.steps += rollout.num_steps
        self._record(pending, rollout, loss, objective, entropy)

    def accumulate_complete_rollout(
        self,
        rollout: DifferentiableRollout,
        *,
        objective_scale: float | Float[Tensor, " num_envs"] = 1.0,
        accumulation_scale: float = 1.0,
    ) -> None:
        """Backpropagate one complete rollout (one microbatch of a complete update).

        Args:
            rollout: The rollout, from a reset to its full horizon.
            objective_scale: Weight of each row's objective, finite and >= 0 (a
                scheduled env's
                :attr:`~typedrl.protocols.DifferentiableRolloutSpec.objective_scale`,
                which the spec has checked).
            accumulation_scale: Weight of this microbatch in the update
                (``1 / gradient_accumulation_steps``).

        Raises:
            StateError: No update in progress, or this update accumulates segments.
            ConfigError: A per-row scale whose length is not the rollout's row count.
        """
        pending = self._require("accumulate_complete_rollout", "complete")
        rewards = rollout.rewards
        scale = torch.as_tensor(objective_scale, dtype=rewards.dtype, device=rewards.device)
        if scale.ndim == 1 and scale.shape[0] != rollout.num_envs:
            raise ConfigError(
                f"objective_scale must be a float or a tensor of shape [{rollout.num_envs}] "
                f"(one weight per row), got shape {list(scale.shape)}"
            )
        loss, objective, entropy = self._complete_loss(rollout, scale.detach())
        loss = loss * accumulation_scale
        torch.autograd.backward(loss)
        pending.steps += rollout.num_steps
        self._record(
            pending, rollout, loss, objective * accumulation_scale, entropy * accumulation_scale
        )

    def finish_update(self, data: UpdateData | None = None) -> UpdateOutcome:
        """Average the gradients across ranks and apply the update, or skip it.

        1. The update kernel (:meth:`~typedrl.training.GradientStep.reduce`): one
           all-reduce carries every rank's gradient and statistics (when the
           action adjoint is measured, one small gather adds its largest norm).
        2. The decision, identical on every rank: a non-finite gradient or loss on
           any rank is non-finite on all of them after the reduction, so every
           rank skips alike (weights, optimizer state and learning rate stay
           bit-identical), or :class:`~typedrl.errors.NonFiniteError` is raised
           with ``nonfinite="raise"``. An update whose pre-clip norm exceeds
           ``skip_grad_norm_above`` is skipped too.
        3. Applied: the gradient is clipped to ``max_grad_norm`` and the optimizer
           steps (:meth:`~typedrl.training.GradientStep.apply`); then
           :meth:`_after_applied_update` runs what follows an applied update.

        A policy gradient of exactly zero (before clipping, after the
        all-reduce, so every rank agrees) on each of the run's first 3 updates
        (``ZERO_GRADIENT_UPDATES``) raises
        :class:`~typedrl.errors.EnvContractError`: nothing in the objective
        depends on the actions, so training could never change the policy.
        A zero gradient later in a run is applied as any other.

        Args:
            data: The update's detached observations (what the trainer
                collected), for the observation normaliser's statistics after an
                applied update. ``None`` when there is nothing to learn from but
                the policy gradient.

        Returns:
            Whether the update was applied, and ``loss/policy``,
            ``train/objective``, ``train/entropy``, ``train/grad_norm``,
            ``train/skipped_nonfinite``, ``train/skipped_large``,
            ``train/learning_rate`` and the adjoint statistics (identical on every
            rank).

        Raises:
            StateError: No update in progress.
            NonFiniteError: With ``nonfinite="raise"``, on a non-finite gradient; the
                message says whether this rank's env returned non-finite rewards or
                observations in the update (the step and rows) or only the backward
                pass overflowed.
            EnvContractError: The gradient was zero on each of the first updates.
        """
        pending = self._require_pending("finish_update")
        config = self.config
        device = self.parameters[0].device
        # Segments are averaged per step; complete rollouts carry their own scales.
        per_step = 1.0 / max(pending.steps, 1) if pending.mode == "segmented" else 1.0
        sums = torch.stack(
            [
                pending.sums.get(name, torch.zeros((), device=device)).to(torch.float64)
                for name in POLICY_STATISTICS
            ]
        )
        reduced = self.kernel.reduce(sums, scale=per_step)
        totals = dict(zip(POLICY_STATISTICS, reduced.pooled.tolist(), strict=True))
        grad_norm = float(reduced.norm)
        # A non-finite loss is skipped too, even when its gradient came out finite (a NaN
        # reward that carries no gradient, or one whose adjoint rows were zeroed).
        finite = math.isfinite(grad_norm) and math.isfinite(totals["loss"])
        large = (
            finite
            and config.skip_grad_norm_above is not None
            and grad_norm > config.skip_grad_norm_above
        )
        metrics = policy_metrics(
            totals,
            steps=max(pending.steps, 1) if pending.mode == "segmented" else 1,
            grad_norm=grad_norm,
            finite=finite,
            large=large,
            learning_rate=float(self.optimizer.param_groups[0]["lr"]),
            norm_max=pending.norm_max,
            dist=self.dist,
        )
        self._zero_gradients = refuse_update(
            type(self).__name__,
            totals=totals,
            grad_norm=grad_norm,
            finite=finite,
            config=config,
            update=self.counters["applied"] + self.counters["skipped"],
            zero_gradients=self._zero_gradients,
            env_outputs=pending.env_outputs,
            dist=self.dist,
            cancel=self.cancel_update,
        )
        applied = finite and not large
        if applied:
            self.kernel.apply(reduced)
            self.counters["applied"] += 1
            self._after_applied_update(data)
        else:
            self.counters["skipped"] += 1
            self.kernel.skip()
        self._pending = None
        return UpdateOutcome(applied=applied, metrics=metrics)

    def _after_applied_update(self, data: UpdateData | None) -> None:
        """Everything that follows an applied policy step, in order.

        1. The learning-rate schedule steps (it counts applied updates only).
        2. The observation normaliser's statistics take in the update's alive rows
           (so that every forward of the update saw the same normalisation).
        """
        self.scheduler.step()
        policy = self.policy
        if (
            self.normalize_observations
            and isinstance(policy, SupportsNormalizerUpdate)
            and data is not None
        ):
            policy.update_normalizers(data.observations, dist=self.dist, mask=data.observation_mask)

    def cancel_update(self) -> None:
        """Drop the update in progress: gradients cleared, nothing stepped.

        Raises:
            StateError: No update in progress.
        """
        self._require_pending("cancel_update")
        self.kernel.clear()
        self._pending = None

    # ------------------------------------------------------------------ helpers

    def _require_pending(self, method: str) -> "_Pending":
        if self._pending is None:
            raise StateError(
                f"{type(self).__name__}.{method}: no update in progress; call begin_update() first"
            )
        return self._pending

    def _require(self, method: str, mode: _Mode) -> "_Pending":
        pending = self._require_pending(method)
        if pending.mode is not None and pending.mode != mode:
            raise StateError(
                f"{type(self).__name__}.{method}: this update accumulates {pending.mode} "
                "rollouts; one update cannot mix segments and complete rollouts"
            )
        pending.mode = mode
        return pending

    def _record(
        self,
        pending: "_Pending",
        rollout: DifferentiableRollout,
        loss: Tensor,
        objective: Tensor,
        entropy: Tensor,
    ) -> None:
        """Add one rollout's statistics, read after its backward and copied."""
        pending.env_outputs.append(
            (
                pending.steps - rollout.num_steps,
                rollout.rewards.detach(),
                rollout.terminal_observations.detach(),
            )
        )
        sums = pending.sums
        for name, value in policy_statistics(loss, objective, entropy, rollout.adjoint).items():
            sums[name] = sums[name] + value if name in sums else value
        clipper = rollout.adjoint
        if clipper is not None:
            norm_max = clipper.norm_max.detach().to(torch.float64).clone()
            pending.norm_max = (
                norm_max if pending.norm_max is None else torch.maximum(pending.norm_max, norm_max)
            )


@final
class _Pending:
    """The update in progress: what its accumulated rollouts left for :meth:`finish_update`."""

    def __init__(self) -> None:
        self.mode: _Mode | None = None
        # The discount the next segment continues from (segmented updates).
        self.discount: Tensor | None = None
        self.steps = 0
        # Scalars summed over the update's rollouts (float64, on the device).
        self.sums: dict[str, Tensor] = {}
        self.norm_max: Tensor | None = None
        # Each rollout's first step in the update, rewards and env observations (detached
        # references, read only to say what went wrong when an update raises).
        self.env_outputs: list[tuple[int, Tensor, TensorDict]] = []


def actor_step(
    parameters: list[nn.Parameter],
    config: APGConfig,
    *,
    dist: Distributed,
    planned_updates: int | None,
) -> tuple[Optimizer, LambdaLR, GradientStep]:
    """The optimizer, learning-rate schedule and gradient step of an actor's ``config``.

    APG's and SHAC's actors step the same way: the config's optimizer over the
    trainable ``parameters``, its schedule over ``planned_updates``, and one
    rank-averaged, clipped gradient step.
    """
    optimizer = build_optimizer(
        parameters,
        name=config.optimizer,
        learning_rate=config.learning_rate,
        betas=config.betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        momentum=config.momentum,
    )
    scheduler = build_scheduler(
        optimizer,
        schedule=config.learning_rate_schedule,
        planned_updates=planned_updates,
        learning_rate=config.learning_rate,
        min_learning_rate=config.min_learning_rate,
    )
    step = GradientStep(parameters, optimizer, dist=dist, max_grad_norm=config.max_grad_norm)
    return optimizer, scheduler, step


def policy_statistics(
    loss: Tensor, objective: Tensor, entropy: Tensor, adjoint: ActionAdjointClipper | None
) -> dict[str, Tensor]:
    """One rollout's scalars to reduce with the gradient, as float64 copies (read after backward).

    Keyed by :data:`POLICY_STATISTICS`; the adjoint's counts only when the rollout had a clipper.
    """
    values = {"loss": loss, "objective": objective, "entropy": entropy}
    if adjoint is not None:
        values.update(
            {
                "adjoint_rows": adjoint.rows,
                "adjoint_clipped": adjoint.clipped,
                "adjoint_nonfinite": adjoint.nonfinite,
                "adjoint_norm_sum": adjoint.norm_sum,
            }
        )
    return {name: value.detach().to(torch.float64).clone() for name, value in values.items()}


def policy_metrics(
    totals: Mapping[str, float],
    *,
    steps: int,
    grad_norm: float,
    finite: bool,
    large: bool,
    learning_rate: float,
    norm_max: Tensor | None,
    dist: Distributed,
) -> dict[str, float]:
    """A policy update's metrics from its :data:`POLICY_STATISTICS` summed over the ranks.

    Args:
        totals: The statistics summed over the ranks.
        steps: What the per-step means divide by (a segmented update's steps; 1 for
            complete rollouts, whose statistics carry their own scales).
        grad_norm: The reduced gradient's norm, before clipping.
        finite: Whether the gradient and the loss were finite.
        large: Whether the update was skipped for a norm above ``skip_grad_norm_above``.
        learning_rate: The rate the update used.
        norm_max: This rank's largest action-adjoint row norm (``None``: not measured).
        dist: The ranks (the one statistic a sum cannot carry is gathered).
    """
    world = dist.world_size
    metrics = {
        LOSS_POLICY: totals["loss"] / world / steps,
        TRAIN_OBJECTIVE: totals["objective"] / world / steps,
        TRAIN_ENTROPY: totals["entropy"] / world / steps,
        TRAIN_GRAD_NORM: grad_norm,
        TRAIN_SKIPPED_NONFINITE: float(not finite),
        TRAIN_SKIPPED_LARGE: float(large),
        TRAIN_LEARNING_RATE: learning_rate,
    }
    if norm_max is not None:
        rows = totals["adjoint_rows"]
        finite_rows = rows - totals["adjoint_nonfinite"]
        largest = norm_max.detach().reshape(1).to(torch.float64)
        if world > 1:
            # The one statistic a sum cannot carry: gathered for its maximum.
            largest = dist.all_gather(largest).max().reshape(1)
        metrics[ADJOINT_ROWS] = rows
        metrics[ADJOINT_CLIPPED_FRACTION] = totals["adjoint_clipped"] / max(rows, 1.0)
        metrics[ADJOINT_NONFINITE_ROWS] = totals["adjoint_nonfinite"]
        metrics[ADJOINT_NORM_MEAN] = totals["adjoint_norm_sum"] / max(finite_rows, 1.0)
        metrics[ADJOINT_NORM_MAX] = float(largest[0])
    return metrics


def refuse_update(
    owner: str,
    *,
    totals: Mapping[str, float],
    grad_norm: float,
    finite: bool,
    config: APGConfig,
    update: int,
    zero_gradients: int,
    env_outputs: Sequence[tuple[int, Tensor, TensorDict]],
    dist: Distributed,
    cancel: Callable[[], None],
) -> int:
    """Raise where a policy update must stop the run; the run's count of zero gradients.

    A non-finite update raises :class:`~typedrl.errors.NonFiniteError` with
    ``nonfinite="raise"`` (saying where this rank's env returned a NaN or an
    infinity, if it did); a policy gradient of exactly zero on each of the run's
    first :data:`ZERO_GRADIENT_UPDATES` updates raises
    :class:`~typedrl.errors.EnvContractError`. ``cancel`` drops the update first.

    Args:
        owner: The algorithm, named in the messages.
        totals: The update's statistics summed over the ranks.
        grad_norm: The reduced gradient's norm.
        finite: Whether the gradient and the loss were finite.
        config: The policy's optimisation (its ``nonfinite`` rule).
        update: The update's index in the run (applied and skipped ones before it).
        zero_gradients: How many of the run's earlier updates had a gradient of 0.
        env_outputs: Per rollout of the update: its first step, rewards and env observations.
        dist: The ranks (the message names this one).
        cancel: Drops the update in progress.
    """
    if not finite and config.nonfinite == "raise":
        cause = _nonfinite_env_outputs(env_outputs, dist)
        cancel()
        advice = (
            f"{cause}: the simulation itself went non-finite, not only the gradient; find "
            "why (typedrl check-env ENV) before lowering the learning rate"
            if cause
            else "The env's rewards and observations of this update were finite, so the "
            "backward pass overflowed: lower the learning rate or the horizon, or clip "
            "the action adjoint (adjoint_max_norm)"
        )
        raise NonFiniteError(
            f"{owner}: non-finite gradient norm ({grad_norm}) at update "
            f"{update}; nothing was updated. {advice}"
        )
    if update >= ZERO_GRADIENT_UPDATES:
        return zero_gradients
    # Rows the adjoint clipper zeroed for being non-finite leave no gradient either.
    zero = finite and grad_norm == 0.0 and totals["adjoint_nonfinite"] == 0.0
    zero_gradients += int(zero)
    if zero_gradients == ZERO_GRADIENT_UPDATES:
        cancel()
        raise EnvContractError(
            f"{owner}: the policy gradient was exactly 0 on each of the "
            f"first {ZERO_GRADIENT_UPDATES} updates, so training can never change the "
            "policy: the objective does not depend on the actions. Most likely the "
            "env's reward (or observation) is not connected to the action through its "
            "autograd graph (a .detach(), .item(), NumPy or torch.no_grad() step inside "
            "step()); run `typedrl check-env ENV` to see which output lost its gradient"
        )
    return zero_gradients


def _nonfinite_env_outputs(
    env_outputs: Sequence[tuple[int, Tensor, TensorDict]], dist: Distributed
) -> str:
    """Where this rank's env returned a NaN or an infinity in the update ("" if nowhere)."""
    found: list[str] = []
    for name in ("rewards", "observations"):
        for first, rewards, observations in env_outputs:
            values = rewards if name == "rewards" else _flat_leaves(observations)
            bad = ~torch.isfinite(values)
            if values.ndim > 2:
                bad = bad.any(dim=-1)
            steps = bad.any(dim=1).nonzero()
            if steps.numel() == 0:
                continue
            step = int(steps[0])
            rows = bad[step].nonzero().flatten().tolist()
            shown = ", ".join(str(row) for row in rows[:_ROWS_SHOWN])
            more = f", ... ({len(rows)} rows)" if len(rows) > _ROWS_SHOWN else ""
            kind = "NaN" if bool(torch.isnan(values[step]).any()) else "an infinity"
            found.append(
                f"{kind} in its {name} at step {first + step} of the update (rows [{shown}{more}])"
            )
            break
    if not found:
        return ""
    where = f" on rank {dist.rank}" if dist.world_size > 1 else ""
    return f"The env returned {' and '.join(found)}{where}"


def _flat_leaves(observations: TensorDict) -> Tensor:
    """Every floating-point leaf of ``[steps, rows]`` observations as one ``[steps, rows, n]``."""
    steps, rows = observations.batch_size
    leaves = [
        leaf.reshape(steps, rows, -1)
        for leaf in observations.values(include_nested=True, leaves_only=True)
        if isinstance(leaf, Tensor) and leaf.is_floating_point()
    ]
    if not leaves:
        return torch.zeros(steps, rows, 0, device=observations.device)
    return torch.cat([leaf.to(torch.float64) for leaf in leaves], dim=-1)


@final
class APG(DifferentiableAlgorithm):
    """Analytic policy gradients: the discounted return, differentiated through the env.

    Segmented objective (truncated backpropagation through time): within one
    update, ``J = sum_t d_t r_t`` with ``d`` starting at 1, multiplied by
    ``gamma`` each step, restarting at 1 after a done and at each update; the
    loss is ``-(J + entropy_coef * H)`` averaged over rows and steps.

    Complete objective: ``J_i = sum_t gamma^t r_{t,i}`` over the row's steps
    up to and including its first done (the discount never restarts; later
    rewards are masked out), weighted by ``objective_scale``; the loss is the
    negative mean over rows, times the microbatch's ``accumulation_scale``.

    Example:
        >>> import torch
        >>> from typedrl.distributed import SingleProcess
        >>> policy = torch.nn.Linear(1, 1)
        >>> apg = APG(policy, APGConfig(), dist=SingleProcess(), planned_updates=None)
        >>> apg.finish_update()
        Traceback (most recent call last):
        ...
        typedrl.errors.StateError: APG.finish_update: no update in progress; call ...
    """

    def _segment_loss(
        self, rollout: DifferentiableRollout, discount: Float[Tensor, " num_envs"]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        stacked, current = discount_weights(
            discount, rollout.terminated | rollout.truncated, self.config.gamma
        )
        rows = rollout.num_envs
        # Ghost steps never count (torch.where, so that nothing of them reaches the loss).
        zero = torch.zeros((), dtype=rollout.rewards.dtype, device=rollout.rewards.device)
        rewards = torch.where(rollout.valid, rollout.rewards, zero)
        entropies = torch.where(rollout.valid, rollout.entropies, zero)
        # J = sum_t d_t r_t, summed over rows; averaged over rows and steps in finish_update.
        objective = (stacked * rewards).sum() / rows
        entropy = entropies.sum() / rows
        loss = -(objective + self.config.entropy_coef * entropy)
        return loss, objective, entropy, current

    def _complete_loss(
        self, rollout: DifferentiableRollout, objective_scale: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        zero = torch.zeros((), dtype=rollout.rewards.dtype, device=rollout.rewards.device)
        counted = rollout.alive_mask & rollout.valid
        # Rewards after the row's first done, and of ghost steps, never reach the loss.
        rewards = torch.where(counted, rollout.rewards, zero)
        entropies = torch.where(counted, rollout.entropies, zero)
        steps = torch.arange(rollout.num_steps, dtype=rewards.dtype, device=rewards.device)
        # J_i = sum_t gamma^t r_{t,i}, the discount never restarting.
        weights = (self.config.gamma**steps).unsqueeze(1)
        per_row = (weights * rewards).sum(dim=0)
        objective = (objective_scale * per_row).mean()
        entropy = entropies.sum(dim=0).mean()
        loss = -(objective + self.config.entropy_coef * entropy)
        return loss, objective, entropy

"""Algorithms that learn by backpropagating through a differentiable env, and APG itself.

Every such algorithm has one life cycle, driven by
:class:`~typedrl.apg.DifferentiableTrainer`: :meth:`~DifferentiableAlgorithm.begin_update`,
then one or more ``accumulate_*`` calls (each runs its backward at once, so the
simulator's graph is freed segment by segment), then
:meth:`~DifferentiableAlgorithm.finish_update` (one gradient all-reduce across
ranks, the finite check, clipping, the optimizer and scheduler steps) or
:meth:`~DifferentiableAlgorithm.cancel_update` (nothing changes).
"""

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal, final

import torch
from jaxtyping import Float
from tensordict import TensorDict
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from typedrl import _validation
from typedrl.apg._config import APGConfig
from typedrl.apg._rollout import DifferentiableRollout
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError, EnvContractError, NonFiniteError, StateError
from typedrl.protocols import SupportsStateDict
from typedrl.training import Counters

__all__ = [
    "APG",
    "ZERO_GRADIENT_UPDATES",
    "AlgorithmState",
    "DifferentiableAlgorithm",
    "build_optimizer",
    "build_scheduler",
]

_Mode = Literal["segmented", "complete"]
# Scalars reduced with the gradient in the update's one all-reduce.
_SUMMED = (
    "loss",
    "objective",
    "entropy",
    "adjoint_rows",
    "adjoint_clipped",
    "adjoint_nonfinite",
    "adjoint_norm_sum",
)
ZERO_GRADIENT_UPDATES: Final = 3
"""A run whose policy gradient is exactly zero on each of its first this many updates stops
with :class:`~typedrl.errors.EnvContractError`: its objective does not depend on the actions."""
# Rows named at most in a message about non-finite env outputs.
_ROWS_SHOWN = 8
_ADJOINT_KEYS = (
    "adjoint/rows",
    "adjoint/clipped_fraction",
    "adjoint/nonfinite_rows",
    "adjoint/norm_mean",
    "adjoint/norm_max",
)


def build_optimizer(
    parameters: Sequence[nn.Parameter],
    *,
    name: Literal["adam", "adamw", "sgd"],
    learning_rate: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
) -> Optimizer:
    """The named torch optimizer over ``parameters`` (Adam and AdamW fused into one kernel).

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
    if schedule != "constant" and (planned_updates is None or planned_updates <= 0):
        raise ConfigError(
            f"a {schedule!r} learning-rate schedule is bound to the planned number of updates, "
            f"got {planned_updates!r}; give the run a budget of total_updates (a run whose "
            "horizon varies cannot plan its updates from total_timesteps)"
        )
    total = float(planned_updates or 1)
    floor = min_learning_rate / learning_rate

    def factor(update: int) -> float:
        progress = min(update, total) / total
        if schedule == "linear":
            return 1.0 - (1.0 - floor) * progress
        if schedule == "cosine":
            return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return LambdaLR(optimizer, factor)


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
    """The one interface of the algorithms :class:`~typedrl.apg.DifferentiableTrainer` drives.

    A subclass implements the objective (:meth:`_segment_loss`,
    :meth:`_complete_loss`) and, where it trains more than the policy (SHAC's
    critic), :meth:`_after_step` and :meth:`state`. The life cycle, the state
    checks, the gradient all-reduce, the finite checks, clipping and the
    optimizer and scheduler steps are written here once.

    Args:
        policy: The differentiable policy (on the trainer's device, identical on
            every rank).
        config: The policy optimisation's hyper-parameters.
        dist: The ranks whose gradients are averaged (one all-reduce per update).
        planned_updates: Updates the run plans (what linear and cosine schedules
            are bound to); ``None`` with a constant schedule.
    """

    _summed: ClassVar[tuple[str, ...]] = _SUMMED
    """Scalars reduced with the gradient (a subclass adds its own to :attr:`_sums`)."""

    def __init__(
        self,
        policy: nn.Module,
        config: APGConfig,
        *,
        dist: Distributed,
        planned_updates: int | None,
    ) -> None:
        if not isinstance(config, APGConfig):
            raise ConfigError(f"config must be an APGConfig, got {type(config).__name__}")
        self.policy = policy
        self.config = config
        self.dist = dist
        self.parameters = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(
            self.parameters,
            name=config.optimizer,
            learning_rate=config.learning_rate,
            betas=config.betas,
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
            momentum=config.momentum,
        )
        self.scheduler = build_scheduler(
            self.optimizer,
            schedule=config.learning_rate_schedule,
            planned_updates=planned_updates,
            learning_rate=config.learning_rate,
            min_learning_rate=config.min_learning_rate,
        )
        self.counters = Counters("applied", "skipped")
        self._mode: _Mode | None = None
        self._active = False
        self._discount: Tensor | None = None
        self._steps = 0
        self._sums: dict[str, Tensor] = {}
        self._norm_max: Tensor | None = None
        # Each rollout's first step in the update, rewards and env observations (detached
        # references, read only to say what went wrong when an update raises).
        self._env_outputs: list[tuple[int, Tensor, TensorDict]] = []
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

    def _after_step(self, rollouts_seen: int) -> dict[str, float]:
        """Extra work after an applied policy step (a critic's update); its metrics."""
        del rollouts_seen
        return {}

    def state(self) -> AlgorithmState:
        """What the algorithm checkpoints besides the policy.

        Its optimizers, schedulers and counters and, for an actor-critic, the
        critics and the per-rank samplers.
        """
        return AlgorithmState(
            modules={"algorithm": self.counters},
            optimizers={"policy": self.optimizer},
            schedulers={"policy": self.scheduler},
        )

    # ------------------------------------------------------------------ life cycle

    @property
    def updating(self) -> bool:
        """Whether an update has begun and not yet finished or been cancelled."""
        return self._active

    def begin_update(self) -> None:
        """Start accumulating one optimizer update (gradients cleared).

        Raises:
            StateError: An update is already in progress.
        """
        if self._active:
            raise StateError(
                f"{type(self).__name__}.begin_update: an update is already in progress; "
                "finish_update() or cancel_update() it first"
            )
        self._clear_gradients()
        self._active = True
        self._mode = None
        self._discount = None
        self._steps = 0
        self._sums = {}
        self._norm_max = None
        self._env_outputs = []

    def accumulate_segment(self, rollout: DifferentiableRollout) -> None:
        """Backpropagate one truncated segment of a segmented update.

        The discount continues from the update's previous segment and restarts
        at 1 after a done (and at the next :meth:`begin_update`). The backward
        runs at once, so the segment's graph is freed (the caller then detaches
        the env's state).

        Raises:
            StateError: No update in progress, or this update accumulates complete rollouts.
        """
        self._require("accumulate_segment", "segmented")
        if rollout.num_steps == 0:
            return
        discount = self._discount
        if discount is None:
            discount = torch.ones(
                rollout.num_envs, dtype=rollout.rewards.dtype, device=rollout.rewards.device
            )
        loss, objective, entropy, next_discount = self._segment_loss(rollout, discount)
        # Always backward, even a non-finite loss: it frees the simulator's graph.
        torch.autograd.backward(loss)
        self._discount = next_discount.detach()
        self._steps += rollout.num_steps
        self._record(rollout, loss, objective, entropy)

    @_validation.no_type_check
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
            objective_scale: Weight of each row's objective (a scheduled env's
                :attr:`~typedrl.protocols.DifferentiableRolloutSpec.objective_scale`).
            accumulation_scale: Weight of this microbatch in the update
                (``1 / gradient_accumulation_steps``).

        Raises:
            StateError: No update in progress, or this update accumulates segments.
            ConfigError: A scale is not finite and non-negative, or of the wrong shape.
        """
        self._require("accumulate_complete_rollout", "complete")
        if isinstance(accumulation_scale, bool) or not (
            isinstance(accumulation_scale, int | float)
            and math.isfinite(accumulation_scale)
            and accumulation_scale >= 0
        ):
            raise ConfigError(
                f"accumulation_scale must be a finite float >= 0, got {accumulation_scale!r}"
            )
        rewards = rollout.rewards
        if isinstance(objective_scale, bool) or not isinstance(
            objective_scale, int | float | Tensor
        ):
            raise ConfigError(
                f"objective_scale must be a float or a tensor of shape [{rollout.num_envs}], "
                f"got {type(objective_scale).__name__}"
            )
        scale = torch.as_tensor(objective_scale, dtype=rewards.dtype, device=rewards.device)
        if scale.ndim not in (0, 1) or (scale.ndim == 1 and scale.shape[0] != rollout.num_envs):
            raise ConfigError(
                f"objective_scale must be a float or a tensor of shape [{rollout.num_envs}], "
                f"got shape {list(scale.shape)}"
            )
        # One host read per complete rollout: a negative or non-finite weight is a mistake.
        if not bool((torch.isfinite(scale) & (scale >= 0)).all()):
            raise ConfigError(f"objective_scale must be finite and >= 0, got {scale.tolist()}")
        loss, objective, entropy = self._complete_loss(rollout, scale.detach())
        loss = loss * accumulation_scale
        torch.autograd.backward(loss)
        self._steps += rollout.num_steps
        self._record(rollout, loss, objective * accumulation_scale, entropy * accumulation_scale)

    def finish_update(self) -> dict[str, float]:
        """Average the gradients across ranks and apply the update, or skip it.

        One all-reduce carries every rank's gradient and statistics (when the
        action adjoint is measured, one small gather adds its largest norm). A
        non-finite gradient on any rank is non-finite on all of them after it,
        so every rank skips alike: weights, optimizer state and learning rate
        stay bit-identical (or :class:`~typedrl.errors.NonFiniteError` is raised
        with ``nonfinite="raise"``). An update whose pre-clip norm exceeds
        ``skip_grad_norm_above`` is skipped too. Otherwise the gradient is
        clipped to ``max_grad_norm`` and the optimizer and scheduler step.

        A policy gradient of exactly zero (before clipping, after the
        all-reduce, so every rank agrees) on each of the run's first 3 updates
        (``ZERO_GRADIENT_UPDATES``) raises
        :class:`~typedrl.errors.EnvContractError`: nothing in the objective
        depends on the actions, so training could never change the policy.
        A zero gradient later in a run is applied as any other.

        Returns:
            ``loss/policy``, ``train/objective``, ``train/entropy``,
            ``train/grad_norm``, ``train/skipped_nonfinite``,
            ``train/skipped_large``, ``train/learning_rate`` and the adjoint
            statistics (identical on every rank).

        Raises:
            StateError: No update in progress.
            NonFiniteError: With ``nonfinite="raise"``, on a non-finite gradient; the
                message says whether this rank's env returned non-finite rewards or
                observations in the update (the step and rows) or only the backward
                pass overflowed.
            EnvContractError: The gradient was zero on each of the first updates.
        """
        if not self._active:
            raise StateError(f"{type(self).__name__}.finish_update: no update in progress")
        config, dist = self.config, self.dist
        device = self.parameters[0].device
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.parameters]
        flat = torch.cat([g.reshape(-1) for g in grads])
        # Segments are averaged per step; complete rollouts carry their own scales.
        per_step = 1.0 / max(self._steps, 1) if self._mode == "segmented" else 1.0
        sums = torch.stack(
            [
                self._sums.get(name, torch.zeros((), device=device)).to(flat.dtype)
                for name in self._summed
            ]
        )
        packed = torch.cat((flat * per_step, sums))
        # The update's one collective: gradients and statistics of every rank.
        if dist.world_size > 1:
            packed = dist.all_reduce_sum(packed)
            packed[: flat.numel()] /= dist.world_size
        flat = packed[: flat.numel()]
        totals = dict(zip(self._summed, packed[flat.numel() :].tolist(), strict=True))
        norm = torch.linalg.vector_norm(flat)
        grad_norm = float(norm)
        # A non-finite loss is skipped too, even when its gradient came out finite (a NaN
        # reward that carries no gradient, or one whose adjoint rows were zeroed).
        finite = math.isfinite(grad_norm) and math.isfinite(totals["loss"])
        large = (
            finite
            and config.skip_grad_norm_above is not None
            and grad_norm > config.skip_grad_norm_above
        )
        learning_rate = float(self.optimizer.param_groups[0]["lr"])
        metrics = self._metrics(totals, grad_norm, finite, large, learning_rate)
        update = self.counters["applied"] + self.counters["skipped"]
        if not finite and config.nonfinite == "raise":
            cause = self._nonfinite_env_outputs()
            self.cancel_update()
            advice = (
                f"{cause}: the simulation itself went non-finite, not only the gradient; find "
                "why (typedrl check-env ENV) before lowering the learning rate"
                if cause
                else "The env's rewards and observations of this update were finite, so the "
                "backward pass overflowed: lower the learning rate or the horizon, or clip "
                "the action adjoint (adjoint_max_norm)"
            )
            raise NonFiniteError(
                f"{type(self).__name__}: non-finite gradient norm ({grad_norm}) at update "
                f"{update}; nothing was updated. {advice}"
            )
        if update < ZERO_GRADIENT_UPDATES:
            # Rows the adjoint clipper zeroed for being non-finite leave no gradient either.
            zero = finite and grad_norm == 0.0 and totals["adjoint_nonfinite"] == 0.0
            self._zero_gradients += int(zero)
            if self._zero_gradients == ZERO_GRADIENT_UPDATES:
                self.cancel_update()
                raise EnvContractError(
                    f"{type(self).__name__}: the policy gradient was exactly 0 on each of the "
                    f"first {ZERO_GRADIENT_UPDATES} updates, so training can never change the "
                    "policy: the objective does not depend on the actions. Most likely the "
                    "env's reward (or observation) is not connected to the action through its "
                    "autograd graph (a .detach(), .item(), NumPy or torch.no_grad() step inside "
                    "step()); run `typedrl check-env ENV` to see which output lost its gradient"
                )
        if finite and not large:
            if config.max_grad_norm is not None:
                # g <- g * min(1, max_norm / (||g|| + 1e-6))
                flat = flat * min(1.0, config.max_grad_norm / (grad_norm + 1e-6))
            offset = 0
            for parameter in self.parameters:
                count = parameter.numel()
                parameter.grad = flat[offset : offset + count].view_as(parameter).clone()
                offset += count
            self.optimizer.step()
            self.scheduler.step()
            self.counters["applied"] += 1
            metrics.update(self._after_step(self.counters["applied"]))
        else:
            self.counters["skipped"] += 1
        self._clear_gradients()
        self._active = False
        return metrics

    def cancel_update(self) -> None:
        """Drop the update in progress: gradients cleared, nothing stepped.

        Raises:
            StateError: No update in progress.
        """
        if not self._active:
            raise StateError(f"{type(self).__name__}.cancel_update: no update in progress")
        self._clear_gradients()
        self._active = False

    def resync_schedule(self) -> None:
        """Set the learning rate to the schedule's value at its current update.

        After loading a checkpoint into a run with another plan (a longer
        budget), the saved rate belongs to the old curve; this puts the optimizer
        on the new one. Within the same plan it changes nothing.
        """
        for group, base, factor in zip(
            self.optimizer.param_groups,
            self.scheduler.base_lrs,
            self.scheduler.lr_lambdas,
            strict=True,
        ):
            group["lr"] = base * factor(self.scheduler.last_epoch)

    def restart_schedule(self) -> None:
        """Start the learning-rate curve again from its beginning; optimizer moments stay."""
        self.scheduler.last_epoch = 0
        for group, base, factor in zip(
            self.optimizer.param_groups,
            self.scheduler.base_lrs,
            self.scheduler.lr_lambdas,
            strict=True,
        ):
            group["lr"] = base * factor(0)

    # ------------------------------------------------------------------ helpers

    def _require(self, method: str, mode: _Mode) -> None:
        if not self._active:
            raise StateError(
                f"{type(self).__name__}.{method}: no update in progress; call begin_update() first"
            )
        if self._mode is not None and self._mode != mode:
            raise StateError(
                f"{type(self).__name__}.{method}: this update accumulates {self._mode} "
                "rollouts; one update cannot mix segments and complete rollouts"
            )
        self._mode = mode

    def _record(
        self, rollout: DifferentiableRollout, loss: Tensor, objective: Tensor, entropy: Tensor
    ) -> None:
        """Add one rollout's statistics, read after its backward and copied."""
        self._env_outputs.append(
            (
                self._steps - rollout.num_steps,
                rollout.rewards.detach(),
                rollout.terminal_observations.detach(),
            )
        )
        values = {"loss": loss, "objective": objective, "entropy": entropy}
        clipper = rollout.adjoint
        if clipper is not None:
            values.update(
                {
                    "adjoint_rows": clipper.rows,
                    "adjoint_clipped": clipper.clipped,
                    "adjoint_nonfinite": clipper.nonfinite,
                    "adjoint_norm_sum": clipper.norm_sum,
                }
            )
            norm_max = clipper.norm_max.detach().to(torch.float64).clone()
            self._norm_max = (
                norm_max if self._norm_max is None else torch.maximum(self._norm_max, norm_max)
            )
        for name, value in values.items():
            copied = value.detach().to(torch.float64).clone()
            self._sums[name] = self._sums[name] + copied if name in self._sums else copied

    def _metrics(
        self,
        totals: Mapping[str, float],
        grad_norm: float,
        finite: bool,
        large: bool,
        learning_rate: float,
    ) -> dict[str, float]:
        world = self.dist.world_size
        per_step = max(self._steps, 1) if self._mode == "segmented" else 1
        metrics = {
            "loss/policy": totals["loss"] / world / (per_step if self._mode == "segmented" else 1),
            "train/objective": totals["objective"] / world / per_step,
            "train/entropy": totals["entropy"] / world / per_step,
            "train/grad_norm": grad_norm,
            "train/skipped_nonfinite": float(not finite),
            "train/skipped_large": float(large),
            "train/learning_rate": learning_rate,
        }
        if self._norm_max is not None:
            rows = totals["adjoint_rows"]
            finite_rows = rows - totals["adjoint_nonfinite"]
            norm_max = self._norm_max.detach().reshape(1).to(torch.float64)
            if world > 1:
                # The one statistic a sum cannot carry: gathered for its maximum.
                norm_max = self.dist.all_gather(norm_max).max().reshape(1)
            metrics["adjoint/rows"] = rows
            metrics["adjoint/clipped_fraction"] = totals["adjoint_clipped"] / max(rows, 1.0)
            metrics["adjoint/nonfinite_rows"] = totals["adjoint_nonfinite"]
            metrics["adjoint/norm_mean"] = totals["adjoint_norm_sum"] / max(finite_rows, 1.0)
            metrics["adjoint/norm_max"] = float(norm_max[0])
        return metrics

    def _nonfinite_env_outputs(self) -> str:
        """Where this rank's env returned a NaN or an infinity in the update ("" if nowhere)."""
        found: list[str] = []
        for name in ("rewards", "observations"):
            for first, rewards, observations in self._env_outputs:
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
                    f"{kind} in its {name} at step {first + step} of the update "
                    f"(rows [{shown}{more}])"
                )
                break
        if not found:
            return ""
        where = f" on rank {self.dist.rank}" if self.dist.world_size > 1 else ""
        return f"The env returned {' and '.join(found)}{where}"

    def _clear_gradients(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None


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
        typedrl.errors.StateError: APG.finish_update: no update in progress
    """

    def _segment_loss(
        self, rollout: DifferentiableRollout, discount: Float[Tensor, " num_envs"]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        gamma = self.config.gamma
        done = rollout.terminated | rollout.truncated
        weights = []
        current = discount
        for step in range(rollout.num_steps):
            weights.append(current)
            # d_{t+1} = 1 after a done, else gamma * d_t
            current = torch.where(done[step], torch.ones_like(current), gamma * current)
        stacked = torch.stack(weights)
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

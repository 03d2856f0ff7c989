"""The steps SHAC and AHAC share: a window's actor loss and step, the critic's targets and fit.

Both algorithms differentiate a window of the env, end it with a critic's
value, step the actor through one rank-averaged gradient, and regress a critic
on TD(lambda) targets of the detached window. They differ in which critic ends
the window (SHAC's target critic, AHAC's double critic), in the window's length
(fixed, adaptive) and in when the critic's fit stops; each function here takes
those as arguments, so :meth:`~typedrl.shac.SHAC.update` and
:meth:`~typedrl.ahac.AHAC.update` stay one numbered iteration each.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, cast, final, runtime_checkable

import torch
from jaxtyping import Bool, Float
from tensordict import TensorDict
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from typedrl.advantages import compute_gae, discount_weights
from typedrl.apg._algorithm import (
    POLICY_STATISTICS,
    AlgorithmState,
    policy_metrics,
    policy_statistics,
    refuse_update,
)
from typedrl.apg._collector import DifferentiableRollout
from typedrl.apg._config import APGConfig, DecaySchedule
from typedrl.apg._cut_rows import exploded_rows, zero_rows
from typedrl.distributed import Distributed, raise_together
from typedrl.errors import ConfigError, TypedRLError
from typedrl.metrics import (
    CRITIC_EXPLAINED_VARIANCE,
    CRITIC_TARGET_MEAN,
    CRITIC_VALUE_MEAN,
    LOSS_CRITIC,
    TRAIN_CRITIC_GRAD_NORM,
    TRAIN_CRITIC_LEARNING_RATE,
    TRAIN_CUT_ROWS,
)
from typedrl.normalization import RunningMeanStd
from typedrl.protocols import DifferentiablePolicy, SupportsStateDict
from typedrl.training import Counters, GeneratorState
from typedrl.training._update import (
    GradientStep,
    ReducedGradient,
    build_optimizer,
    build_scheduler,
)
from typedrl.types import Obs, RolloutFlag

__all__ = [
    "CriticData",
    "CriticFit",
    "WindowCollector",
    "WindowLoss",
    "critic_metrics",
    "critic_targets",
    "differentiate_window",
    "feature_width",
    "fit_critic",
    "step_actor",
]

# The window's statistics pooled in the critic's first minibatch all-reduce, by position.
WINDOW_SUMS: Final = (
    "value_sum",
    "target_sum",
    "entries",
    "residual_sum",
    "residual_square_sum",
    "valid_target_sum",
    "valid_target_square_sum",
    "valid_entries",
)
# The actor's statistics reduced with its gradient: APG's and the window's cut rows.
ACTOR_SUMS: Final = (*POLICY_STATISTICS, "cut_rows")

ValueOf = Callable[[TensorDict], Tensor]
"""A critic's ``V(obs)`` of a batch of observations, shaped as the batch."""


@runtime_checkable
class WindowCollector(Protocol):
    """What a window's update rolls it out with: a differentiable collector."""

    def collect(
        self, policy: DifferentiablePolicy, *, num_steps: int, iteration: int
    ) -> DifferentiableRollout:
        """Step the env ``num_steps`` times with ``policy``, keeping the graph."""
        ...

    def detach_state(self) -> Obs:
        """Cut the graph at the current state (a window's end)."""
        ...


def policy_features(owner: str, policy: nn.Module) -> Callable[[TensorDict], Tensor]:
    """``policy.features``, the critic's input (normalised as the policy sees it).

    Raises:
        ConfigError: The policy has no ``features(obs)``; the message names ``owner``.
    """
    features = getattr(policy, "features", None)
    if not callable(features):
        raise ConfigError(
            f"{owner} needs a policy with features(obs) (the critic's input, normalised as "
            f"the policy sees it), got {type(policy).__name__}"
        )
    return cast("Callable[[TensorDict], Tensor]", features)


def feature_width(owner: str, policy: nn.Module, observation: TensorDict) -> int:
    """Width of ``policy.features(observation)``: the critic's input for this policy.

    Raises:
        ConfigError: The policy has no ``features(obs)``; the message names ``owner``.
    """
    features = policy_features(owner, policy)
    with torch.no_grad():
        return int(features(observation).shape[-1])


@runtime_checkable
class CriticSettings(Protocol):
    """The critic's optimisation fields SHAC's and AHAC's configs share."""

    @property
    def critic_learning_rate(self) -> float: ...
    @property
    def critic_betas(self) -> tuple[float, float]: ...
    @property
    def critic_learning_rate_schedule(self) -> DecaySchedule: ...
    @property
    def critic_min_learning_rate(self) -> float: ...
    @property
    def critic_max_grad_norm(self) -> float | None: ...


def critic_step(
    critic: nn.Module,
    config: CriticSettings,
    *,
    dist: Distributed,
    planned_updates: int | None,
) -> tuple[Optimizer, LambdaLR, GradientStep]:
    """Rank 0's critic weights on every rank, then the critic's Adam, schedule and gradient step.

    SHAC's critic and AHAC's double critic start the same on every rank and
    step the same way: Adam over all their parameters, the config's schedule
    over ``planned_updates``, and one rank-averaged, clipped gradient step.
    """
    parameters = list(critic.parameters())
    if dist.world_size > 1:
        with torch.no_grad():
            for tensor in parameters:
                tensor.copy_(dist.broadcast(tensor.detach().clone(), src=0))
    optimizer = build_optimizer(
        parameters,
        name="adam",
        learning_rate=config.critic_learning_rate,
        betas=config.critic_betas,
    )
    scheduler = build_scheduler(
        optimizer,
        schedule=config.critic_learning_rate_schedule,
        planned_updates=planned_updates,
        learning_rate=config.critic_learning_rate,
        min_learning_rate=config.critic_min_learning_rate,
    )
    kernel = GradientStep(
        parameters, optimizer, dist=dist, max_grad_norm=config.critic_max_grad_norm
    )
    return optimizer, scheduler, kernel


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class WindowLoss:
    """The actor's loss of one window, and the window's ends it was built from."""

    loss: Float[Tensor, ""]
    """``-(objective + entropy_coef * entropy)``, backpropagated."""
    objective: Float[Tensor, ""]
    """The window's discounted return with its bootstraps, per row."""
    entropy: Float[Tensor, ""]
    """The valid steps' summed entropy, per row."""
    cut: RolloutFlag
    """Rows cut at the step for an exploded observation (valid steps only)."""
    terminated: RolloutFlag
    """Terminated or cut."""
    truncated: RolloutFlag
    """Truncated and neither terminated nor cut (bootstrapped from the terminal observation)."""


def differentiate_window(
    collector: WindowCollector,
    policy: nn.Module,
    *,
    num_steps: int,
    iteration: int,
    value: ValueOf,
    actor: APGConfig,
    observation_limit: float,
    kernel: GradientStep,
    dist: Distributed,
) -> tuple[DifferentiableRollout, WindowLoss]:
    """Roll a window out, build the actor loss ended by ``value``, backpropagate, cut the graph.

    The actor objective over a window of ``T`` steps from every row (DiffRL's
    ``compute_actor_loss``)::

        J = sum_t d_t r_t + sum_t [truncated_t] d_t gamma V(final_obs_t)
              + [row still running after the window] d_T V(s_T)

    with ``d`` starting at 1, multiplied by ``gamma`` each step and restarting
    at 1 after a done; a terminated (or cut) row bootstraps nothing. The loss is
    ``-(J / rows + entropy_coef * entropy / rows)``. The backward runs even
    for a non-finite loss (it frees the simulator's graph). A failure on any
    rank raises on every rank, with the kernel cleared.
    """
    gamma = actor.gamma
    kernel.clear()
    try:
        # The window: graph-preserving, continuing the env's running episodes.
        window = collector.collect(
            cast("DifferentiablePolicy", policy), num_steps=num_steps, iteration=iteration
        )
        rewards, valid = window.rewards, window.valid
        rows = rewards.shape[1]
        # A row whose observation exploded is cut like a termination (masked steps after a
        # cut are invalid, so they are not cut again).
        cut = exploded_rows(window.terminal_observations, observation_limit) & valid
        terminated = window.terminated | cut
        # A row both terminated and truncated at a step ended for good: no bootstrap.
        truncated = window.truncated & ~terminated
        done = terminated | truncated
        zero = torch.zeros((), dtype=rewards.dtype, device=rewards.device)
        safe_rewards = torch.where(cut | ~valid, zero, rewards)
        terminal_values = value(zero_rows(window.terminal_observations, cut | ~valid))
        # d_t: 1 at the window's start, times gamma each step, back to 1 after a done
        d, d_end = discount_weights(torch.ones_like(rewards[0]), done, gamma)
        # DiffRL compute_actor_loss: sum_t gamma^t r_t + [truncated_t] gamma^(t+1) V(s'_t)
        objective = (d * safe_rewards).sum() + (
            torch.where(truncated & valid, d * gamma * terminal_values, zero)
        ).sum()
        # ... + gamma^h V(s_h) for the rows still running after the window
        running = ~done[-1] & valid[-1]
        objective = objective + torch.where(running, d_end * terminal_values[-1], zero).sum()
        objective = objective / rows
        # A cut row's entropy counts no more than its reward: its episode ended there.
        entropy = torch.where(valid & ~cut, window.entropies, zero).sum() / rows
        loss = -(objective + actor.entropy_coef * entropy)
        # Backward (always, a non-finite loss too: it frees the simulator's graph).
        torch.autograd.backward(loss)
        collector.detach_state()
    except TypedRLError as error:
        # A bad env output on one rank stops every rank with its message, before the
        # update's all-reduce would wait for it; nothing of the update is kept.
        kernel.clear()
        raise_together(error, "collecting the rollouts", dist)
        raise
    except BaseException:
        kernel.clear()
        raise
    raise_together(None, "collecting the rollouts", dist)
    return window, WindowLoss(
        loss=loss,
        objective=objective,
        entropy=entropy,
        cut=cut,
        terminated=terminated,
        truncated=truncated,
    )


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ActorStep:
    """What :func:`step_actor` decided, with the update's metrics."""

    applied: bool
    """Whether the optimizer stepped (a finite gradient, not too large)."""
    metrics: dict[str, float]
    """The policy's metrics (identical on every rank)."""
    zero_gradients: int
    """How many of the run's first updates had a policy gradient of exactly 0."""
    extra: Tensor
    """The ``extra`` statistics, summed over the ranks (empty when none were given)."""


def step_actor(
    owner: str,
    window: DifferentiableRollout,
    loss: WindowLoss,
    *,
    actor: APGConfig,
    kernel: GradientStep,
    optimizer: Optimizer,
    scheduler: LambdaLR,
    counters: Counters,
    num_steps: int,
    zero_gradients: int,
    dist: Distributed,
    extra: Tensor | None = None,
) -> ActorStep:
    """Reduce, decide, clip and step the actor after a window's backward.

    One all-reduce averages the gradient per step and over the ranks, with the
    window's statistics (and ``extra``) summed over the ranks; the decision to
    skip is then the same on every rank: a non-finite gradient or loss (or a norm
    above ``skip_grad_norm_above``) skips the update, else the kernel clips the
    gradient to ``max_grad_norm``, steps the optimizer, and the schedule steps
    (it counts applied updates only).
    """
    statistics = policy_statistics(loss.loss, loss.objective, loss.entropy, window.adjoint)
    statistics["cut_rows"] = loss.cut.sum().to(torch.float64)
    device = kernel.parameters[0].device
    sums = torch.stack(
        [
            statistics.get(name, torch.zeros((), device=device)).to(torch.float64)
            for name in ACTOR_SUMS
        ]
    )
    if extra is not None:
        sums = torch.cat((sums, extra.to(torch.float64)))
    reduced = kernel.reduce(sums, scale=1.0 / num_steps)
    totals = dict(zip(ACTOR_SUMS, reduced.pooled[: len(ACTOR_SUMS)].tolist(), strict=True))
    grad_norm = float(reduced.norm)
    finite = math.isfinite(grad_norm) and math.isfinite(totals["loss"])
    large = (
        finite and actor.skip_grad_norm_above is not None and grad_norm > actor.skip_grad_norm_above
    )
    metrics = policy_metrics(
        totals,
        steps=num_steps,
        grad_norm=grad_norm,
        finite=finite,
        large=large,
        learning_rate=float(optimizer.param_groups[0]["lr"]),
        norm_max=(
            window.adjoint.norm_max.detach().to(torch.float64).clone()
            if window.adjoint is not None
            else None
        ),
        dist=dist,
    )
    # Every update reports its cuts, a skipped one too.
    metrics[TRAIN_CUT_ROWS] = totals["cut_rows"]
    zero_gradients = refuse_update(
        owner,
        totals=totals,
        grad_norm=grad_norm,
        finite=finite,
        config=actor,
        update=counters["applied"] + counters["skipped"],
        zero_gradients=zero_gradients,
        env_outputs=[(0, window.rewards.detach(), window.terminal_observations.detach())],
        dist=dist,
        cancel=kernel.clear,
    )
    pooled_extra = reduced.pooled[len(ACTOR_SUMS) :]
    if not finite or large:
        counters["skipped"] += 1
        kernel.skip()
        return ActorStep(
            applied=False, metrics=metrics, zero_gradients=zero_gradients, extra=pooled_extra
        )
    kernel.apply(reduced)
    counters["applied"] += 1
    scheduler.step()
    return ActorStep(
        applied=True, metrics=metrics, zero_gradients=zero_gradients, extra=pooled_extra
    )


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CriticData:
    """A detached window made into the critic's regression data."""

    features: Float[Tensor, "batch feature"]
    """The critic's inputs, one row per (step, env row)."""
    targets: Float[Tensor, " batch"]
    """What the critic regresses on (standardised when returns are normalised)."""
    mask: Bool[Tensor, " batch"]
    """The valid samples."""
    window_sums: Float[Tensor, " statistic"]
    """This rank's :data:`WINDOW_SUMS`."""


def critic_targets(
    window: DifferentiableRollout,
    loss: WindowLoss,
    *,
    features_of: Callable[[TensorDict], Tensor],
    bootstrap: ValueOf,
    current: ValueOf,
    gamma: float,
    gae_lambda: float,
    return_normalizer: RunningMeanStd | None,
    dist: Distributed,
) -> CriticData:
    """TD(lambda) targets of the detached window, with the statistics of the critic before its fit.

    ``bootstrap`` values the window's states and terminal states (SHAC's target
    critic, AHAC's double critic); ``current`` is the critic being fitted, whose
    error before the fit the explained variance reports. With a return
    normaliser, its statistics take in the targets (from every rank) and the
    critic trains on the standardised ones.
    """
    valid = window.valid
    observations = window.observations.detach()
    with torch.no_grad():
        features = features_of(observations.reshape(-1)).detach()
        values = bootstrap(observations)
        next_values = bootstrap(
            zero_rows(window.terminal_observations.detach(), loss.terminated | ~valid)
        )
        # DiffRL compute_target_values (td-lambda): G_t = r_t + gamma * ((1 - lambda)
        # V(s_{t+1}) + lambda G_{t+1}), cut by termination, bootstrapped on truncation
        _, targets = compute_gae(
            # A cut row's (possibly non-finite) reward and a ghost step's never count.
            rewards=torch.where(loss.cut | ~valid, 0.0, window.rewards.detach()),
            values=values,
            next_values=next_values,
            terminated=loss.terminated,
            truncated=loss.truncated,
            valid=valid,
            gamma=gamma,
            gae_lambda=gae_lambda,
        )
        flat_targets = targets.reshape(-1).to(features.dtype)
        mask = valid.reshape(-1)
        # The critic's error before its regression, on the valid samples.
        predicted = current(observations).reshape(-1)
        residual = torch.where(mask, flat_targets - predicted, 0.0)
        valid_targets = torch.where(mask, flat_targets, 0.0)
        window_sums = torch.stack(
            [
                values.sum(),
                flat_targets.sum(),
                torch.tensor(float(flat_targets.numel()), device=features.device),
                residual.sum(),
                residual.square().sum(),
                valid_targets.sum(),
                valid_targets.square().sum(),
                mask.sum(),
            ]
        ).to(torch.float64)
        if return_normalizer is not None:
            return_normalizer.update(flat_targets, dist=dist, mask=mask)
            # (G - mean) / std: the critic trains on standardised targets
            train_targets = return_normalizer.normalize(flat_targets)
        else:
            train_targets = flat_targets
    return CriticData(
        features=features,
        targets=train_targets,
        mask=mask,
        window_sums=window_sums,
    )


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CriticFit:
    """The critic's regression: its means over the applied minibatches, and the pooled sums."""

    loss: float
    """Mean loss over the applied minibatches (identical on every rank)."""
    grad_norm: float
    """Mean gradient norm over the applied minibatches."""
    window: list[float]
    """:data:`WINDOW_SUMS` summed over the ranks."""
    passes: int
    """Passes run (fewer than planned when the stop rule ended the fit)."""


SquaredError = Callable[[Tensor, Tensor], Tensor]
"""``(features [batch, feature], targets [batch]) -> [batch]``: each sample's squared error."""
StopRule = Callable[[Sequence[float]], bool]
"""Given every finished pass's mean loss (identical on every rank), whether to stop the fit."""


def fit_critic(
    data: CriticData,
    *,
    squared_error: SquaredError,
    kernel: GradientStep,
    sampler: torch.Generator,
    iterations: int,
    minibatches: int,
    stop: StopRule | None = None,
) -> CriticFit:
    """Minibatch regression of a critic, ``iterations`` passes of ``minibatches`` minibatches.

    Every pass reshuffles the samples with ``sampler`` and splits them into
    exactly ``minibatches`` minibatches on every rank (sizes differ by at most
    one), so that the ranks' gradient all-reduces always pair up. Each step
    follows the mean squared error over every rank's valid samples of its
    minibatch; the window's statistics ride along in the first all-reduce. A
    non-finite gradient, or a minibatch empty on every rank, skips its step on
    every rank alike. After each pass that took a step, ``stop`` sees the
    passes' mean losses, pooled over the ranks, so every rank stops after the
    same pass.
    """
    features, targets, mask, window_sums = data.features, data.targets, data.mask, data.window_sums
    samples = features.shape[0]
    total_loss = torch.zeros((), dtype=torch.float64, device=features.device)
    total_norm = torch.zeros((), dtype=torch.float64, device=features.device)
    pooled_window: Tensor | None = None
    steps = 0
    pass_losses: list[float] = []
    passes = 0
    for _ in range(iterations):
        passes += 1
        pass_loss = torch.zeros((), dtype=torch.float64, device=features.device)
        pass_steps = 0
        order = torch.randperm(samples, generator=sampler).to(features.device)
        for index in torch.tensor_split(order, minibatches):
            keep = mask[index].to(features.dtype)
            # Summed squared error here; divided by every rank's sample count in the
            # kernel, so the step follows the mean over all of this minibatch's valid
            # samples.
            squared = (squared_error(features[index], targets[index]) * keep).sum()
            kernel.clear()
            torch.autograd.backward(squared)
            minibatch = torch.stack([squared.detach().to(keep.dtype), keep.sum()])
            pooled = (
                torch.cat((window_sums.to(keep.dtype), minibatch))
                if pooled_window is None
                else minibatch
            )
            reduced: ReducedGradient = kernel.reduce(pooled, average="last_pooled")
            if pooled_window is None:
                pooled_window = reduced.pooled[: len(WINDOW_SUMS)]
            squared_sum, samples_seen = reduced.pooled[-2], reduced.pooled[-1]
            # A non-finite critic gradient (the same on every rank after the all-reduce),
            # or a minibatch empty on every rank, skips its step alike: critic and Adam
            # moments unchanged.
            if not bool(torch.isfinite(reduced.norm) & (samples_seen > 0)):
                kernel.skip()
                continue
            kernel.apply(reduced)
            minibatch_loss = (squared_sum / samples_seen.clamp(min=1.0)).to(torch.float64)
            total_loss += minibatch_loss
            total_norm += torch.nan_to_num(reduced.norm.detach().to(torch.float64), nan=0.0)
            steps += 1
            if stop is not None:
                pass_loss += minibatch_loss
                pass_steps += 1
        # A pass that skipped every step changed nothing and measured no loss: the stop
        # rule never sees it (a 0 would read as a settled loss). Every rank skips alike.
        if stop is not None and pass_steps:
            pass_losses.append(float(pass_loss) / pass_steps)
            if stop(pass_losses):
                break
    kernel.clear()
    window = pooled_window.tolist() if pooled_window is not None else window_sums.tolist()
    return CriticFit(
        loss=float(total_loss) / max(steps, 1),
        grad_norm=float(total_norm) / max(steps, 1),
        window=window,
        passes=passes,
    )


def critic_metrics(
    loss: float, grad_norm: float, window: Sequence[float], *, learning_rate: float
) -> dict[str, float]:
    """The critic's metrics of one update: its fit's means and the pooled window statistics."""
    sums_of = dict(zip(WINDOW_SUMS, window, strict=True))
    entries = max(sums_of["entries"], 1.0)
    valid_entries = max(sums_of["valid_entries"], 1.0)
    # Var[x] = E[x^2] - E[x]^2 over every rank's valid samples
    residual_variance = (
        sums_of["residual_square_sum"] / valid_entries
        - (sums_of["residual_sum"] / valid_entries) ** 2
    )
    target_variance = max(
        sums_of["valid_target_square_sum"] / valid_entries
        - (sums_of["valid_target_sum"] / valid_entries) ** 2,
        1e-8,
    )
    return {
        LOSS_CRITIC: loss,
        CRITIC_VALUE_MEAN: sums_of["value_sum"] / entries,
        CRITIC_TARGET_MEAN: sums_of["target_sum"] / entries,
        CRITIC_EXPLAINED_VARIANCE: 1.0 - residual_variance / target_variance,
        TRAIN_CRITIC_GRAD_NORM: grad_norm,
        TRAIN_CRITIC_LEARNING_RATE: learning_rate,
    }


def window_state(
    *,
    counters: Counters,
    critics: Mapping[str, SupportsStateDict],
    return_normalizer: RunningMeanStd | None,
    optimizers: dict[str, SupportsStateDict],
    schedulers: dict[str, SupportsStateDict],
    sampler: torch.Generator,
) -> AlgorithmState:
    """What a critic-bootstrapped algorithm (SHAC, AHAC) checkpoints.

    Its counters (``"algorithm"``), its critic modules under their names, the
    return normaliser when there is one, the optimizers and schedules, and the
    critic's minibatch sampler (per rank).
    """
    modules: dict[str, SupportsStateDict] = {"algorithm": counters, **critics}
    if return_normalizer is not None:
        modules["return_normalizer"] = return_normalizer
    return AlgorithmState(
        modules=modules,
        optimizers=optimizers,
        schedulers=schedulers,
        rank_local={"critic_sampler": GeneratorState(sampler)},
    )

"""PPO's update: one epoch of on-policy experience in, the policy's minibatch updates out.

The clipped loss of a minibatch (:func:`ppo_loss`) is a pure function, so that
``PPOConfig.compile`` hands it to :func:`torch.compile` whole.
"""

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import cast, final

import torch
from lightning_fabric import Fabric
from lightning_fabric.plugins.precision import MixedPrecision
from tensordict import TensorDict
from torch import Tensor, nn
from torch.optim import Optimizer

from typedrl.advantages import compute_gae
from typedrl.buffers import _shuffled_minibatches
from typedrl.distributed import Distributed
from typedrl.envs._spaces import new_tensordict
from typedrl.errors import NonFiniteError, StateError
from typedrl.logging import MetricAggregator
from typedrl.metrics import (
    LOSS_ENTROPY,
    LOSS_POLICY,
    LOSS_TOTAL,
    LOSS_VALUE,
    TRAIN_APPROX_KL,
    TRAIN_APPROXIMATE_BOOTSTRAP,
    TRAIN_CLIP_FRACTION,
    TRAIN_EXPLAINED_VARIANCE,
    TRAIN_GRAD_NORM,
    TRAIN_LEARNING_RATE,
    TRAIN_SKIPPED_UPDATES,
)
from typedrl.normalization import RewardNormalizer
from typedrl.ppo._collector import OBS_KEY, STATE_KEY, OnPolicyRollout, episode_boundary
from typedrl.ppo._config import PPOConfig
from typedrl.protocols import (
    ActorCritic,
    StatefulActorCritic,
    SupportsNormalizerUpdate,
    SupportsStateDict,
    TensorActorCritic,
)
from typedrl.training import GeneratorState, GradientStep, UpdateOutcome

__all__ = [
    "LOSS_STATISTICS",
    "MINIBATCH_METRICS",
    "PPO",
    "UPDATE_METRICS",
    "EpochData",
    "Evaluate",
    "PPOState",
    "masked_mean",
    "ppo_loss",
]

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


MINIBATCH_METRICS = (*LOSS_STATISTICS, TRAIN_GRAD_NORM, TRAIN_SKIPPED_UPDATES)
"""The statistics of every minibatch update, averaged over the epoch's minibatches."""
UPDATE_METRICS = (
    *MINIBATCH_METRICS,
    TRAIN_EXPLAINED_VARIANCE,
    TRAIN_APPROXIMATE_BOOTSTRAP,
    TRAIN_LEARNING_RATE,
)
"""Every metric :meth:`PPO.update` may return (``train/approximate_bootstrap`` only
for an env without terminal observations), in this order."""


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PPOState:
    """What :class:`PPO` checkpoints, by group (merged into the trainer's state)."""

    optimizers: dict[str, SupportsStateDict] = field(default_factory=dict)
    """The policy's optimizer, ``"policy"``."""
    rank_local: dict[str, SupportsStateDict] = field(default_factory=dict)
    """Per rank: the minibatch sampler, ``"sampler"``, and the reward normaliser,
    ``"reward_normalizer"`` (when rewards are normalised)."""


@final
class PPO:
    """Proximal policy optimisation's update (Schulman et al., 2017), on one rank of a run.

    :meth:`update` turns one epoch of experience
    (:class:`~typedrl.ppo.OnPolicyRollout`) into exactly
    ``num_minibatches`` minibatch updates of the policy (fewer only when
    ``target_kl`` stops the epoch, on every rank alike) and returns their
    rank-aggregated metrics. It owns what the update keeps between epochs: the
    optimizer (whose parameter group holds the learning rate in force, so a
    loaded checkpoint's rate is the one that continues), the reward normaliser
    and the minibatch sampler.

    The gradient of each minibatch goes through the shared update kernel
    (:class:`~typedrl.training.GradientStep`): DDP has averaged it
    during the backward, so the kernel measures, clips and applies it in
    place, without a collective of its own.

    Args:
        policy: The actor-critic (unwrapped; on the run's device): any module
            implementing :class:`~typedrl.protocols.ActorCritic`, evaluated
            through ``evaluate_tensors`` where it has the
            :class:`~typedrl.protocols.TensorActorCritic` fast path.
        config: The hyper-parameters.
        model: The policy as Fabric wrapped it (DDP with several ranks): put in
            training mode for the update and, with several ranks, evaluated
            through, so that DDP averages the gradients.
        optimizer: The policy's optimizer as Fabric wrapped it (its step goes
            through a gradient scaler where Fabric has one).
        fabric: The run's Fabric (backward, autocast, unscaling).
        dist: The ranks of the run.
        num_minibatches: Minibatches per epoch, agreed by every rank
            (``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``).
        sampler_seed: Seed of this rank's minibatch sampler.
    """

    def __init__(
        self,
        policy: nn.Module,
        config: PPOConfig,
        *,
        model: nn.Module,
        optimizer: Optimizer,
        fabric: Fabric,
        dist: Distributed,
        num_minibatches: int,
        sampler_seed: int,
    ) -> None:
        self.policy = policy
        self.config = config
        self.model = model
        self.optimizer = optimizer
        self.fabric = fabric
        self.dist = dist
        self.num_minibatches = num_minibatches
        device = fabric.device
        self.reward_normalizer = (
            RewardNormalizer(gamma=config.gamma, clip=config.reward_clip, device=device)
            if config.normalize_rewards
            else None
        )
        self.sampler = torch.Generator(device="cpu")
        """Draws each epoch's minibatch indices."""
        self.sampler.manual_seed(sampler_seed)
        precision = fabric.strategy.precision
        self._mixed = isinstance(precision, MixedPrecision)
        # A gradient scaler (float16 mixed precision) scales the loss: the gradients are
        # unscaled before they are measured and clipped, and the scaler's own step skips
        # overflowing updates and backs its scale off.
        self._scaler = getattr(precision, "scaler", None) if self._mixed else None
        # DDP must see `evaluate` through its forward to synchronise gradients; a single
        # process has nothing to synchronise and calls the policy directly (Fabric's
        # wrapper forwards attribute access to the policy).
        caller = model if dist.world_size > 1 else policy
        self._evaluate = _evaluate_of(policy, caller)
        self._stateful: StatefulActorCritic | None = (
            cast("StatefulActorCritic", caller) if isinstance(policy, StatefulActorCritic) else None
        )
        """A recurrent policy's ``evaluate_sequence`` caller: sequence minibatches."""
        # PPOConfig.compile (LeanRL's recipe): the loss, and through AOTAutograd its
        # backward pass, run as compiled kernels, cached by torch itself. The clipping and
        # the fused Adam step stay eager: on a CPU a compiled optimizer step was measured
        # slower than the fused kernel.
        self._ppo_loss = torch.compile(ppo_loss) if config.compile else ppo_loss
        self.gradient_step = GradientStep(
            [p for p in policy.parameters() if p.requires_grad],
            optimizer,
            dist=dist,
            max_grad_norm=config.max_grad_norm,
            synchronised=True,
            in_place=True,
        )
        """The update kernel: DDP has averaged the gradients, so it runs no collective and
        leaves them in place (measured per tensor, clipped in place: no packing copies)."""
        self.metrics = MetricAggregator(list(UPDATE_METRICS[:-1]), device=device)
        # One row of statistics per minibatch, recorded in one go after the loop.
        self._stats = torch.zeros(
            num_minibatches, len(MINIBATCH_METRICS), dtype=torch.float32, device=device
        )

    @property
    def learning_rate(self) -> float:
        """The learning rate in force: the optimizer's (a loaded checkpoint's continues)."""
        return float(self.optimizer.param_groups[0]["lr"])

    # ------------------------------------------------------------------ the update

    def update(self, rollout: OnPolicyRollout, *, env_steps: int, iteration: int) -> UpdateOutcome:
        """One PPO update on an epoch of experience; the outcome and its metrics.

        Step by step:

        1. The learning rate: the ``"linear"`` schedule sets
           ``learning_rate * (1 - env_steps / total_timesteps)`` (``env_steps``:
           the run's env steps before this epoch); ``"adaptive"`` keeps the rate
           its last minibatch left (step 5).
        2. Advantages (``_advantages``): rewards normalised (the normaliser
           first updated with this epoch's rewards), then GAE in unnormalised
           value space: termination zeroes the bootstrap, truncation
           bootstraps from ``V(final_obs)`` (``V(obs_t)`` for an env without
           terminal observations, logged as ``train/approximate_bootstrap``).
        3. The explained variance of the collected values over this rank's valid samples.
        4. ``num_minibatches`` minibatches of ``batch_size`` samples (shuffled
           per mini-epoch by :attr:`sampler`; for a recurrent policy, of
           ``batch_size / num_steps`` whole env columns, re-run by
           ``_sequence_minibatches``); for each: the clipped PPO loss
           (``ppo_loss``), its backward (DDP averages
           the gradients), the kernel's global gradient norm, then the
           optimizer step with the gradient clipped to ``max_grad_norm``, or
           nothing when the norm is not finite (``nonfinite_gradients="raise"``
           raises instead). With ``compile``, the loss and its backward pass are
           compiled.
        5. After each minibatch, the approximate KL averaged over the ranks
           adapts the learning rate (``"adaptive"``) and, above ``target_kl``,
           ends the epoch on every rank.
        6. After the update, the observation normalisers take this epoch's
           observations (so every log-probability of the epoch saw the same
           normalisation).
        7. The metrics (``UPDATE_METRICS``), reduced over the ranks. The
           update counts as applied when any minibatch stepped the optimizer.

        Args:
            rollout: The epoch, as :meth:`~typedrl.ppo.OnPolicyCollector.collect` returns it.
            env_steps: Env steps of the run before this epoch, over all ranks.
            iteration: The epoch's index (named in errors).

        Raises:
            StateError: The rollout does not split into ``num_minibatches`` minibatches.
            NonFiniteError: A non-finite gradient norm with ``nonfinite_gradients="raise"``.
        """
        config = self.config
        # 1. lr_k = lr_0 * (1 - steps_k / total) (cleanrl's annealing, per env step)
        if config.learning_rate_schedule == "linear":
            remaining = max(0.0, 1.0 - env_steps / config.total_timesteps)
            self._set_learning_rate(config.learning_rate * remaining)
        # 2. Advantages and value targets.
        advantages, returns = self._advantages(rollout)
        if rollout.approximate_bootstrap:
            self.metrics.add(TRAIN_APPROXIMATE_BOOTSTRAP, 1.0)
        flat = rollout.data.reshape(-1)
        valid: Tensor = flat["valid"]
        epoch = EpochData(
            obs=flat[OBS_KEY],
            action=flat["action"],
            log_prob=flat["log_prob"],
            value=flat["value"],
            # One host read per epoch: without ghost samples the loss skips its masks.
            valid=None if bool(valid.all()) else valid,
            advantage=advantages.reshape(-1),
            returns=returns.reshape(-1),
        )
        # 3. EV = 1 - Var[R - V] / Var[R] over this rank's valid samples
        residual_var = _masked_var(epoch.returns - epoch.value, valid)
        return_var = _masked_var(epoch.returns, valid)
        self.metrics.add(TRAIN_EXPLAINED_VARIANCE, 1.0 - residual_var / return_var.clamp(min=1e-8))
        # 4-5. The minibatch updates.
        self.model.train()
        minibatches = (
            self._sequence_minibatches(rollout, epoch, self._stateful)
            if self._stateful is not None
            else self._sample_minibatches(epoch)
        )
        stats = self._stats
        done = 0
        for batch, evaluate in minibatches:
            stop = self._minibatch_step(batch, evaluate, stats[done], iteration=iteration)
            done += 1
            if stop:
                break
        self.metrics.add_rows(MINIBATCH_METRICS, stats[:done])
        # 6. What follows the update.
        self._after_update(epoch, valid)
        # 7. The outcome.
        metrics = self.metrics.reduce(self.dist)
        metrics[TRAIN_LEARNING_RATE] = self.learning_rate
        return UpdateOutcome(applied=metrics[TRAIN_SKIPPED_UPDATES] < 1.0, metrics=metrics)

    def _plan(self, num_samples: int, batch_size: int, what: str) -> list[Tensor]:
        """This epoch's shuffled minibatch indices, checked against the agreed count."""
        # ceil(num_samples * num_mini_epochs / batch_size), exactly in integers.
        count = -(-num_samples * self.config.num_mini_epochs // batch_size)
        if count != self.num_minibatches:
            raise StateError(
                f"PPO.update: the epoch of {num_samples} {what} splits into "
                f"{count} minibatches of {batch_size}, expected the "
                f"{self.num_minibatches} every rank agreed on; pass rollouts of the "
                "collector PPO was built for"
            )
        return _shuffled_minibatches(num_samples, batch_size, count, self.sampler)

    def _sample_minibatches(self, epoch: EpochData) -> Iterator[tuple[EpochData, Evaluate]]:
        """Minibatches of ``batch_size`` samples drawn across steps and envs."""
        for indices in self._plan(epoch.advantage.shape[0], self.config.batch_size, "samples"):
            yield epoch.select(indices), self._evaluate

    def _sequence_minibatches(
        self, rollout: OnPolicyRollout, epoch: EpochData, policy: StatefulActorCritic
    ) -> Iterator[tuple[EpochData, Evaluate]]:
        """Minibatches of whole env columns for a recurrent policy (truncated BPTT).

        Each minibatch holds ``batch_size / num_steps`` env rows' complete
        rollouts; its evaluation re-runs the policy's core over the
        ``num_steps`` steps from the state stored at the rollout's start,
        restarting a row's state after each step at which it ended
        (:func:`~typedrl.ppo.episode_boundary`), so the gradient flows back
        through the whole rollout. The minibatch count equals the
        sample-wise one, ``ceil(num_envs * num_steps * num_mini_epochs /
        batch_size)``, since ``batch_size`` is a multiple of ``num_steps``.
        """
        data = rollout.data
        steps, num_envs = data.batch_size
        columns = self.config.batch_size // steps
        start_state: TensorDict = data[STATE_KEY][0]
        done = episode_boundary(data["terminated"], data["truncated"], data["valid"])
        for planned in self._plan(num_envs, columns, "env rows"):
            envs = planned.to(done.device, non_blocking=True)
            # Sample t * num_envs + i of the flat epoch is step t of env i.
            indices = (
                torch.arange(steps, device=done.device).unsqueeze(1) * num_envs + envs
            ).reshape(-1)
            batch = epoch.select(indices)
            yield (
                batch,
                _sequence_evaluate(policy, start_state[envs], done.index_select(1, envs), steps),
            )

    def _advantages(self, rollout: OnPolicyRollout) -> tuple[Tensor, Tensor]:
        """GAE over the epoch, ``[num_steps, num_envs]``, in unnormalised value space."""
        config, data = self.config, rollout.data
        values = data["value"]
        # V(obs_{t+1}): the next step's value, and after the last step V(obs_T).
        values_next = torch.cat((values[1:], rollout.last_value.unsqueeze(0)), dim=0)
        has_final = rollout.has_final_value.unsqueeze(1)
        # Truncated rows bootstrap from V(final_obs) (exact) or V(obs_t) (approximate).
        next_values = torch.where(data["truncated"] & has_final, data["final_value"], values_next)
        rewards = data["reward"]
        if self.reward_normalizer is not None:
            # r_t / sqrt(Var[G] + eps), G_t = gamma G_{t-1} + r_t (SB3's VecNormalize)
            self.reward_normalizer.update(
                rewards, data["terminated"], data["truncated"], dist=self.dist, mask=data["valid"]
            )
            rewards = self.reward_normalizer.normalize(rewards)
        # A_t = delta_t + gamma lambda (1 - done_t) A_{t+1} (Schulman et al., 2016, eq. 16)
        return compute_gae(
            rewards=rewards,
            values=values,
            next_values=next_values,
            terminated=data["terminated"],
            truncated=data["truncated"],
            valid=data["valid"],
            gamma=config.gamma,
            gae_lambda=config.gae_lambda,
        )

    def _minibatch_step(
        self, batch: EpochData, evaluate: Evaluate, stats_row: Tensor, *, iteration: int
    ) -> bool:
        """One PPO update on a minibatch; returns whether to stop the epoch (target KL).

        Writes the minibatch's statistics (:data:`MINIBATCH_METRICS`) into ``stats_row``.
        """
        kernel = self.gradient_step
        loss, stats = self._loss(batch, evaluate)
        kernel.clear()
        self.fabric.backward(loss)
        if self._scaler is not None:
            # Measure and clip the true gradients, not the loss-scaled ones.
            self.fabric.strategy.precision.unscale_gradients(self.optimizer)
        reduced = kernel.reduce()
        grad_norm = reduced.norm
        # The finiteness decision syncs once per minibatch; every rank sees the same
        # averaged gradient, so every rank decides alike.
        finite = math.isfinite(float(grad_norm))
        # With a scaler, its step skips a non-finite update itself and lowers the scale.
        if finite or self._scaler is not None:
            kernel.apply(reduced)
        else:
            kernel.skip()
        if not finite and self.config.nonfinite_gradients == "raise":
            raise NonFiniteError(
                f"PPOAgent: non-finite gradient norm ({float(grad_norm)}) in epoch "
                f"{iteration}; this minibatch updated nothing"
            )
        with torch.no_grad():
            stats_row[:-2].copy_(stats)
            stats_row[-2].copy_(grad_norm)
            stats_row[-1].copy_(~torch.isfinite(grad_norm))
        return self._adapt(stats[4])

    def _loss(self, batch: EpochData, evaluate: Evaluate) -> tuple[Tensor, Tensor]:
        """The PPO loss of a minibatch and its statistics (``ppo_loss``).

        Under mixed precision the loss runs in Fabric's autocast (a single process
        calls the policy directly, past the wrapper's forward that would apply it).
        """
        if self._mixed:
            with self.fabric.autocast():
                return self._ppo_loss(self.config, batch, evaluate)
        return self._ppo_loss(self.config, batch, evaluate)

    def _adapt(self, approx_kl: Tensor) -> bool:
        """Adaptive learning rate and target-KL stop, on the KL averaged over ranks."""
        config = self.config
        if config.learning_rate_schedule != "adaptive" and config.target_kl is None:
            return False
        kl = (
            float(self.dist.all_reduce_sum(approx_kl.reshape(1).double())[0]) / self.dist.world_size
        )
        if config.learning_rate_schedule == "adaptive":
            # rsl_rl's rule: shrink the step when KL overshoots, grow it when it undershoots
            rate = self.learning_rate
            if kl > 2.0 * config.desired_kl:
                rate = max(config.min_learning_rate, rate / 1.5)
            elif 0.0 < kl < config.desired_kl / 2.0:
                rate = min(config.max_learning_rate, rate * 1.5)
            self._set_learning_rate(rate)
        return config.target_kl is not None and kl > config.target_kl

    def _set_learning_rate(self, rate: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = rate

    def _after_update(self, epoch: EpochData, valid: Tensor) -> None:
        """The observation normalisers take the epoch's valid observations.

        Only after the update, so that every log-probability of this epoch
        (collection and update alike) saw the same normalisation.
        """
        if isinstance(self.policy, SupportsNormalizerUpdate):
            self.policy.update_normalizers(epoch.obs, dist=self.dist, mask=valid)

    # ------------------------------------------------------------------ checkpoints

    def state(self) -> PPOState:
        """The optimizer, the sampler and the reward normaliser, under their checkpoint names."""
        rank_local: dict[str, SupportsStateDict] = {"sampler": GeneratorState(self.sampler)}
        if self.reward_normalizer is not None:
            rank_local["reward_normalizer"] = self.reward_normalizer
        return PPOState(optimizers={"policy": self.optimizer}, rank_local=rank_local)


def _evaluate_of(policy: nn.Module, caller: nn.Module) -> Evaluate:
    """``caller``'s ``(obs, action) -> (log_prob, entropy, value)``; ``caller`` wraps ``policy``.

    The policy's ``evaluate_tensors`` where it has the fast path
    (:class:`~typedrl.protocols.TensorActorCritic`), else its ``evaluate``
    with the TensorDict's entries taken out.
    """
    if isinstance(policy, TensorActorCritic):
        return cast("TensorActorCritic", caller).evaluate_tensors
    actor_critic = cast("ActorCritic", caller)

    def evaluate(obs: TensorDict, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        scored = actor_critic.evaluate(obs, action)
        return scored["log_prob"], scored["entropy"], scored["value"]

    return evaluate


def _sequence_evaluate(
    policy: StatefulActorCritic, start_state: TensorDict, done: Tensor, steps: int
) -> Evaluate:
    """``(obs, action) -> (log_prob, entropy, value)`` over a minibatch of whole env columns.

    The minibatch's samples are time-major (``t * columns + j``); the policy
    re-runs them as ``[steps, columns]`` from ``start_state`` with ``done``.
    """

    def evaluate(obs: TensorDict, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        columns = action.shape[0] // steps
        log_prob, entropy, value = policy.evaluate_sequence(
            obs.reshape(steps, columns),
            action.reshape(steps, columns, *action.shape[1:]),
            start_state,
            done,
        )
        return log_prob.reshape(-1), entropy.reshape(-1), value.reshape(-1)

    return evaluate


def _masked_var(x: Tensor, mask: Tensor) -> Tensor:
    mean = masked_mean(x, mask)
    return masked_mean((x - mean).square(), mask)

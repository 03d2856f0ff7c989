"""AHAC: adaptive-horizon actor-critic, SHAC with a learnt window and a double critic.

Georgiev et al., "Adaptive Horizon Actor-Critic for Policy Learning in
Contact-Rich Differentiable Simulation" (ICML 2024), and its reference code,
the authors' fork of DiffRL (``algorithms/ahac.py``). Each update
differentiates a window of the env as SHAC does, but the window's length
follows a dual ascent on the env's contact forces
(:class:`~typedrl.ahac.AdaptiveHorizon`), the window ends with the minimum of
two critics instead of a target critic, and the critics' regression stops once
its loss stops moving. :meth:`AHAC.update` is one iteration, top to bottom; it
shares its steps with :meth:`~typedrl.shac.SHAC.update`.
"""

from collections.abc import Sequence
from typing import final

import torch
from jaxtyping import Float
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.ahac._config import AHACConfig
from typedrl.ahac._horizon import AdaptiveHorizon
from typedrl.apg._algorithm import AlgorithmState, actor_step
from typedrl.distributed import Distributed
from typedrl.episodes import EpochEpisodes
from typedrl.errors import EnvContractError
from typedrl.metrics import (
    AHAC_CONTACT_NORM,
    AHAC_CRITIC_PASSES,
    AHAC_HORIZON,
    AHAC_HORIZON_VALUE,
    AHAC_MULTIPLIER,
)
from typedrl.normalization import RunningMeanStd
from typedrl.policies import build_mlp
from typedrl.protocols import SupportsNormalizerUpdate
from typedrl.shac._window import (
    WindowCollector,
    critic_metrics,
    critic_step,
    critic_targets,
    differentiate_window,
    feature_width,
    fit_critic,
    policy_features,
    step_actor,
    window_state,
)
from typedrl.training import Counters
from typedrl.training._update import UpdateOutcome

__all__ = ["AHAC", "DoubleCritic", "loss_has_settled"]


@final
class DoubleCritic(nn.Module):
    """Two critics of the same shape; ``V(f) = min(V_1(f), V_2(f))``.

    The reference's ``DoubleCriticMLP``: its ``forward`` is the minimum, its
    ``predict`` both values (:meth:`both`), which the regression fits together.

    Args:
        first: The first critic, ``features -> [batch, 1]``.
        second: The second critic, of the same shape.
    """

    def __init__(self, first: nn.Module, second: nn.Module) -> None:
        super().__init__()
        self.first = first
        self.second = second

    def both(self, features: Float[Tensor, "batch feature"]) -> Float[Tensor, "batch 2"]:
        """``[V_1(f), V_2(f)]`` per row."""
        return torch.cat((self.first(features), self.second(features)), dim=-1)

    def forward(self, features: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        """``min(V_1(f), V_2(f))`` per row."""
        value: Tensor = self.both(features).amin(dim=-1)
        return value


def loss_has_settled(losses: Sequence[float], *, passes: int, tolerance: float) -> bool:
    """The reference's early stop of the critic's fit, after each pass.

    ``losses`` holds every finished pass's mean loss, the last one included. The
    fit stops once ``|mean(diff(the passes losses before the last))| < tolerance``:
    the authors' ``AHAC.train`` keeps a ``deque(maxlen=5)`` of the earlier
    passes' losses and tests it before appending the pass just run.

    Example:
        >>> loss_has_settled([9.0, 5.0, 4.0, 3.9, 3.8, 3.75], passes=5, tolerance=0.2)
        False
        >>> loss_has_settled([5.0, 4.0, 3.9, 3.8, 3.75, 3.7, 3.6], passes=5, tolerance=0.2)
        True
    """
    if len(losses) <= passes:
        return False
    earlier = losses[-passes - 1 : -1]
    # np.diff(last_losses).mean(): the mean change from one pass to the next
    mean_change = (earlier[-1] - earlier[0]) / (passes - 1)
    return abs(mean_change) < tolerance


@final
class AHAC:
    """Adaptive-horizon actor-critic: a window of ``round(H)`` steps, one actor step, a critic fit.

    The actor's objective, its backward, clipping, skipping and step are
    SHAC's (:class:`~typedrl.shac.SHAC`), over a window of ``round(H)`` steps
    and ended by the double critic ``min(V_1, V_2)`` (there is no target
    critic). The horizon ``H`` and its multiplier follow
    :class:`~typedrl.ahac.AdaptiveHorizon` from the contact-force norms the
    env reports (:class:`~typedrl.protocols.SupportsContactForces`), averaged
    per step over every rank's valid rows in the actor's all-reduce, so every
    rank takes the same step and the next windows have the same length on every
    rank.

    After each applied actor update both critics are regressed on the window's
    TD(lambda) targets (computed with the double critic before the fit), for
    at most ``critic_iterations`` passes of ``critic_minibatches`` shuffled
    minibatches, minimising the mean over the two critics of the squared error
    (the reference's ``compute_critic_loss`` over ``predict``); the fit stops
    early by :func:`loss_has_settled` on the passes' losses pooled over the
    ranks.

    Args:
        policy: The differentiable policy; it must have ``features(obs)``.
        config: AHAC's hyper-parameters.
        dist: The ranks whose gradients are averaged.
        planned_updates: Updates the run plans (for decaying schedules).
        seed: Seed of this rank's minibatch sampler.
        feature_width: Width of ``policy.features(obs)`` (the critics' input).
        normalize_observations: Update the policy's observation normaliser after
            each applied update, from the window's valid rows.
    """

    def __init__(
        self,
        policy: nn.Module,
        config: AHACConfig,
        *,
        dist: Distributed,
        planned_updates: int | None,
        seed: int,
        feature_width: int,
        normalize_observations: bool = False,
    ) -> None:
        features = policy_features("AHAC", policy)
        self.policy = policy
        self.config = config
        self.dist = dist
        self.normalize_observations = normalize_observations
        self.parameters = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer, self.scheduler, self.kernel = actor_step(
            self.parameters, config.actor, dist=dist, planned_updates=planned_updates
        )
        self.counters = Counters("applied", "skipped")
        self._zero_gradients = 0
        parameter = next(iter(policy.parameters()))
        critic = DoubleCritic(
            *(
                build_mlp(
                    feature_width,
                    config.critic_hidden,
                    1,
                    activation=config.critic_activation,
                    layer_norm=config.critic_layer_norm,
                )
                for _ in range(2)
            )
        ).to(device=parameter.device, dtype=parameter.dtype)
        self.critic_optimizer, self.critic_scheduler, self.critic_kernel = critic_step(
            critic, config, dist=dist, planned_updates=planned_updates
        )
        self.critic = critic
        self.return_normalizer = (
            RunningMeanStd((), clip=None).to(parameter.device) if config.normalize_returns else None
        )
        self.horizon = AdaptiveHorizon(
            minimum=config.horizon_min,
            maximum=config.horizon_max,
            threshold=config.contact_threshold,
            learning_rate=config.horizon_learning_rate,
            schedule=config.horizon_learning_rate_schedule,
            min_learning_rate=config.horizon_min_learning_rate,
            planned_updates=planned_updates,
        )
        self.sampler = torch.Generator(device="cpu").manual_seed(seed)
        self._features = features

    @staticmethod
    def feature_width(policy: nn.Module, observation: TensorDict) -> int:
        """Width of ``policy.features(observation)``: the critics' input for this policy.

        Raises:
            ConfigError: The policy has no ``features(obs)``.
        """
        return feature_width("AHAC", policy, observation)

    def value(self, observations: TensorDict) -> Tensor:
        """``min(V_1(obs), V_2(obs))`` of a batch of observations, unscaled."""
        batch = observations.batch_size
        values: Tensor = self.critic(self._features(observations.reshape(-1)))
        if self.return_normalizer is not None:
            values = self.return_normalizer.denormalize(values)
        return values.reshape(batch)

    def update(
        self, collector: WindowCollector, *, iteration: int = 0
    ) -> tuple[UpdateOutcome, EpochEpisodes]:
        """One AHAC iteration: a window of ``round(H)`` steps, an actor step, the horizon, a fit.

        1. Roll out a window of ``round(H)`` steps through the differentiable env
           (the collector keeps the graph and records each step's contact-force
           norms; a failure on any rank raises on every rank).
        2. Actor loss: minus the window's discounted return plus ``gamma^h`` times
           the double critic's value where each row's window or episode stops
           (the reference's ``compute_actor_loss``), plus the entropy bonus.
        3. Backward through the env's dynamics, then cut the graph.
        4. Clip: one all-reduce averages the gradient over the ranks with the
           window's statistics and each step's contact-norm sums and row counts;
           a non-finite gradient or loss (or a norm above
           ``skip_grad_norm_above``) skips the update on every rank alike, else
           the gradient is clipped to ``max_grad_norm``.
        5. Step the actor's optimizer and its learning-rate schedule.
        6. Dual ascent on the horizon from each step's mean contact norm over
           every rank's valid rows (identical on every rank after step 4).
        7. The critics' regression on the detached window's TD(lambda) targets
           (from the double critic before the fit), until the loss settles or
           ``critic_iterations`` passes; then the observation normaliser takes
           in the window's valid rows.

        Steps 5-7 run only for an applied update.

        Args:
            collector: Rolls the window out (the trainer's
                :class:`~typedrl.apg.DifferentiableCollector`, recording contacts).
            iteration: The trainer's iteration, named in error messages.

        Returns:
            Whether the update was applied with its metrics (identical on every
            rank), and the episodes that ended in the window.

        Raises:
            NonFiniteError: With ``actor.nonfinite="raise"``, on a non-finite update.
            EnvContractError: The window carries no contact norms (the collector
                was not asked to record them), or the policy gradient was
                exactly 0 on each of the run's first updates.
        """
        config, dist, horizon = self.config, self.dist, self.horizon
        num_steps = horizon.steps
        # 1-3. The window of round(H) steps, the loss ended by min(V_1, V_2), backward.
        window, loss = differentiate_window(
            collector,
            self.policy,
            num_steps=num_steps,
            iteration=iteration,
            value=self.value,
            actor=config.actor,
            observation_limit=config.observation_limit,
            kernel=self.kernel,
            dist=dist,
        )
        contacts = window.contact_norms
        if contacts is None:
            self.kernel.clear()
            raise EnvContractError(
                "AHAC needs each step's contact-force norms in the window, got none: build the "
                "DifferentiableCollector with record_contacts=True on an env with "
                "SupportsContactForces"
            )
        # Per step: the valid rows' contact norms summed, and their count.
        counted = window.valid & ~loss.cut
        zero = torch.zeros((), dtype=contacts.dtype, device=contacts.device)
        contact_sums = torch.where(counted, contacts, zero).sum(dim=1)
        contact_counts = counted.sum(dim=1).to(contacts.dtype)
        # 4-5. Clip, decide on every rank alike, step; the contact sums ride along.
        step = step_actor(
            "AHAC",
            window,
            loss,
            actor=config.actor,
            kernel=self.kernel,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            counters=self.counters,
            num_steps=num_steps,
            zero_gradients=self._zero_gradients,
            dist=dist,
            extra=torch.cat((contact_sums, contact_counts)),
        )
        self._zero_gradients = step.zero_gradients
        metrics = step.metrics
        # One copy to the host: each step's contact-norm sum and row count over every rank.
        pooled = step.extra.tolist()
        pooled_sums, pooled_counts = pooled[:num_steps], pooled[num_steps:]
        # c_t: each step's mean contact norm over every rank's valid rows
        contact_means = [
            total / max(count, 1.0) for total, count in zip(pooled_sums, pooled_counts, strict=True)
        ]
        metrics[AHAC_HORIZON] = float(num_steps)
        metrics[AHAC_CONTACT_NORM] = sum(pooled_sums) / max(sum(pooled_counts), 1.0)
        if not step.applied:
            metrics[AHAC_HORIZON_VALUE] = horizon.horizon
            metrics[AHAC_MULTIPLIER] = horizon.multiplier
            return UpdateOutcome(applied=False, metrics=metrics), window.episodes
        # 6. lambda_t <- lambda - alpha (C - c_t); H <- clip(H + alpha sum_t lambda_t)
        horizon.update(contact_means)
        metrics[AHAC_HORIZON_VALUE] = horizon.horizon
        metrics[AHAC_MULTIPLIER] = horizon.multiplier
        # 7. The critics' targets from the double critic, then their regression.
        data = critic_targets(
            window,
            loss,
            features_of=self._features,
            bootstrap=self.value,
            current=self.value,
            gamma=config.actor.gamma,
            gae_lambda=config.gae_lambda,
            return_normalizer=self.return_normalizer,
            dist=dist,
        )
        critic_learning_rate = float(self.critic_optimizer.param_groups[0]["lr"])
        tolerance = config.critic_stop_tolerance
        fit = fit_critic(
            data,
            squared_error=self._squared_error,
            kernel=self.critic_kernel,
            sampler=self.sampler,
            iterations=config.critic_iterations,
            minibatches=config.critic_minibatches,
            stop=(
                None
                if tolerance is None
                else lambda losses: loss_has_settled(
                    losses, passes=config.critic_stop_passes, tolerance=tolerance
                )
            ),
        )
        self.critic_scheduler.step()
        if self.normalize_observations and isinstance(self.policy, SupportsNormalizerUpdate):
            self.policy.update_normalizers(
                window.observations.detach().reshape(-1), dist=dist, mask=data.mask
            )
        metrics.update(
            critic_metrics(fit.loss, fit.grad_norm, fit.window, learning_rate=critic_learning_rate)
        )
        metrics[AHAC_CRITIC_PASSES] = float(fit.passes)
        return UpdateOutcome(applied=True, metrics=metrics), window.episodes

    def _squared_error(self, features: Tensor, targets: Tensor) -> Tensor:
        """Each sample's squared error, averaged over the two critics.

        The reference's ``((predict(obs) - G) ** 2).mean()``.
        """
        predictions = self.critic.both(features)
        return (predictions - targets.unsqueeze(-1)).square().mean(dim=-1)

    # ------------------------------------------------------------------ state

    def state(self) -> AlgorithmState:
        """Policy optimizer and schedule, the double critic and theirs, the horizon, the sampler."""
        return window_state(
            counters=self.counters,
            critics={"critic": self.critic, "horizon": self.horizon},
            return_normalizer=self.return_normalizer,
            optimizers={"policy": self.optimizer, "critic": self.critic_optimizer},
            schedulers={"policy": self.scheduler, "critic": self.critic_scheduler},
            sampler=self.sampler,
        )

"""SHAC: short-horizon actor-critic, the critic-bootstrapped sibling of APG.

Xu et al., "Accelerated Policy Learning with Parallel Differentiable
Simulation" (ICLR 2022), and its reference code, DiffRL
(``algorithms/shac.py``). Each update differentiates a short window of the
env's dynamics, ended by the target critic's value of the state where the
window (or the episode) stops; the critic is then regressed on TD(lambda)
targets of the detached window, and the target critic follows it by Polyak
averaging. :meth:`SHAC.update` is one iteration, top to bottom.
"""

import copy
from typing import final

import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.apg._algorithm import AlgorithmState, actor_step
from typedrl.distributed import Distributed
from typedrl.episodes import EpochEpisodes
from typedrl.normalization import RunningMeanStd
from typedrl.policies import build_mlp
from typedrl.protocols import SupportsNormalizerUpdate
from typedrl.shac._config import SHACConfig
from typedrl.shac._window import (
    WINDOW_SUMS,
    CriticData,
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

__all__ = ["SHAC", "WindowCollector"]


@final
class SHAC:
    """Short-horizon actor-critic: one window, one actor step, one critic regression per update.

    Actor objective over a window of ``T`` steps from every row (windows
    continue episodes; they do not reset the env)::

        J = sum_t d_t r_t + sum_t [truncated_t] d_t gamma V'(final_obs_t)
              + [row still running after the window] d_T V'(s_T)

    with ``d`` starting at 1, multiplied by ``gamma`` each step and restarting at 1
    after a done; a terminated row bootstraps nothing. ``V'`` is the target
    critic: the gradient reaches every action of the window through the dynamics
    and through ``V'``'s input, while ``V'``'s own parameters never train on it. A
    row whose observation turns non-finite or exceeds ``observation_limit`` is
    cut like a termination and counted (``train/cut_rows``, summed over ranks, on
    applied and skipped updates alike). The trainer's collector then masks the
    row until the env resets it (see
    :class:`~typedrl.apg.DifferentiableCollector`'s ``observation_limit``): its
    steps are invalid, so they add nothing to the objective, the bootstrap, the
    entropy or the critic's targets.

    After each applied actor update the critic is regressed, for
    ``critic_iterations`` passes of ``critic_minibatches`` shuffled minibatches,
    on TD(lambda) targets of the detached window computed with the target critic
    (:func:`~typedrl.advantages.compute_gae`'s recursion: termination cuts,
    truncation bootstraps from the terminal observation's value); its gradients
    are averaged across ranks, and its metrics (loss, value and target means,
    explained variance of the critic before the regression) are pooled over the
    ranks in the same all-reduces, so they are identical on every rank. Then
    ``theta' <- alpha * theta' + (1 - alpha) * theta``.

    The critic sees the policy's features (``policy.features``): the same
    observation normalisation, frozen within a window.

    Args:
        policy: The differentiable policy; it must have ``features(obs)``.
        config: SHAC's hyper-parameters.
        dist: The ranks whose gradients are averaged.
        planned_updates: Updates the run plans (for decaying schedules).
        seed: Seed of this rank's minibatch sampler.
        feature_width: Width of ``policy.features(obs)`` (the critic's input).
        normalize_observations: Update the policy's observation normaliser
            (``policy.update_normalizers``) after each applied update, from the
            window's valid rows.

    Example:
        >>> from typedrl.distributed import SingleProcess
        >>> from typedrl.testing import LinearDifferentiablePolicy
        >>> SHAC(
        ...     LinearDifferentiablePolicy(obs_dim=1, act_dim=1),
        ...     SHACConfig(),
        ...     dist=SingleProcess(),
        ...     planned_updates=None,
        ...     seed=0,
        ...     feature_width=1,
        ... )
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: SHAC needs a policy with features(obs) (the critic's \
input, normalised as the policy sees it), got LinearDifferentiablePolicy
    """

    def __init__(
        self,
        policy: nn.Module,
        config: SHACConfig,
        *,
        dist: Distributed,
        planned_updates: int | None,
        seed: int,
        feature_width: int,
        normalize_observations: bool = False,
    ) -> None:
        features = policy_features("SHAC", policy)
        actor = config.actor
        self.policy = policy
        self.config = config
        self.dist = dist
        self.normalize_observations = normalize_observations
        self.parameters = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer, self.scheduler, self.kernel = actor_step(
            self.parameters, actor, dist=dist, planned_updates=planned_updates
        )
        self.counters = Counters("applied", "skipped")
        # How many of the run's first updates had a policy gradient of exactly 0.
        self._zero_gradients = 0
        parameter = next(iter(policy.parameters()))
        critic = build_mlp(
            feature_width,
            config.critic_hidden,
            1,
            activation=config.critic_activation,
            layer_norm=config.critic_layer_norm,
        ).to(device=parameter.device, dtype=parameter.dtype)
        self.critic_optimizer, self.critic_scheduler, self.critic_kernel = critic_step(
            critic, config, dist=dist, planned_updates=planned_updates
        )
        self.critic = critic
        self.target_critic = copy.deepcopy(critic)
        # The actor's loss goes through the target critic, which never trains on it.
        self.target_critic.requires_grad_(requires_grad=False)
        self.return_normalizer = (
            RunningMeanStd((), clip=None).to(parameter.device) if config.normalize_returns else None
        )
        self.sampler = torch.Generator(device="cpu").manual_seed(seed)
        self._features = features

    @staticmethod
    def feature_width(policy: nn.Module, observation: TensorDict) -> int:
        """Width of ``policy.features(observation)``: the critic's input for this policy.

        Raises:
            ConfigError: The policy has no ``features(obs)``.
        """
        return feature_width("SHAC", policy, observation)

    def value(self, observations: TensorDict, *, target: bool = True) -> Tensor:
        """``V(obs)`` of a batch of observations (the target critic by default), unscaled."""
        batch = observations.batch_size
        flat = observations.reshape(-1)
        network = self.target_critic if target else self.critic
        values: Tensor = network(self._features(flat)).squeeze(-1)
        if self.return_normalizer is not None:
            values = self.return_normalizer.denormalize(values)
        return values.reshape(batch)

    def update(
        self, collector: WindowCollector, *, num_steps: int, iteration: int = 0
    ) -> tuple[UpdateOutcome, EpochEpisodes]:
        """One SHAC iteration: a window, an actor step, a critic regression, a target update.

        1. Roll out a window of ``num_steps`` steps through the differentiable env
           (the collector keeps the graph; a failure on any rank raises on every rank).
        2. Actor loss: minus the window's discounted return plus ``gamma^h`` times
           the target critic's value where each row's window or episode stops
           (DiffRL's ``compute_actor_loss``), plus the entropy bonus.
        3. Backward through the env's dynamics, then cut the graph
           (``detach_state``): the next window starts graph-free.
        4. Clip: one all-reduce averages the gradient over the ranks with the
           window's statistics; a non-finite gradient or loss (or a norm above
           ``skip_grad_norm_above``) skips the update on every rank alike, else the
           gradient is clipped to ``max_grad_norm``.
        5. Step the actor's optimizer and its learning-rate schedule.
        6. Critic regression on the detached window's TD(lambda) targets, for
           ``critic_iterations`` passes of ``critic_minibatches`` minibatches.
        7. Polyak target update, ``theta' <- alpha * theta' + (1 - alpha) * theta``;
           then the observation normaliser takes in the window's valid rows (every
           forward of the update saw the same normalisation).

        Steps 5-7 run only for an applied update.

        Args:
            collector: Rolls the window out (the trainer's
                :class:`~typedrl.apg.DifferentiableCollector`).
            num_steps: The window's length (the trainer's ``segment_length``).
            iteration: The trainer's iteration, named in error messages.

        Returns:
            Whether the update was applied with its metrics (identical on every
            rank), and the episodes that ended in the window.

        Raises:
            NonFiniteError: With ``actor.nonfinite="raise"``, on a non-finite update.
            EnvContractError: The policy gradient was exactly 0 on each of the
                run's first updates (the objective does not depend on the actions).
        """
        config, dist = self.config, self.dist
        # 1-3. The window, the actor loss ended by the target critic, backward, detach.
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
        # 4-5. Clip, decide on every rank alike, step the optimizer and its schedule.
        step = step_actor(
            "SHAC",
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
        )
        self._zero_gradients = step.zero_gradients
        metrics = step.metrics
        if not step.applied:
            return UpdateOutcome(applied=False, metrics=metrics), window.episodes
        # 6. The critic's regression targets, from the detached window and the target critic.
        data = critic_targets(
            window,
            loss,
            features_of=self._features,
            bootstrap=self.value,
            current=lambda observations: self.value(observations, target=False),
            gamma=config.actor.gamma,
            gae_lambda=config.gae_lambda,
            return_normalizer=self.return_normalizer,
            dist=dist,
        )
        critic_learning_rate = float(self.critic_optimizer.param_groups[0]["lr"])
        # DiffRL: mean over the minibatch of (V(s) - G)^2, critic_iterations passes
        critic_loss, critic_norm, pooled = self._fit_critic(
            data.features, data.targets, data.mask, data.window_sums
        )
        self.critic_scheduler.step()
        # 7. theta' <- alpha * theta' + (1 - alpha) * theta (DiffRL's target_critic_alpha)
        with torch.no_grad():
            for target, source in zip(
                self.target_critic.parameters(), self.critic.parameters(), strict=True
            ):
                target.lerp_(source, 1.0 - config.target_alpha)
        if self.normalize_observations and isinstance(self.policy, SupportsNormalizerUpdate):
            self.policy.update_normalizers(
                window.observations.detach().reshape(-1), dist=dist, mask=data.mask
            )
        metrics.update(
            critic_metrics(critic_loss, critic_norm, pooled, learning_rate=critic_learning_rate)
        )
        return UpdateOutcome(applied=True, metrics=metrics), window.episodes

    def _squared_error(self, features: Tensor, targets: Tensor) -> Tensor:
        """Each sample's ``(V(s) - G)^2`` under the critic being fitted."""
        prediction: Tensor = self.critic(features).squeeze(-1)
        return (prediction - targets).square()

    def _fit_critic(
        self, features: Tensor, targets: Tensor, mask: Tensor, window_sums: Tensor | None = None
    ) -> tuple[float, float, list[float]]:
        """Minibatch regression of the critic (:func:`~typedrl.shac._window.fit_critic`).

        Returns the mean loss and gradient norm over the applied minibatches
        (identical on every rank), and ``window_sums`` summed over the ranks: they
        ride along in the first minibatch's all-reduce.
        """
        if window_sums is None:
            window_sums = torch.zeros(len(WINDOW_SUMS), device=features.device)
        fit = fit_critic(
            CriticData(features=features, targets=targets, mask=mask, window_sums=window_sums),
            squared_error=self._squared_error,
            kernel=self.critic_kernel,
            sampler=self.sampler,
            iterations=self.config.critic_iterations,
            minibatches=self.config.critic_minibatches,
        )
        return fit.loss, fit.grad_norm, fit.window

    # ------------------------------------------------------------------ state

    def state(self) -> AlgorithmState:
        """Policy optimizer and schedule, critic and target critic, theirs, the sampler."""
        return window_state(
            counters=self.counters,
            critics={"critic": self.critic, "target_critic": self.target_critic},
            return_normalizer=self.return_normalizer,
            optimizers={"policy": self.optimizer, "critic": self.critic_optimizer},
            schedulers={"policy": self.scheduler, "critic": self.critic_scheduler},
            sampler=self.sampler,
        )

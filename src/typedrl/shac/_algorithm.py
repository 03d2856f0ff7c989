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
import math
from typing import Protocol, cast, final, runtime_checkable

import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.advantages import compute_gae, discount_weights
from typedrl.apg._algorithm import (
    POLICY_STATISTICS,
    AlgorithmState,
    actor_step,
    policy_metrics,
    policy_statistics,
    refuse_update,
)
from typedrl.apg._cut_rows import exploded_rows, zero_rows
from typedrl.apg._rollout import DifferentiableRollout
from typedrl.distributed import Distributed, raise_together
from typedrl.episodes import EpochEpisodes
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
from typedrl.policies import build_mlp
from typedrl.protocols import DifferentiablePolicy, SupportsNormalizerUpdate
from typedrl.shac._config import SHACConfig
from typedrl.training import Counters, GeneratorState
from typedrl.training._update import GradientStep, UpdateOutcome, build_optimizer, build_scheduler
from typedrl.types import Obs

__all__ = ["SHAC", "WindowCollector"]

# The window's statistics pooled in the critic's first minibatch all-reduce, by position.
_WINDOW_SUMS = (
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
_ACTOR_SUMS = (*POLICY_STATISTICS, "cut_rows")


@runtime_checkable
class WindowCollector(Protocol):
    """What :meth:`SHAC.update` rolls a window out with: a differentiable collector."""

    def collect(
        self, policy: DifferentiablePolicy, *, num_steps: int, iteration: int
    ) -> DifferentiableRollout:
        """Step the env ``num_steps`` times with ``policy``, keeping the graph."""
        ...

    def detach_state(self) -> Obs:
        """Cut the graph at the current state (a window's end)."""
        ...


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
        features = getattr(policy, "features", None)
        if not callable(features):
            raise ConfigError(
                f"SHAC needs a policy with features(obs) (the critic's input, normalised as "
                f"the policy sees it), got {type(policy).__name__}"
            )
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
        if dist.world_size > 1:
            with torch.no_grad():
                for tensor in critic.parameters():
                    tensor.copy_(dist.broadcast(tensor.detach().clone(), src=0))
        self.critic = critic
        self.target_critic = copy.deepcopy(critic)
        # The actor's loss goes through the target critic, which never trains on it.
        self.target_critic.requires_grad_(requires_grad=False)
        self.critic_optimizer = build_optimizer(
            list(critic.parameters()),
            name="adam",
            learning_rate=config.critic_learning_rate,
            betas=config.critic_betas,
        )
        self.critic_scheduler = build_scheduler(
            self.critic_optimizer,
            schedule=config.critic_learning_rate_schedule,
            planned_updates=planned_updates,
            learning_rate=config.critic_learning_rate,
            min_learning_rate=config.critic_min_learning_rate,
        )
        self.critic_kernel = GradientStep(
            list(critic.parameters()),
            self.critic_optimizer,
            dist=dist,
            max_grad_norm=config.critic_max_grad_norm,
        )
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
        features = getattr(policy, "features", None)
        if not callable(features):
            raise ConfigError(
                "SHAC needs a policy with features(obs), the critic's input (as "
                f"DifferentiableMLPPolicy has), got {type(policy).__name__}"
            )
        with torch.no_grad():
            return int(features(observation).shape[-1])

    def value(self, observations: TensorDict, *, target: bool = True) -> Tensor:
        """``V(obs)`` of a batch of observations (the target critic by default), unscaled."""
        batch = observations.batch_size
        flat = observations.reshape(-1)
        network = self.target_critic if target else self.critic
        values: Tensor = network(self._features(flat)).squeeze(-1)
        if self.return_normalizer is not None:
            values = self.return_normalizer.denormalize(values)
        return values.reshape(batch)

    def update(  # noqa: PLR0915 - one iteration, read top to bottom in its numbered steps
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
        actor, config, dist = self.config.actor, self.config, self.dist
        gamma = actor.gamma
        self.kernel.clear()
        try:
            # 1. The window: graph-preserving, continuing the env's running episodes.
            window = collector.collect(
                cast("DifferentiablePolicy", self.policy), num_steps=num_steps, iteration=iteration
            )
            rewards, valid = window.rewards, window.valid
            rows = rewards.shape[1]
            # 2. The actor loss. A row whose observation exploded is cut like a termination
            # (masked steps after a cut are invalid, so they are not cut again).
            cut = exploded_rows(window.terminal_observations, config.observation_limit) & valid
            terminated = window.terminated | cut
            # A row both terminated and truncated at a step ended for good: no bootstrap.
            truncated = window.truncated & ~terminated
            done = terminated | truncated
            zero = torch.zeros((), dtype=rewards.dtype, device=rewards.device)
            safe_rewards = torch.where(cut | ~valid, zero, rewards)
            terminal_values = self.value(zero_rows(window.terminal_observations, cut | ~valid))
            # d_t: 1 at the window's start, times gamma each step, back to 1 after a done
            d, d_end = discount_weights(torch.ones_like(rewards[0]), done, gamma)
            # DiffRL compute_actor_loss: sum_t gamma^t r_t + [truncated_t] gamma^(t+1) V'(s'_t)
            objective = (d * safe_rewards).sum() + (
                torch.where(truncated & valid, d * gamma * terminal_values, zero)
            ).sum()
            # ... + gamma^h V'(s_h) for the rows still running after the window
            running = ~done[-1] & valid[-1]
            objective = objective + torch.where(running, d_end * terminal_values[-1], zero).sum()
            objective = objective / rows
            # A cut row's entropy counts no more than its reward: its episode ended there.
            entropy = torch.where(valid & ~cut, window.entropies, zero).sum() / rows
            loss = -(objective + actor.entropy_coef * entropy)
            # 3. Backward (always, a non-finite loss too: it frees the simulator's graph).
            torch.autograd.backward(loss)
            collector.detach_state()
        except TypedRLError as error:
            # A bad env output on one rank stops every rank with its message, before the
            # update's all-reduce would wait for it; nothing of the update is kept.
            self.kernel.clear()
            raise_together(error, "collecting the rollouts", dist)
            raise
        except BaseException:
            self.kernel.clear()
            raise
        raise_together(None, "collecting the rollouts", dist)
        # 4. Clip. One all-reduce: the gradient averaged per step and over the ranks, with
        # the window's statistics (read after the backward) summed over the ranks; the
        # decision to skip is then the same on every rank.
        statistics = policy_statistics(loss, objective, entropy, window.adjoint)
        statistics["cut_rows"] = cut.sum().to(torch.float64)
        device = self.parameters[0].device
        sums = torch.stack(
            [
                statistics.get(name, torch.zeros((), device=device)).to(torch.float64)
                for name in _ACTOR_SUMS
            ]
        )
        reduced = self.kernel.reduce(sums, scale=1.0 / num_steps)
        totals = dict(zip(_ACTOR_SUMS, reduced.pooled.tolist(), strict=True))
        grad_norm = float(reduced.norm)
        finite = math.isfinite(grad_norm) and math.isfinite(totals["loss"])
        large = (
            finite
            and actor.skip_grad_norm_above is not None
            and grad_norm > actor.skip_grad_norm_above
        )
        metrics = policy_metrics(
            totals,
            steps=num_steps,
            grad_norm=grad_norm,
            finite=finite,
            large=large,
            learning_rate=float(self.optimizer.param_groups[0]["lr"]),
            norm_max=(
                window.adjoint.norm_max.detach().to(torch.float64).clone()
                if window.adjoint is not None
                else None
            ),
            dist=dist,
        )
        # Every update reports its cuts, a skipped one too.
        metrics[TRAIN_CUT_ROWS] = totals["cut_rows"]
        self._zero_gradients = refuse_update(
            "SHAC",
            totals=totals,
            grad_norm=grad_norm,
            finite=finite,
            config=actor,
            update=self.counters["applied"] + self.counters["skipped"],
            zero_gradients=self._zero_gradients,
            env_outputs=[(0, rewards.detach(), window.terminal_observations.detach())],
            dist=dist,
            cancel=self.kernel.clear,
        )
        if not finite or large:
            self.counters["skipped"] += 1
            self.kernel.skip()
            return UpdateOutcome(applied=False, metrics=metrics), window.episodes
        # 5. Step: the kernel clips the reduced gradient to max_grad_norm, writes it back
        # and steps the optimizer; the schedule counts applied updates only.
        self.kernel.apply(reduced)
        self.counters["applied"] += 1
        self.scheduler.step()
        # 6. The critic's regression targets, from the detached window and the target critic.
        observations = window.observations.detach()
        with torch.no_grad():
            features = self._features(observations.reshape(-1)).detach()
            values = self.value(observations)
            next_values = self.value(
                zero_rows(window.terminal_observations.detach(), terminated | ~valid)
            )
            # DiffRL compute_target_values (td-lambda): G_t = r_t + gamma * ((1 - lambda)
            # V'(s_{t+1}) + lambda G_{t+1}), cut by termination, bootstrapped on truncation
            _, targets = compute_gae(
                # A cut row's (possibly non-finite) reward and a ghost step's never count.
                rewards=torch.where(cut | ~valid, 0.0, rewards.detach()),
                values=values,
                next_values=next_values,
                terminated=terminated,
                truncated=truncated,
                valid=valid,
                gamma=gamma,
                gae_lambda=config.gae_lambda,
            )
            flat_targets = targets.reshape(-1).to(features.dtype)
            mask = valid.reshape(-1)
            # The critic's error before its regression, on the valid samples.
            predicted = self.value(observations, target=False).reshape(-1)
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
            if self.return_normalizer is not None:
                self.return_normalizer.update(flat_targets, dist=dist, mask=mask)
                # (G - mean) / std: the critic trains on standardised targets
                train_targets = self.return_normalizer.normalize(flat_targets)
            else:
                train_targets = flat_targets
        critic_learning_rate = float(self.critic_optimizer.param_groups[0]["lr"])
        # DiffRL: mean over the minibatch of (V(s) - G)^2, critic_iterations passes
        critic_loss, critic_norm, pooled = self._fit_critic(
            features, train_targets, mask, window_sums
        )
        self.critic_scheduler.step()
        # 7. theta' <- alpha * theta' + (1 - alpha) * theta (DiffRL's target_critic_alpha)
        with torch.no_grad():
            for target, source in zip(
                self.target_critic.parameters(), self.critic.parameters(), strict=True
            ):
                target.lerp_(source, 1.0 - config.target_alpha)
        policy = self.policy
        if self.normalize_observations and isinstance(policy, SupportsNormalizerUpdate):
            policy.update_normalizers(observations.reshape(-1), dist=dist, mask=mask)
        sums_of = dict(zip(_WINDOW_SUMS, pooled, strict=True))
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
        metrics.update(
            {
                LOSS_CRITIC: critic_loss,
                CRITIC_VALUE_MEAN: sums_of["value_sum"] / entries,
                CRITIC_TARGET_MEAN: sums_of["target_sum"] / entries,
                CRITIC_EXPLAINED_VARIANCE: 1.0 - residual_variance / target_variance,
                TRAIN_CRITIC_GRAD_NORM: critic_norm,
                TRAIN_CRITIC_LEARNING_RATE: critic_learning_rate,
            }
        )
        return UpdateOutcome(applied=True, metrics=metrics), window.episodes

    def _fit_critic(
        self, features: Tensor, targets: Tensor, mask: Tensor, window_sums: Tensor | None = None
    ) -> tuple[float, float, list[float]]:
        """Minibatch regression of the critic.

        Returns the mean loss and gradient norm over the applied minibatches
        (identical on every rank), and ``window_sums`` summed over the ranks: they
        ride along in the first minibatch's all-reduce.
        """
        config = self.config
        samples = features.shape[0]
        kernel = self.critic_kernel
        if window_sums is None:
            window_sums = torch.zeros(len(_WINDOW_SUMS), device=features.device)
        total_loss = torch.zeros((), dtype=torch.float64, device=features.device)
        total_norm = torch.zeros((), dtype=torch.float64, device=features.device)
        pooled_window: Tensor | None = None
        steps = 0
        for _ in range(config.critic_iterations):
            order = torch.randperm(samples, generator=self.sampler).to(features.device)
            # Exactly critic_minibatches minibatches on every rank (sizes differ by at most
            # one), so that the ranks' gradient all-reduces always pair up.
            for index in torch.tensor_split(order, config.critic_minibatches):
                keep = mask[index].to(features.dtype)
                prediction = self.critic(features[index]).squeeze(-1)
                # Summed squared error here; divided by every rank's sample count in the
                # kernel, so the step follows the mean over all of this minibatch's valid
                # samples.
                squared = ((prediction - targets[index]).square() * keep).sum()
                kernel.clear()
                torch.autograd.backward(squared)
                minibatch = torch.stack([squared.detach().to(keep.dtype), keep.sum()])
                pooled = (
                    torch.cat((window_sums.to(keep.dtype), minibatch))
                    if pooled_window is None
                    else minibatch
                )
                reduced = kernel.reduce(pooled, average="last_pooled")
                if pooled_window is None:
                    pooled_window = reduced.pooled[: len(_WINDOW_SUMS)]
                squared_sum, samples_seen = reduced.pooled[-2], reduced.pooled[-1]
                # A non-finite critic gradient (the same on every rank after the all-reduce),
                # or a minibatch empty on every rank, skips its step alike: critic and Adam
                # moments unchanged.
                if not bool(torch.isfinite(reduced.norm) & (samples_seen > 0)):
                    kernel.skip()
                    continue
                kernel.apply(reduced)
                total_loss += (squared_sum / samples_seen.clamp(min=1.0)).to(torch.float64)
                total_norm += torch.nan_to_num(reduced.norm.detach().to(torch.float64), nan=0.0)
                steps += 1
        kernel.clear()
        window = pooled_window.tolist() if pooled_window is not None else window_sums.tolist()
        return float(total_loss) / max(steps, 1), float(total_norm) / max(steps, 1), window

    # ------------------------------------------------------------------ state

    def state(self) -> AlgorithmState:
        """Policy optimizer and schedule, critic and target critic, theirs, the sampler."""
        modules: dict[str, object] = {
            "algorithm": self.counters,
            "critic": self.critic,
            "target_critic": self.target_critic,
        }
        if self.return_normalizer is not None:
            modules["return_normalizer"] = self.return_normalizer
        return AlgorithmState(
            modules=modules,  # type: ignore[arg-type]
            optimizers={"policy": self.optimizer, "critic": self.critic_optimizer},
            schedulers={"policy": self.scheduler, "critic": self.critic_scheduler},
            rank_local={"critic_sampler": GeneratorState(self.sampler)},
        )

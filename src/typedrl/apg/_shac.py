"""SHAC: short-horizon actor-critic, the critic-bootstrapped sibling of APG.

Xu et al., "Accelerated Policy Learning with Parallel Differentiable
Simulation" (ICLR 2022). Each update differentiates a short window of the
env's dynamics, ended by the target critic's value of the state where the
window (or the episode) stops; the critic is then regressed on TD(lambda)
targets of the detached window, and the target critic follows it by Polyak
averaging.
"""

import copy
from collections.abc import Mapping
from typing import ClassVar, final

import torch
from jaxtyping import Float
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.advantages import compute_gae, discount_weights
from typedrl.apg._algorithm import AlgorithmState, DifferentiableAlgorithm, UpdateData
from typedrl.apg._cut_rows import exploded_rows, zero_rows
from typedrl.apg._rollout import DifferentiableRollout
from typedrl.apg._shac_config import SHACConfig
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError
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
from typedrl.training import GeneratorState
from typedrl.training._update import GradientStep, build_optimizer, build_scheduler

__all__ = ["SHAC"]

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


@final
class _Window:
    """A window's detached data as the critic learns from it: cut rows end their episode."""

    def __init__(self, rollout: DifferentiableRollout, observation_limit: float) -> None:
        valid = rollout.valid
        cut = exploded_rows(rollout.terminal_observations, observation_limit) & valid
        self.observations = rollout.observations.detach()
        self.terminal_observations = rollout.terminal_observations.detach()
        self.rewards = rollout.rewards.detach()
        self.terminated = rollout.terminated | cut
        self.truncated = rollout.truncated & ~self.terminated
        self.valid = valid
        self.cut = cut


@final
class SHAC(DifferentiableAlgorithm):
    """Short-horizon actor-critic on the differentiable trainer.

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
    """

    _summed: ClassVar[tuple[str, ...]] = (*DifferentiableAlgorithm._summed, "cut_rows")
    """APG's statistics and the window's cut rows, reduced with the gradient."""

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
        super().__init__(
            policy,
            config.actor,
            dist=dist,
            planned_updates=planned_updates,
            normalize_observations=normalize_observations,
        )
        self.shac = config
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

    # ------------------------------------------------------------------ actor

    def value(self, observations: TensorDict, *, target: bool = True) -> Tensor:
        """``V(obs)`` of a batch of observations (the target critic by default), unscaled."""
        batch = observations.batch_size
        flat = observations.reshape(-1)
        network = self.target_critic if target else self.critic
        values: Tensor = network(self._features(flat)).squeeze(-1)
        if self.return_normalizer is not None:
            values = self.return_normalizer.denormalize(values)
        return values.reshape(batch)

    def _segment_loss(
        self, rollout: DifferentiableRollout, discount: Float[Tensor, " num_envs"]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        gamma = self.config.gamma
        rewards, valid = rollout.rewards, rollout.valid
        # Masked steps (after a cut, until the env resets the row) are invalid: not cut again.
        cut = exploded_rows(rollout.terminal_observations, self.shac.observation_limit) & valid
        # Counted on the device; summed over ranks with the update's other statistics.
        self._pool("cut_rows", cut.sum())
        terminated = rollout.terminated | cut
        # A row both terminated and truncated at a step ended for good: no bootstrap.
        truncated = rollout.truncated & ~terminated
        done = terminated | truncated
        # After a row's cut, nothing of it counts until its next episode: the env reset it.
        zero = torch.zeros((), dtype=rewards.dtype, device=rewards.device)
        safe_rewards = torch.where(cut | ~valid, zero, rewards)
        terminal_values = self.value(zero_rows(rollout.terminal_observations, cut | ~valid))
        d, current = discount_weights(discount, done, gamma)
        # sum_t d_t r_t + [truncated_t] d_t gamma V'(final_obs_t)
        objective = (d * safe_rewards).sum() + (
            torch.where(truncated & valid, d * gamma * terminal_values, zero)
        ).sum()
        # Rows still running after the window: d_T V'(s_T), from the last step's next state.
        running = ~done[-1] & valid[-1]
        objective = objective + torch.where(running, current * terminal_values[-1], zero).sum()
        rows = rollout.num_envs
        objective = objective / rows
        # A cut row's entropy counts no more than its reward: its episode ended there.
        entropy = torch.where(valid & ~cut, rollout.entropies, zero).sum() / rows
        loss = -(objective + self.config.entropy_coef * entropy)
        # A window does not carry its discount into the next one: each window is one update.
        return loss, objective, entropy, torch.ones_like(current)

    def _complete_loss(
        self, rollout: DifferentiableRollout, objective_scale: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        raise ConfigError(
            "SHAC learns from windows of a running env: use rollout_mode='segmented' (the "
            "window is segment_length steps); complete rollouts are APG's"
        )

    # ------------------------------------------------------------------ critic

    def _pooled_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        # Every update reports its cuts, a skipped one too.
        return {TRAIN_CUT_ROWS: totals["cut_rows"]}

    def _learn_from(self, data: UpdateData | None) -> dict[str, float]:
        """Regress the critic on the window's TD(lambda) targets; Polyak-update the target.

        The critic learns from the update's last window (a SHAC update is one window).
        """
        if data is None or not data.rollouts:
            return {}
        window = _Window(data.rollouts[-1], self.shac.observation_limit)
        config = self.shac
        with torch.no_grad():
            features = self._features(window.observations.reshape(-1)).detach()
            values = self.value(window.observations)
            next_values = self.value(
                zero_rows(window.terminal_observations, window.terminated | ~window.valid)
            )
            _, targets = compute_gae(
                # A cut row's (possibly non-finite) reward and a ghost step's never count.
                rewards=torch.where(window.cut | ~window.valid, 0.0, window.rewards),
                values=values,
                next_values=next_values,
                terminated=window.terminated,
                truncated=window.truncated,
                valid=window.valid,
                gamma=self.config.gamma,
                gae_lambda=config.gae_lambda,
            )
            flat_targets = targets.reshape(-1).to(features.dtype)
            mask = window.valid.reshape(-1)
            # The critic's error before its regression, on the valid samples.
            predicted = self.value(window.observations, target=False).reshape(-1)
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
                self.return_normalizer.update(flat_targets, dist=self.dist, mask=mask)
                train_targets = self.return_normalizer.normalize(flat_targets)
            else:
                train_targets = flat_targets
        critic_learning_rate = float(self.critic_optimizer.param_groups[0]["lr"])
        losses, norms, pooled = self._fit_critic(features, train_targets, mask, window_sums)
        self.critic_scheduler.step()
        # theta' <- alpha * theta' + (1 - alpha) * theta
        with torch.no_grad():
            for target, source in zip(
                self.target_critic.parameters(), self.critic.parameters(), strict=True
            ):
                target.lerp_(source, 1.0 - config.target_alpha)
        sums = dict(zip(_WINDOW_SUMS, pooled, strict=True))
        entries = max(sums["entries"], 1.0)
        valid_entries = max(sums["valid_entries"], 1.0)
        # Var[x] = E[x^2] - E[x]^2 over every rank's valid samples
        residual_variance = (
            sums["residual_square_sum"] / valid_entries
            - (sums["residual_sum"] / valid_entries) ** 2
        )
        target_variance = max(
            sums["valid_target_square_sum"] / valid_entries
            - (sums["valid_target_sum"] / valid_entries) ** 2,
            1e-8,
        )
        return {
            LOSS_CRITIC: losses,
            CRITIC_VALUE_MEAN: sums["value_sum"] / entries,
            CRITIC_TARGET_MEAN: sums["target_sum"] / entries,
            CRITIC_EXPLAINED_VARIANCE: 1.0 - residual_variance / target_variance,
            TRAIN_CRITIC_GRAD_NORM: norms,
            TRAIN_CRITIC_LEARNING_RATE: critic_learning_rate,
        }

    def _fit_critic(
        self, features: Tensor, targets: Tensor, mask: Tensor, window_sums: Tensor | None = None
    ) -> tuple[float, float, list[float]]:
        """Minibatch regression of the critic.

        Returns the mean loss and gradient norm over the applied minibatches
        (identical on every rank), and ``window_sums`` summed over the ranks: they
        ride along in the first minibatch's all-reduce.
        """
        config = self.shac
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

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

from typedrl import _validation
from typedrl.advantages import compute_gae
from typedrl.apg._algorithm import (
    AlgorithmState,
    DifferentiableAlgorithm,
    build_optimizer,
    build_scheduler,
)
from typedrl.apg._cut_rows import exploded_rows, zero_rows
from typedrl.apg._rollout import DifferentiableRollout
from typedrl.apg._shac_config import SHACConfig
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError
from typedrl.normalization import RunningMeanStd
from typedrl.policies import build_mlp
from typedrl.training import GeneratorState

__all__ = ["SHAC"]


@final
class _Window:
    """The detached data of the last window, kept for the critic's update."""

    def __init__(self, rollout: DifferentiableRollout, cut: Tensor) -> None:
        self.observations = rollout.observations.detach()
        self.terminal_observations = rollout.terminal_observations.detach()
        self.rewards = rollout.rewards.detach()
        self.terminated = rollout.terminated | cut
        self.truncated = rollout.truncated & ~self.terminated
        self.valid = rollout.valid
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
    are averaged across ranks. Then ``theta' <- alpha * theta' + (1 - alpha) * theta``.

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

    @_validation.no_type_check
    def __init__(
        self,
        policy: nn.Module,
        config: SHACConfig,
        *,
        dist: Distributed,
        planned_updates: int | None,
        seed: int,
        feature_width: int,
    ) -> None:
        if not isinstance(config, SHACConfig):
            raise ConfigError(f"config must be a SHACConfig, got {type(config).__name__}")
        features = getattr(policy, "features", None)
        if not callable(features):
            raise ConfigError(
                f"SHAC needs a policy with features(obs) (the critic's input, normalised as "
                f"the policy sees it), got {type(policy).__name__}"
            )
        super().__init__(policy, config.actor, dist=dist, planned_updates=planned_updates)
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
            schedule=config.critic_learning_rate_schedule,  # type: ignore[arg-type]
            planned_updates=planned_updates,
            learning_rate=config.critic_learning_rate,
            min_learning_rate=config.critic_min_learning_rate,
        )
        self.return_normalizer = (
            RunningMeanStd((), clip=None).to(parameter.device) if config.normalize_returns else None
        )
        self.sampler = torch.Generator(device="cpu").manual_seed(seed)
        self._features = features
        self._window: _Window | None = None

    # ------------------------------------------------------------------ actor

    def begin_update(self) -> None:
        """Start an update, as :meth:`DifferentiableAlgorithm.begin_update` does.

        The kept window starts again, so that a skipped update's never reaches
        the next one.
        """
        super().begin_update()
        self._window = None

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
        cut_count = cut.sum().to(torch.float64)
        self._sums["cut_rows"] = (
            self._sums["cut_rows"] + cut_count if "cut_rows" in self._sums else cut_count
        )
        terminated = rollout.terminated | cut
        # A row both terminated and truncated at a step ended for good: no bootstrap.
        truncated = rollout.truncated & ~terminated
        done = terminated | truncated
        # After a row's cut, nothing of it counts until its next episode: the env reset it.
        zero = torch.zeros((), dtype=rewards.dtype, device=rewards.device)
        safe_rewards = torch.where(cut | ~valid, zero, rewards)
        terminal_values = self.value(zero_rows(rollout.terminal_observations, cut | ~valid))
        weights = []
        current = discount
        for step in range(rollout.num_steps):
            weights.append(current)
            current = torch.where(done[step], torch.ones_like(current), gamma * current)
        d = torch.stack(weights)
        # sum_t d_t r_t + [truncated_t] d_t gamma V'(final_obs_t)
        objective = (d * safe_rewards).sum() + (
            torch.where(truncated & valid, d * gamma * terminal_values, zero)
        ).sum()
        # Rows still running after the window: d_T V'(s_T), from the last step's next state.
        running = ~done[-1] & valid[-1]
        objective = objective + torch.where(running, current * terminal_values[-1], zero).sum()
        rows = rollout.num_envs
        objective = objective / rows
        entropy = torch.where(valid, rollout.entropies, zero).sum() / rows
        loss = -(objective + self.config.entropy_coef * entropy)
        self._window = _Window(rollout, cut)
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

    def _after_step(self, rollouts_seen: int) -> dict[str, float]:
        del rollouts_seen
        window = self._window
        if window is None:
            return {}
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
            if self.return_normalizer is not None:
                self.return_normalizer.update(flat_targets, dist=self.dist, mask=mask)
                train_targets = self.return_normalizer.normalize(flat_targets)
            else:
                train_targets = flat_targets
        critic_learning_rate = float(self.critic_optimizer.param_groups[0]["lr"])
        losses, norms = self._fit_critic(features, train_targets, mask)
        self.critic_scheduler.step()
        # theta' <- alpha * theta' + (1 - alpha) * theta
        with torch.no_grad():
            torch._foreach_lerp_(
                list(self.target_critic.parameters()),
                list(self.critic.parameters()),
                1.0 - config.target_alpha,
            )
        with torch.no_grad():
            predicted = self.value(window.observations, target=False).reshape(-1)
            residual = (flat_targets - predicted)[mask]
            variance = flat_targets[mask].var(unbiased=False).clamp(min=1e-8)
        self._window = None
        return {
            "loss/critic": losses,
            "critic/value_mean": float(values.mean()),
            "critic/target_mean": float(flat_targets.mean()),
            "critic/explained_variance": float(1.0 - residual.var(unbiased=False) / variance),
            "train/critic_grad_norm": norms,
            "train/critic_learning_rate": critic_learning_rate,
        }

    def _metrics(
        self,
        totals: Mapping[str, float],
        grad_norm: float,
        finite: bool,
        large: bool,
        learning_rate: float,
    ) -> dict[str, float]:
        metrics = super()._metrics(totals, grad_norm, finite, large, learning_rate)
        # Every update reports its cuts, a skipped one too.
        metrics["train/cut_rows"] = totals["cut_rows"]
        return metrics

    def _fit_critic(self, features: Tensor, targets: Tensor, mask: Tensor) -> tuple[float, float]:
        """Minibatch regression of the critic; returns the mean loss and gradient norm."""
        config, dist = self.shac, self.dist
        samples = features.shape[0]
        parameters = list(self.critic.parameters())
        total_loss = torch.zeros((), dtype=torch.float64, device=features.device)
        total_norm = torch.zeros((), dtype=torch.float64, device=features.device)
        steps = 0
        for _ in range(config.critic_iterations):
            order = torch.randperm(samples, generator=self.sampler).to(features.device)
            # Exactly critic_minibatches minibatches on every rank (sizes differ by at most
            # one), so that the ranks' gradient all-reduces always pair up.
            for index in torch.tensor_split(order, config.critic_minibatches):
                keep = mask[index].to(features.dtype)
                prediction = self.critic(features[index]).squeeze(-1)
                # Summed squared error here; divided by every rank's sample count below, so
                # the step follows the mean over all of this minibatch's valid samples.
                squared = ((prediction - targets[index]).square() * keep).sum()
                for parameter in parameters:
                    parameter.grad = None
                torch.autograd.backward(squared)
                grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
                packed = torch.cat([*(g.reshape(-1) for g in grads), keep.sum().reshape(1)])
                if dist.world_size > 1:
                    packed = dist.all_reduce_sum(packed)
                samples_seen = packed[-1]
                flat = packed[:-1] / samples_seen.clamp(min=1.0)
                loss = squared.detach() / keep.sum().clamp(min=1.0)
                norm = torch.linalg.vector_norm(flat)
                if config.critic_max_grad_norm is not None:
                    flat = flat * (config.critic_max_grad_norm / (norm + 1e-6)).clamp(max=1.0)
                # A non-finite critic gradient (the same on every rank after the all-reduce),
                # or a minibatch empty on every rank, skips its step alike: critic and Adam
                # moments unchanged.
                if not bool(torch.isfinite(norm)) or not bool(samples_seen > 0):
                    continue
                offset = 0
                for parameter in parameters:
                    count = parameter.numel()
                    parameter.grad = flat[offset : offset + count].view_as(parameter).clone()
                    offset += count
                self.critic_optimizer.step()
                total_loss += loss.detach().to(torch.float64)
                total_norm += torch.nan_to_num(norm.detach().to(torch.float64), nan=0.0)
                steps += 1
        for parameter in parameters:
            parameter.grad = None
        return float(total_loss) / max(steps, 1), float(total_norm) / max(steps, 1)

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

"""Proximal policy optimisation on Lightning Fabric."""

import math
import time
from typing import Any, final

import gymnasium as gym
import torch
from lightning.fabric import Fabric
from lightning.fabric.plugins.precision import DoublePrecision, MixedPrecision, Precision
from torch import Tensor

from typedrl import _validation
from typedrl.advantages import compute_gae
from typedrl.agents._batch_plan import agree_on_batch_plan
from typedrl.agents._collector import OBS_KEY, OnPolicyCollector, OnPolicyRollout
from typedrl.agents._compiled_update import (
    CompileDecision,
    CompiledUpdate,
    decide_compile,
    find_cpp_compiler,
    runtime_checks_active,
)
from typedrl.agents._config import PPOConfig
from typedrl.agents._loss import LOSS_STATISTICS, EpochData, masked_mean, ppo_loss
from typedrl.buffers import minibatch_indices
from typedrl.errors import ConfigError, NonFiniteError
from typedrl.logging import MetricAggregator
from typedrl.normalization import RewardNormalizer
from typedrl.policies import MLPActorCritic
from typedrl.protocols import Evaluator, Policy, VecEnv
from typedrl.seeding import derive_seed
from typedrl.training import (
    AbstractTrainer,
    Budget,
    GeneratorState,
    IterationResult,
    RunOptions,
    TrainerState,
    setup_module_and_optimizer,
)

__all__ = ["PPOAgent"]

_MINIBATCH_METRICS = (*LOSS_STATISTICS, "train/grad_norm", "train/skipped_updates")
_METRICS = [
    *_MINIBATCH_METRICS,
    "train/explained_variance",
    "episode/return",
    "episode/length",
]


def _console(line: str) -> None:
    """Print one status line of a run (above the progress bar when one is drawn)."""
    print(line, flush=True)


def _plain_precision(fabric: Fabric) -> bool:
    """Whether Fabric runs 32-true or 64-true precision (no plugin the compiled update bypasses)."""
    return type(fabric.strategy.precision) in (Precision, DoublePrecision)


def _require_single_process_compile(config: PPOConfig, fabric: Fabric, world_size: int) -> None:
    """Refuse ``compile_update=True`` with DDP or a precision plugin it would bypass."""
    if config.compile_update is not True:
        return
    if world_size > 1:
        raise ConfigError(
            "PPOConfig.compile_update is single-process only (DDP must see the model's "
            f"forward to synchronise gradients); got {world_size} ranks"
        )
    if not _plain_precision(fabric):
        raise ConfigError(
            "PPOConfig.compile_update computes gradients and the Adam update itself and "
            "supports Fabric's 32-true and 64-true precision only; got "
            f"{type(fabric.strategy.precision).__name__}"
        )


@final
class PPOAgent(AbstractTrainer):
    """PPO with an MLP actor-critic, on one device or several (Fabric DDP).

    A trainer on the core (:class:`~typedrl.training.AbstractTrainer`): one
    iteration is one epoch. Each epoch the
    :class:`~typedrl.agents.OnPolicyCollector` collects ``num_steps`` steps
    from every env row of every rank (no gradients; finite checks on
    observations, terminal observations, policy outputs and rewards, reported
    with the kind, key, row and step); PPO then computes GAE in unnormalised value space
    (termination zeroes the bootstrap; truncation bootstraps from
    ``V(final_obs)``; ghost transitions are masked out everywhere), then runs
    exactly ``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``
    minibatch updates (fewer only when ``target_kl`` stops an epoch early, on
    every rank alike). That count is checked to be identical on every rank at
    start-up, because a mismatch would deadlock DDP's gradient all-reduce.

    Envs that cannot provide terminal observations (``provides_final_obs ==
    False``) are bootstrapped at truncation with ``V(obs_t)``, the value of the
    last observation before the time-out, as rsl_rl does; the agent logs
    ``train/approximate_bootstrap = 1`` so the approximation is never silent.

    Args:
        env: This rank's training env.
        config: The hyper-parameters.
        fabric: A launched Fabric; by default single-process on CPU (or one GPU).
        eval_env: This rank's evaluation env, scored by an
            :class:`~typedrl.evaluation.EpisodeEvaluator`.
        evaluator: Any :class:`~typedrl.protocols.Evaluator` instead of ``eval_env``.
        options: Run folder, evaluation and checkpoint cadences, loggers, progress.

    Example:
        >>> from typedrl.envs import make
        >>> from typedrl.training import RunOptions
        >>> env = make("CartPole-v1", num_envs=4, seed=0)
        >>> config = PPOConfig(total_timesteps=512, num_steps=64, batch_size=64, num_mini_epochs=2)
        >>> agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False))
        >>> result = agent.fit()
        >>> result.env_steps, result.iterations
        (512, 2)
    """

    kind = "ppo"
    """PPO writes and resumes checkpoints of kind ``"ppo"``."""
    resumable_changes = frozenset({"total_timesteps", "compile_update", "extra"})
    """Config fields a resumed run may change: the budget, compilation, user bookkeeping."""

    @_validation.no_type_check
    def __init__(
        self,
        *,
        env: VecEnv,
        config: PPOConfig,
        fabric: Fabric | None = None,
        eval_env: VecEnv | None = None,
        evaluator: Evaluator | None = None,
        options: RunOptions | None = None,
    ) -> None:
        if not isinstance(config, PPOConfig):
            raise ConfigError(f"config must be a PPOConfig, got {type(config).__name__}")
        super().__init__(
            env=env,
            fabric=fabric,
            eval_env=eval_env,
            evaluator=evaluator,
            options=options,
            seed=config.seed,
        )
        self.config = config
        _require_single_process_compile(config, self.fabric, self.dist.world_size)
        # Checked before any other collective: a mismatch would deadlock the update.
        self.num_minibatches = agree_on_batch_plan(
            num_envs=env.num_envs,
            num_steps=config.num_steps,
            num_mini_epochs=config.num_mini_epochs,
            batch_size=config.batch_size,
            dist=self.dist,
        )
        self.compile_decision: CompileDecision = decide_compile(
            config.compile_update,
            world_size=self.dist.world_size,
            plain_precision=_plain_precision(self.fabric),
            planned_updates=self.planned_updates,
            compiler=find_cpp_compiler() if config.compile_update == "auto" else None,
            runtime_checks=runtime_checks_active(),
        )
        """Whether this run compiles its minibatch updates (``compile_update``), and why."""
        self.learning_rate = config.learning_rate
        self.metrics = MetricAggregator(
            [*_METRICS, "train/approximate_bootstrap"], device=self.device
        )
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(derive_seed(config.seed, "sampler", rank=self.dist.rank))
        self.collector = OnPolicyCollector(env, num_steps=config.num_steps, dist=self.dist)

    # --------------------------------------------------------------- properties

    @property
    def policy(self) -> Policy:
        """The actor-critic, unwrapped from Fabric (its observation normalisers inside it)."""
        return self.model_unwrapped

    @property
    def planned_updates(self) -> int:
        """Minibatch updates over the whole budget: epochs times minibatches per epoch.

        An epoch takes ``num_steps`` steps of every env row of every rank; the
        run's last epoch may overshoot ``total_timesteps``. (``target_kl`` may
        stop epochs early; the plan does not count on it.)
        """
        epoch_steps = self.config.num_steps * self.global_num_envs
        epochs = -(-self.config.total_timesteps // epoch_steps)
        return epochs * self.num_minibatches

    @property
    def budget(self) -> Budget:
        """``config.total_timesteps`` env steps over all ranks."""
        return Budget(timesteps=self.config.total_timesteps)

    # --------------------------------------------------------------- setup

    @staticmethod
    def build_policy(
        config: PPOConfig, observation_space: gym.Space[Any], action_space: gym.Space[Any]
    ) -> MLPActorCritic:
        """The actor-critic that PPO trains with ``config`` (on the CPU, freshly initialised).

        Use it to rebuild a trained policy from a checkpoint's config before
        loading its weights.
        """
        return MLPActorCritic(
            observation_space,
            action_space,
            actor_hidden=config.actor_hidden,
            critic_hidden=config.critic_hidden,
            activation=config.activation,
            log_std_init=config.log_std_init,
            normalize_observations=config.normalize_observations,
            observation_clip=config.observation_clip,
            orthogonal_init=config.orthogonal_init,
        )

    def _build(self) -> None:
        config, env = self.config, self.env
        torch.manual_seed(derive_seed(config.seed, "init", rank=self.dist.rank))
        model = self.build_policy(config, env.single_observation_space, env.single_action_space).to(
            self.device
        )
        self.reward_normalizer = (
            RewardNormalizer(gamma=config.gamma, clip=config.reward_clip, device=self.device)
            if config.normalize_rewards
            else None
        )
        self.model_unwrapped = model
        precision = self.fabric.strategy.precision
        # A gradient scaler (float16 mixed precision) scales the loss: the gradients are
        # unscaled before they are measured and clipped, and the scaler's own step skips
        # overflowing updates and backs its scale off.
        self._scaler = (
            getattr(precision, "scaler", None) if isinstance(precision, MixedPrecision) else None
        )
        # Fused Adam: one kernel per step over all parameters (the default on CPU is a
        # loop over tensors, which dominates the update of small networks). Fabric cannot
        # unscale the gradients of an optimizer that unscales inside its step, as fused
        # Adam does, so a scaled run uses the unfused one.
        optimizer = torch.optim.Adam(
            model.parameters(),
            lr=config.learning_rate,
            eps=config.adam_eps,
            fused=self._scaler is None,
        )
        self.model, self.optimizer = setup_module_and_optimizer(
            self.fabric, model, optimizer, forward_methods=("evaluate_tensors",)
        )
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        # DDP must see `evaluate` through its forward to synchronise gradients; a single
        # process has nothing to synchronise and calls the model directly.
        self._evaluate = (
            self.model.evaluate_tensors if self.dist.world_size > 1 else model.evaluate_tensors
        )
        self._mixed = isinstance(precision, MixedPrecision)
        # compile_update runs each minibatch update as one compiled function (loss,
        # gradients, clipping, Adam); decided (and checked to be single-process) in __init__.
        # With a progress display, the console says when compiling starts and ends (the
        # first update of each minibatch size waits for it: a minute on a CPU).
        report = _console if self.options.progress and self.dist.is_main else None
        self._compiled_update = (
            CompiledUpdate(model, optimizer, config, report=report)
            if self.compile_decision.enabled
            else None
        )

    def _prepare(self) -> None:
        """Reset the env where it has no current observation; register the buffer's keys."""
        collector, seed, rank = self.collector, self.config.seed, self.dist.rank
        if collector.needs_reset:
            collector.reset(
                seed=derive_seed(seed, "env", rank=rank)
                if self.iteration == 0
                # The env's state was not checkpointable: continue from a fresh, seeded reset.
                else derive_seed(seed, "env_restart", rank=rank, index=self.iteration)
            )
        collector.register(self.model_unwrapped)

    def load(self, path: Any, *, strict_config: bool = True) -> None:
        """Resume from a checkpoint (see :meth:`typedrl.training.AbstractTrainer.load`).

        The learning rate continues from the optimizer's saved parameter group.
        """
        super().load(path, strict_config=strict_config)
        self.learning_rate = float(self.optimizer.param_groups[0]["lr"])

    # --------------------------------------------------------------- training

    def _train_iteration(self) -> IterationResult:
        started = time.perf_counter()
        self._set_learning_rate()
        rollout = self.collector.collect(
            self.model_unwrapped, num_steps=self.config.num_steps, iteration=self.iteration
        )
        episodes = rollout.episodes
        ended = episodes.ended.reshape(-1)
        self.metrics.add_many("episode/return", episodes.returns.reshape(-1), ended)
        self.metrics.add_many("episode/length", episodes.lengths.reshape(-1), ended)
        if rollout.approximate_bootstrap:
            self.metrics.add("train/approximate_bootstrap", 1.0)
        collect_seconds = time.perf_counter() - started
        compiled = self._compiled_update
        compile_before = compiled.compile_seconds if compiled is not None else 0.0
        self._update(rollout)
        metrics = self.metrics.reduce(self.dist)
        metrics["train/learning_rate"] = self.learning_rate
        steps = self.config.num_steps * self.global_num_envs
        # Training speed leaves out compiling (the first update of each minibatch size).
        compile_seconds = compiled.compile_seconds - compile_before if compiled is not None else 0.0
        elapsed = time.perf_counter() - started - compile_seconds
        metrics["time/sps"] = steps / elapsed
        metrics["time/collect_fraction"] = collect_seconds / elapsed
        if self._compiled_update is not None:
            # Cumulative over this fit: the first update of each minibatch shape compiles.
            metrics["time/compile_seconds"] = self._compiled_update.compile_seconds
        if "episode/return" in metrics:
            metrics["episode/return_mean"] = metrics.pop("episode/return")
        if "episode/length" in metrics:
            metrics["episode/length_mean"] = metrics.pop("episode/length")
        return IterationResult(metrics=metrics, env_steps=steps)

    def _set_learning_rate(self) -> None:
        config = self.config
        if config.learning_rate_schedule == "linear":
            remaining = max(0.0, 1.0 - self.env_steps / config.total_timesteps)
            self.learning_rate = config.learning_rate * remaining
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

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
            self.reward_normalizer.update(
                rewards, data["terminated"], data["truncated"], dist=self.dist, mask=data["valid"]
            )
            rewards = self.reward_normalizer.normalize(rewards)
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

    def _update(self, rollout: OnPolicyRollout) -> None:
        config = self.config
        advantages, returns = self._advantages(rollout)
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
        # Explained variance of the value predictions over this rank's valid samples.
        residual_var = _masked_var(epoch.returns - epoch.value, valid)
        return_var = _masked_var(epoch.returns, valid)
        self.metrics.add(
            "train/explained_variance", 1.0 - residual_var / return_var.clamp(min=1e-8)
        )
        self.model.train()
        batches = minibatch_indices(
            num_samples=flat.batch_size[0],
            batch_size=config.batch_size,
            num_mini_epochs=config.num_mini_epochs,
            generator=self._generator,
        )
        # One row of statistics per minibatch, recorded in one go after the loop.
        stats = torch.zeros(
            len(batches), len(_MINIBATCH_METRICS), dtype=torch.float32, device=self.device
        )
        done = 0
        for indices in batches:
            stop = self._minibatch_step(epoch.select(indices), stats[done])
            done += 1
            if stop:
                break
        self.metrics.add_rows(_MINIBATCH_METRICS, stats[:done])
        # The statistics change only after the update, so that every log-probability of
        # this epoch (collection and update alike) saw the same normalisation.
        self.model_unwrapped.update_normalizers(epoch.obs, dist=self.dist, mask=valid)

    def _minibatch_step(self, batch: EpochData, stats_row: Tensor) -> bool:
        """One PPO update on a minibatch; returns whether to stop the epoch (target KL).

        Writes the minibatch's statistics (``_MINIBATCH_METRICS``) into ``stats_row``.
        """
        raise_on_nonfinite = self.config.nonfinite_gradients == "raise"
        if self._compiled_update is not None:
            # It skips a non-finite update by itself: the norm is read only to raise.
            grad_norm, stats = self._compiled_update(batch)
            finite = not raise_on_nonfinite or math.isfinite(float(grad_norm))
        else:
            loss, stats = self._loss_terms(batch)
            # zero_grad(set_to_none=True) without the optimizer's per-call bookkeeping.
            for parameter in self._parameters:
                parameter.grad = None
            self.fabric.backward(loss)
            grad_norm = self._clip_gradients()
            # The finiteness decision syncs once per minibatch; every rank sees the same
            # all-reduced gradient, so every rank decides alike.
            finite = math.isfinite(float(grad_norm))
            # With a scaler, its step skips a non-finite update itself and lowers the scale.
            if finite or self._scaler is not None:
                with torch.no_grad():
                    self.optimizer.step()
        if not finite and raise_on_nonfinite:
            raise NonFiniteError(
                f"PPOAgent: non-finite gradient norm ({float(grad_norm)}) in epoch "
                f"{self.iteration}; this minibatch updated nothing"
            )
        with torch.no_grad():
            stats_row[:-2].copy_(stats)
            stats_row[-2].copy_(grad_norm)
            stats_row[-1].copy_(~torch.isfinite(grad_norm))
        return self._adapt(stats[4])

    def _loss_terms(self, batch: EpochData) -> tuple[Tensor, Tensor]:
        """The PPO loss of a minibatch and its statistics (:func:`ppo_loss`).

        Under mixed precision the loss runs in Fabric's autocast (a single process
        calls the model directly, past the wrapper's forward that would apply it).
        """
        if self._mixed:
            with self.fabric.autocast():
                return ppo_loss(self.config, batch, self._evaluate)
        return ppo_loss(self.config, batch, self._evaluate)

    def _clip_gradients(self) -> Tensor:
        """The global gradient norm; gradients scaled to ``max_grad_norm`` when it is set.

        As :func:`torch.nn.utils.clip_grad_norm_`, without its per-call grouping
        of tensors by device and dtype (the parameters share both).
        """
        if self._scaler is not None:
            # Measure and clip the true gradients, not the loss-scaled ones.
            self.fabric.strategy.precision.unscale_gradients(self.optimizer)
        grads = [p.grad for p in self._parameters if p.grad is not None]
        if not grads:
            return torch.zeros((), device=self.device)
        # ||g|| = sqrt(sum_i ||g_i||^2) over every parameter's gradient g_i
        total: Tensor = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        max_norm = self.config.max_grad_norm
        if max_norm is not None:
            # g <- g * min(1, max_norm / (||g|| + 1e-6))
            torch._foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp(max=1.0))
        return total

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
            if kl > 2.0 * config.desired_kl:
                self.learning_rate = max(config.min_learning_rate, self.learning_rate / 1.5)
            elif 0.0 < kl < config.desired_kl / 2.0:
                self.learning_rate = min(config.max_learning_rate, self.learning_rate * 1.5)
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate
        return config.target_kl is not None and kl > config.target_kl

    # --------------------------------------------------------------- checkpoints

    def _state(self) -> TrainerState:
        """The policy and its optimizer; per rank the sampler, collector and reward normaliser."""
        rank_local: dict[str, Any] = {
            "sampler": GeneratorState(self._generator),
            "collector": self.collector,
        }
        if self.reward_normalizer is not None:
            rank_local["reward_normalizer"] = self.reward_normalizer
        return TrainerState(
            modules={"policy": self.model_unwrapped},
            optimizers={"policy": self.optimizer},
            rank_local=rank_local,
        )

    def _config_dict(self) -> dict[str, Any]:
        return self.config.to_dict()


def _masked_var(x: Tensor, mask: Tensor) -> Tensor:
    mean = masked_mean(x, mask)
    return masked_mean((x - mean).square(), mask)

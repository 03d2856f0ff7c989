"""Proximal policy optimisation on Lightning Fabric."""

import time
from typing import Any, cast, final

import gymnasium as gym
from lightning_fabric import Fabric
from lightning_fabric.plugins.precision import MixedPrecision
from torch import nn
from torch.optim import Optimizer

from typedrl import _validation
from typedrl.distributed import raise_together
from typedrl.errors import ConfigError
from typedrl.metrics import TIME_COLLECT_FRACTION, TIME_SPS
from typedrl.normalization import RewardNormalizer
from typedrl.policies import PolicyFactory, image_layout
from typedrl.policies._encoders import key_spaces
from typedrl.ppo._algorithm import PPO
from typedrl.ppo._batch_plan import agree_on_batch_plan
from typedrl.ppo._collector import OnPolicyCollector
from typedrl.ppo._config import LEGACY_COMPILE_FIELD, PPOConfig, recurrent_plan_error
from typedrl.protocols import (
    ActorCritic,
    Evaluator,
    Policy,
    StatefulActorCritic,
    TensorActorCritic,
    VecEnv,
)
from typedrl.seeding import derive_seed
from typedrl.training import (
    AbstractTrainer,
    Budget,
    IterationResult,
    RunOptions,
    TrainerState,
    UpdatePath,
    build_optimizer,
    setup_module_and_optimizer,
)
from typedrl.training._policy_check import check_given_policy

__all__ = ["PPOAgent"]


def _require_single_process_compile(config: PPOConfig, world_size: int) -> None:
    """Refuse ``compile`` with several ranks, whose DDP must see the policy's forward."""
    if config.compile and world_size > 1:
        raise ConfigError(
            "PPOConfig.compile is single-process only (DDP must see the policy's forward "
            f"to average gradients); got {world_size} ranks: drop compile"
        )


def _recurrent_plan_error(config: PPOConfig, policy: object) -> ConfigError | None:
    """Why a recurrent policy cannot train with ``config``, in one line; ``None`` if it can."""
    if not isinstance(policy, StatefulActorCritic):
        return None
    return recurrent_plan_error(config, "PPOAgent", "a recurrent policy")


@final
class PPOAgent(AbstractTrainer):
    """PPO with any actor-critic (an MLP by default), on one device or several (Fabric DDP).

    A trainer on the core (:class:`~typedrl.training.AbstractTrainer`) that
    reads as trainer -> collector -> algorithm: one iteration is one epoch, in
    which the :class:`~typedrl.ppo.OnPolicyCollector` collects ``num_steps``
    steps from every env row of every rank (no gradients; finite checks on
    observations, terminal observations, policy outputs and rewards, reported
    with the kind, key, row and step) and the :class:`~typedrl.ppo.PPO`
    algorithm updates the policy on them: GAE in unnormalised value space
    (termination zeroes the bootstrap; truncation bootstraps from
    ``V(final_obs)``; ghost transitions are masked out everywhere), then
    exactly ``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``
    minibatch updates (fewer only when ``target_kl`` stops an epoch early, on
    every rank alike). That count is checked to be identical on every rank at
    start-up, because a mismatch would deadlock DDP's gradient all-reduce.
    After :meth:`~typedrl.training.AbstractTrainer.setup`, the update is
    ``algorithm`` (its optimizer, reward normaliser and learning rate in force
    live there).

    Envs that cannot provide terminal observations (``provides_final_obs ==
    False``) are bootstrapped at truncation with ``V(obs_t)``, the value of the
    last observation before the time-out, as rsl_rl does; the agent logs
    ``train/approximate_bootstrap = 1`` so the approximation is never silent.

    The policy is an :class:`~typedrl.ppo.PPOConfig`-built
    :class:`~typedrl.policies.MLPActorCritic` unless ``policy`` or
    ``policy_factory`` gives one: any :class:`torch.nn.Module` implementing
    :class:`~typedrl.protocols.ActorCritic` (its optional
    :class:`~typedrl.protocols.TensorActorCritic` methods make collection
    and update faster; :class:`~typedrl.protocols.SupportsNormalizerUpdate`
    has its observation statistics updated after each epoch). It is checked
    when the agent is built: on the run's device or the CPU, in float32 (or
    the precision's dtype), and fitting the env's spaces
    (:class:`~typedrl.errors.ConfigError` in one line otherwise). Every
    checkpoint records :attr:`policy_factory`, so ``typedrl evaluate``,
    ``export`` and ``train --resume`` can rebuild the policy.

    Args:
        env: This rank's training env.
        config: The hyper-parameters.
        policy: The actor-critic to train; default: the MLP of ``config``
            (:meth:`build_policy`), or ``policy_factory``'s.
        policy_factory: How to rebuild ``policy`` (recorded in checkpoints);
            alone, the agent builds the policy with it from the env's spaces.
            A ``policy`` without one trains, but its checkpoints cannot be
            evaluated or exported by name.
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
    resumable_changes = frozenset({"total_timesteps", "compile", LEGACY_COMPILE_FIELD, "extra"})
    """Config fields a resumed run may change: the budget, compilation, user bookkeeping
    (and ``compile_update``, which ``compile`` replaced: older checkpoints hold it)."""

    # The config, env and policy= come from the user: checked here, in words.
    @_validation.no_type_check
    def __init__(
        self,
        *,
        env: VecEnv,
        config: PPOConfig,
        policy: nn.Module | None = None,
        policy_factory: PolicyFactory | None = None,
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
        self._policy_factory: PolicyFactory | None
        self._given_policy: nn.Module | None
        self._policy_factory, self._given_policy, error = check_given_policy(
            policy,
            policy_factory,
            env,
            init_seed=derive_seed(config.seed, "init", rank=self.dist.rank),
            protocol=ActorCritic,
            outputs=("log_prob", "value"),
            fabric=self.fabric,
            owner="PPOAgent",
        )
        if error is None:
            error = _recurrent_plan_error(config, self._given_policy)
        # A rank that refuses stops every rank, before any other collective.
        raise_together(error, "the policy check", self.dist)
        _require_single_process_compile(config, self.dist.world_size)
        # Checked before any other collective: a mismatch would deadlock the update.
        self.num_minibatches = agree_on_batch_plan(
            num_envs=env.num_envs,
            num_steps=config.num_steps,
            num_mini_epochs=config.num_mini_epochs,
            batch_size=config.batch_size,
            dist=self.dist,
        )
        self.collector = OnPolicyCollector(env, num_steps=config.num_steps, dist=self.dist)

    # --------------------------------------------------------------- properties

    @property
    def policy(self) -> Policy:
        """The actor-critic, unwrapped from Fabric (its observation normalisers inside it)."""
        return cast("ActorCritic", self.model_unwrapped)

    @property
    def policy_factory(self) -> PolicyFactory | None:
        """How to rebuild the policy: :meth:`default_policy_factory`, or the one given.

        ``None`` for a ``policy`` given without a factory.
        """
        if self._given_policy is None and self._policy_factory is None:
            return self.default_policy_factory(self.config, self.env.single_observation_space)
        return self._policy_factory

    @property
    def optimizer(self) -> Optimizer:
        """The policy's optimizer, Fabric-wrapped (``algorithm``'s; after ``setup()``)."""
        return self.algorithm.optimizer

    @property
    def reward_normalizer(self) -> RewardNormalizer | None:
        """The reward normaliser, ``None`` without ``normalize_rewards`` (``algorithm``'s)."""
        return self.algorithm.reward_normalizer

    @property
    def learning_rate(self) -> float:
        """The learning rate in force, the optimizer's (``algorithm``'s)."""
        return self.algorithm.learning_rate

    @property
    def update_path(self) -> UpdatePath:
        """``"compiled"`` with ``config.compile``, else ``"eager"``."""
        return "compiled" if self.config.compile else "eager"

    @property
    def budget(self) -> Budget:
        """``config.total_timesteps`` env steps over all ranks."""
        return Budget(timesteps=self.config.total_timesteps)

    @property
    def iteration_shape(self) -> tuple[int, int]:
        """Every env row of every rank takes ``num_steps`` steps per iteration."""
        return self.global_num_envs, self.config.num_steps

    # --------------------------------------------------------------- setup

    @staticmethod
    def default_policy_factory(
        config: PPOConfig, observation_space: gym.Space[Any] | None = None
    ) -> PolicyFactory:
        """The factory of the actor-critic that PPO trains by default with ``config``.

        The image encoder's settings (``encoder``, ``image_features``) are
        recorded unless ``observation_space`` is given and holds no image
        (:func:`~typedrl.policies.image_layout`), where they change nothing:
        the factory of such a run is the one earlier releases recorded, so
        their checkpoints resume.

        Example:
            >>> factory = PPOAgent.default_policy_factory(PPOConfig(actor_hidden=(32, 32)))
            >>> factory.target, factory.kwargs["actor_hidden"], factory.kwargs["encoder"]
            ('typedrl.policies:MLPActorCritic', [32, 32], 'auto')
        """
        kwargs: dict[str, Any] = {
            "actor_hidden": list(config.actor_hidden),
            "critic_hidden": list(config.critic_hidden),
            "activation": config.activation,
            "log_std_init": config.log_std_init,
            "normalize_observations": config.normalize_observations,
            "observation_clip": config.observation_clip,
            "orthogonal_init": config.orthogonal_init,
        }
        if config.core != "mlp":
            kwargs |= {
                "core": config.core,
                "hidden_size": config.core_hidden_size,
                "num_layers": config.core_layers,
                "encoder": config.encoder,
                "image_features": config.image_features,
            }
            return PolicyFactory("typedrl.policies:RecurrentActorCritic", kwargs=kwargs)
        if observation_space is None or any(
            image_layout(space) is not None for space in key_spaces(observation_space).values()
        ):
            kwargs["encoder"] = config.encoder
            kwargs["image_features"] = config.image_features
        return PolicyFactory("typedrl.policies:MLPActorCritic", kwargs=kwargs)

    @staticmethod
    def build_policy(
        config: PPOConfig, observation_space: gym.Space[Any], action_space: gym.Space[Any]
    ) -> nn.Module:
        """The actor-critic that PPO trains with ``config`` by default (CPU, freshly initialised).

        :meth:`default_policy_factory`'s policy, which checkpoints record: an
        :class:`~typedrl.policies.MLPActorCritic`, or with ``core`` ``"gru"`` or
        ``"lstm"`` a :class:`~typedrl.policies.RecurrentActorCritic`.
        """
        factory = PPOAgent.default_policy_factory(config, observation_space)
        return factory.build(observation_space, action_space)

    def _build(self) -> None:
        config, env = self.config, self.env
        model: nn.Module = (
            self._given_policy
            if self._given_policy is not None
            else self.build_policy(config, env.single_observation_space, env.single_action_space)
        ).to(self.device)
        self.model_unwrapped = model
        precision = self.fabric.strategy.precision
        # Fused Adam: one kernel per step over all parameters (the default on CPU is a
        # loop over tensors, which dominates the update of small networks). Fabric cannot
        # unscale the gradients of an optimizer that unscales inside its step, as fused
        # Adam does, so a run with a gradient scaler (float16) uses the unfused one.
        scaled = isinstance(precision, MixedPrecision) and precision.scaler is not None
        optimizer = build_optimizer(
            list(model.parameters()),
            name="adam",
            learning_rate=config.learning_rate,
            eps=config.adam_eps,
            fused=not scaled,
        )
        # DDP must see the update's evaluation through its forward.
        evaluate = (
            "evaluate_sequence"
            if isinstance(model, StatefulActorCritic)
            else "evaluate_tensors"
            if isinstance(model, TensorActorCritic)
            else "evaluate"
        )
        self.model, wrapped_optimizer = setup_module_and_optimizer(
            self.fabric, model, optimizer, forward_methods=(evaluate,)
        )
        self.algorithm = PPO(
            model,
            config,
            model=self.model,
            optimizer=wrapped_optimizer,
            fabric=self.fabric,
            dist=self.dist,
            num_minibatches=self.num_minibatches,
            sampler_seed=derive_seed(config.seed, "sampler", rank=self.dist.rank),
        )
        """The update: advantages, minibatches, learning rate, normalisers (:class:`PPO`)."""

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
        collector.register(cast("ActorCritic", self.model_unwrapped))

    # --------------------------------------------------------------- training

    def _train_iteration(self) -> IterationResult:
        """One PPO iteration (one epoch), step by step.

        1. Collect (:meth:`OnPolicyCollector.collect
           <typedrl.ppo.OnPolicyCollector.collect>`): ``num_steps`` steps of
           every env row, without gradients, in the policy's eval mode; the
           policy's actions, log-probabilities and values, ``V(final_obs)`` on
           truncated rows, the finite checks; the episodes that ended.
        2. Record the ended episodes' returns and lengths.
        3. Update (:meth:`PPO.update <typedrl.ppo.PPO.update>`): the
           learning rate for ``env_steps`` so far, rewards normalised, GAE,
           exactly ``num_minibatches`` clipped-loss minibatch updates (fewer when
           ``target_kl`` stops the epoch), the adaptive learning rate, then the
           observation normalisers; it returns the update's rank-aggregated metrics.
        4. The iteration's metrics: the update's, the episode means over every
           rank, and the speed (env steps per second).
        """
        started = time.perf_counter()
        algorithm = self.algorithm
        # 1-2. Collect the epoch; record its episodes.
        rollout = self.collector.collect(
            cast("ActorCritic", self.model_unwrapped),
            num_steps=self.config.num_steps,
            iteration=self.iteration,
        )
        self._record_episodes(rollout.episodes)
        collect_seconds = time.perf_counter() - started
        # 3. Update.
        outcome = algorithm.update(rollout, env_steps=self.env_steps, iteration=self.iteration)
        # 4. Metrics.
        metrics = dict(outcome.metrics)
        steps = self.config.num_steps * self.global_num_envs
        elapsed = time.perf_counter() - started
        metrics[TIME_SPS] = steps / elapsed
        metrics[TIME_COLLECT_FRACTION] = collect_seconds / elapsed
        metrics.update(self._episode_means())
        return IterationResult(metrics=metrics, env_steps=steps)

    # --------------------------------------------------------------- checkpoints

    def _state(self) -> TrainerState:
        """The policy; the algorithm's optimizer, sampler and reward normaliser; the collector."""
        algorithm = self.algorithm.state()
        return TrainerState(
            modules={"policy": self.model_unwrapped},
            optimizers=algorithm.optimizers,
            rank_local={**algorithm.rank_local, "collector": self.collector},
        )

    def _config_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

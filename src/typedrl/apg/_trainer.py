"""The differentiable trainer: APG, SHAC and AHAC on the shared trainer core, with DDP."""

import math
import time
from pathlib import Path
from typing import Any, cast, final

import gymnasium as gym
import torch
from lightning_fabric import Fabric
from lightning_fabric.plugins.precision import DoublePrecision, Precision
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._results import DifferentiableRolloutSpec
from typedrl.ahac._algorithm import AHAC
from typedrl.ahac._config import AHACConfig
from typedrl.apg._algorithm import APG, DifferentiableAlgorithm, UpdateData
from typedrl.apg._collector import DifferentiableCollector, DifferentiableRollout
from typedrl.apg._trainer_config import DifferentiableTrainerConfig
from typedrl.distributed import raise_together
from typedrl.envs._wrapper import observation_normalize_mask_of
from typedrl.errors import ConfigError, DistributedError, TypedRLError
from typedrl.metrics import (
    SCHEDULE_PREFIX,
    TIME_SPS,
    TRAIN_APPLIED_UPDATES,
)
from typedrl.policies import DifferentiableMLPPolicy, PolicyFactory
from typedrl.protocols import (
    DifferentiablePolicy,
    DifferentiableVecEnv,
    Evaluator,
    Policy,
    ScheduledDifferentiableVecEnv,
    SupportsContactForces,
    VecEnv,
)
from typedrl.seeding import derive_seed
from typedrl.shac._algorithm import SHAC
from typedrl.shac._config import SHACConfig
from typedrl.training import (
    AbstractTrainer,
    Budget,
    Counters,
    IterationResult,
    RunOptions,
    TrainerState,
    UpdateCounts,
)
from typedrl.training._policy_check import check_given_policy

__all__ = ["DifferentiableTrainer"]

_Collected = tuple[UpdateData, int, dict[str, float]]
"""One update's detached data, env steps per row and schedule metrics."""


@final
class DifferentiableTrainer(AbstractTrainer):
    """Trains a policy by backpropagating through a differentiable vector env.

    A trainer on the core (:class:`~typedrl.training.AbstractTrainer`): one
    iteration is one optimizer update of the algorithm, :class:`~typedrl.apg.APG`
    or, with a :class:`~typedrl.shac.SHACConfig`, :class:`~typedrl.shac.SHAC`
    (whose :meth:`~typedrl.shac.SHAC.update` is the whole iteration), or with an
    :class:`~typedrl.ahac.AHACConfig`, :class:`~typedrl.ahac.AHAC` (likewise, on an env
    with :class:`~typedrl.protocols.SupportsContactForces`).

    - **Segmented** (``rollout_mode="segmented"``): the env keeps running; an
      update spans ``update_horizon`` steps cut into segments of
      ``segment_length``; after each segment the loss is backpropagated and the
      env's state is detached (``env.detach_state()``), so memory stays bounded.
    - **Complete** (``rollout_mode="complete"``): each of the
      ``gradient_accumulation_steps`` microbatches resets the env (a
      :class:`~typedrl.protocols.ScheduledDifferentiableVecEnv` is asked for the
      rollout's spec first: its horizon, objective scale and metadata, which is
      averaged into the logs as ``schedule/*``) and rolls out its full horizon.

    The observation normaliser (inside the policy) is frozen during an update
    and updated after each applied update from the update's alive rows,
    synchronised across ranks. In DDP every rank steps its own env rows, the
    gradients are averaged across ranks once per update (not per segment), a
    non-finite gradient on any rank skips the update on every rank, and every
    rank holds identical weights after every update. An exception in the
    middle of an update (the env's own, say) cancels it: weights, optimizer and
    scheduler are unchanged and the error surfaces with its step.

    A broken env never trains silently: a policy gradient of exactly zero on
    each of the first 3 updates raises :class:`~typedrl.errors.EnvContractError`
    (the reward or observation is cut from the action's graph), and skipped
    updates are counted in ``summary.json`` (``applied_updates``,
    ``skipped_updates``) and warned about once they pass 10% of the updates.
    With SHAC the collector masks a row cut for an exploded observation until
    the env resets it.

    Args:
        env: This rank's differentiable training env (on ``fabric.device``).
        config: The trainer's hyper-parameters.
        policy: A differentiable policy module to train (any
            :class:`torch.nn.Module` implementing
            :class:`~typedrl.protocols.DifferentiablePolicy`, on the run's
            device or the CPU, in float32 or the precision's dtype, fitting
            the env's spaces: checked when the trainer is built); by default a
            :class:`~typedrl.policies.DifferentiableMLPPolicy` built from
            ``config``, or ``policy_factory``'s.
        policy_factory: How to rebuild ``policy`` (recorded in checkpoints);
            alone, the trainer builds the policy with it from the env's
            spaces. A ``policy`` without one trains, but its checkpoints
            cannot be evaluated or exported by name.
        fabric: A launched Fabric (32-true or 64-true precision).
        eval_env: This rank's evaluation env (scored with deterministic actions).
        evaluator: Any :class:`~typedrl.protocols.Evaluator` instead of ``eval_env``.
        options: Run folder, cadences, loggers, progress.

    Example:
        >>> from typedrl.envs import make
        >>> from typedrl.training import RunOptions
        >>> env = make("typedrl/PointMass-v0", num_envs=8, seed=0)
        >>> config = DifferentiableTrainerConfig(total_updates=3, segment_length=8)
        >>> trainer = DifferentiableTrainer(
        ...     env=env, config=config, options=RunOptions(progress=False)
        ... )
        >>> result = trainer.train()
        >>> result.iterations, result.env_steps
        (3, 192)
    """

    kind = "apg"
    """APG writes and resumes checkpoints of kind ``"apg"``."""
    resumable_changes = frozenset({"total_timesteps", "total_updates", "extra"})
    """Config fields a resumed run may change: the budget and user bookkeeping."""

    def __init__(
        self,
        *,
        env: VecEnv,
        config: DifferentiableTrainerConfig,
        policy: nn.Module | None = None,
        policy_factory: PolicyFactory | None = None,
        fabric: Fabric | None = None,
        eval_env: VecEnv | None = None,
        evaluator: Evaluator | None = None,
        options: RunOptions | None = None,
    ) -> None:
        super().__init__(
            env=env,
            fabric=fabric,
            eval_env=eval_env,
            evaluator=evaluator,
            options=options,
            seed=config.seed,
        )
        self.config = config
        self._policy_factory: PolicyFactory | None = None
        error: ConfigError | None = None
        if not isinstance(env, DifferentiableVecEnv):
            error = ConfigError(
                f"DifferentiableTrainer needs a DifferentiableVecEnv (a step that keeps the "
                f"graph and detach_state()), got {type(env).__name__}"
            )
        elif isinstance(config.algorithm, AHACConfig) and not isinstance(
            env, SupportsContactForces
        ):
            error = ConfigError(
                f"AHAC needs an env with the SupportsContactForces capability "
                f"(contact_force_norm(), each row's contact-force norm per step), got "
                f"{type(env).__name__}"
            )
        elif type(self.fabric.strategy.precision) not in (Precision, DoublePrecision):
            error = ConfigError(
                "DifferentiableTrainer differentiates the env in its own dtype and supports "
                "Fabric's 32-true and 64-true precision only; got "
                f"{type(self.fabric.strategy.precision).__name__}"
            )
        else:
            self._policy_factory, policy, error = check_given_policy(
                policy,
                policy_factory,
                env,
                init_seed=derive_seed(config.seed, "init", rank=self.dist.rank),
                protocol=DifferentiablePolicy,
                outputs=(),
                fabric=self.fabric,
                owner="DifferentiableTrainer",
            )
        # A rank that refuses stops every rank, before any other collective.
        raise_together(error, "the differentiable trainer's checks", self.dist)
        self.scheduled = isinstance(env, ScheduledDifferentiableVecEnv)
        actor = (
            config.algorithm.actor
            if isinstance(config.algorithm, SHACConfig | AHACConfig)
            else config.algorithm
        )
        if (
            self.scheduled
            and config.rollout_mode == "complete"
            and actor.learning_rate_schedule != "constant"
            and config.total_updates is None
        ):
            raise ConfigError(
                "DifferentiableTrainerConfig: a scheduled env chooses each rollout's horizon, "
                f"so the {actor.learning_rate_schedule!r} learning-rate schedule "
                "cannot be planned from total_timesteps; set total_updates instead"
            )
        self._given_policy = policy
        self.collector = DifferentiableCollector(
            env,  # type: ignore[arg-type]  # checked above, on every rank
            clip_actions=config.clip_actions,
            adjoint_max_norm=config.adjoint_max_norm,
            measure_adjoint=config.measure_adjoint,
            # SHAC's and AHAC's cut rows stay masked until the env resets them.
            observation_limit=(
                config.algorithm.observation_limit
                if isinstance(config.algorithm, SHACConfig | AHACConfig)
                else None
            ),
            # AHAC's horizon follows the contact forces of each step.
            record_contacts=isinstance(config.algorithm, AHACConfig),
        )
        self.progress_counters = Counters("rollouts")
        self._reset_options = (
            {"random_elapsed_steps": True} if config.random_initial_clocks else None
        )

    # ------------------------------------------------------------------ properties

    @property
    def policy(self) -> Policy:
        """The policy being trained (its observation normaliser inside it)."""
        return self._policy

    @property
    def policy_factory(self) -> PolicyFactory | None:
        """How to rebuild the policy: :meth:`default_policy_factory`, or the one given.

        ``None`` for a ``policy`` given without a factory.
        """
        if self._given_policy is None and self._policy_factory is None:
            return self.default_policy_factory(
                self.config, observation_normalize_mask=observation_normalize_mask_of(self.env)
            )
        return self._policy_factory

    @property
    def algorithm_name(self) -> str:
        """``"shac"``, ``"ahac"`` or ``"apg"``: the config's algorithm (``summary.json``)."""
        algorithm = self.config.algorithm
        if isinstance(algorithm, SHACConfig):
            return "shac"
        return "ahac" if isinstance(algorithm, AHACConfig) else "apg"

    @property
    def budget(self) -> Budget:
        """``total_timesteps`` env steps or ``total_updates`` updates."""
        config = self.config
        if config.total_updates is not None:
            return Budget(iterations=config.total_updates)
        return Budget(timesteps=config.total_timesteps)

    @property
    def iteration_shape(self) -> tuple[int, int] | None:
        """Each update's steps per row on every row, unless a scheduled env chooses them."""
        config = self.config
        if (self.scheduled and config.rollout_mode == "complete") or isinstance(
            config.algorithm, AHACConfig
        ):
            return None
        return self.global_num_envs, config.steps_per_update

    @property
    def planned_updates(self) -> int | None:
        """The updates the run plans (what decaying learning-rate schedules are bound to).

        ``None`` for a scheduled env in complete mode budgeted in timesteps (its
        horizons, hence its updates, are not known in advance).
        """
        config = self.config
        if config.total_updates is not None:
            return config.total_updates
        if self.scheduled and config.rollout_mode == "complete":
            return None
        if isinstance(config.algorithm, AHACConfig):
            # AHAC's windows vary: a budget in env steps plans with its shortest one.
            per_update = config.algorithm.horizon_min * self.global_num_envs
            return math.ceil((config.total_timesteps or 0) / per_update)
        per_update = config.steps_per_update * self.global_num_envs
        return math.ceil((config.total_timesteps or 0) / per_update)

    # ------------------------------------------------------------------ setup

    def train(self, *, total_timesteps: int | None = None, total_updates: int | None = None) -> Any:
        """Train for the configured budget, or for this one (exactly one of the two).

        Returns:
            The :class:`~typedrl.training.FitResult` of :meth:`fit`.

        Raises:
            ConfigError: Both budgets given, or a budget given after the trainer
                was built (by :meth:`setup`, :meth:`load` or an earlier run).
        """
        if total_timesteps is not None or total_updates is not None:
            if self._is_built:
                raise ConfigError(
                    "DifferentiableTrainer.train: the budget is fixed once the trainer is built "
                    "(by setup(), load() or an earlier train()); set it in the config instead"
                )
            values = self.config.to_dict()
            values.update(total_timesteps=total_timesteps, total_updates=total_updates)
            self.config = DifferentiableTrainerConfig.from_dict(values)
        return self.fit()

    @staticmethod
    def default_policy_factory(
        config: DifferentiableTrainerConfig, *, observation_normalize_mask: Tensor | None = None
    ) -> PolicyFactory:
        """The factory of the MLP policy the trainer trains by default with ``config``.

        The env's observation normalise mask (``observation_normalize_mask``) is
        recorded as a list of bools when ``config`` normalises observations.

        Example:
            >>> config = DifferentiableTrainerConfig(total_updates=1, hidden=(32,))
            >>> factory = DifferentiableTrainer.default_policy_factory(config)
            >>> factory.target, factory.kwargs["hidden"]
            ('typedrl.policies:DifferentiableMLPPolicy', [32])
        """
        mask = (
            [bool(flag) for flag in observation_normalize_mask.tolist()]
            if observation_normalize_mask is not None and config.normalize_observations
            else None
        )
        return PolicyFactory(
            "typedrl.policies:DifferentiableMLPPolicy",
            kwargs={
                "hidden": list(config.hidden),
                "activation": config.activation,
                "layer_norm": config.layer_norm,
                "squash": config.squash_actions,
                "log_std_init": config.log_std_init,
                "learn_log_std": config.learn_log_std,
                "normalize_observations": config.normalize_observations,
                "observation_normalize_mask": mask,
                "observation_clip": config.observation_clip,
            },
        )

    @staticmethod
    def build_policy(
        config: DifferentiableTrainerConfig,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        observation_normalize_mask: Tensor | None = None,
    ) -> DifferentiableMLPPolicy:
        """The policy the trainer builds from ``config`` by default (CPU, freshly initialised).

        :meth:`default_policy_factory`'s policy, which checkpoints record.
        """
        return DifferentiableMLPPolicy(
            observation_space,
            action_space,
            hidden=config.hidden,
            activation=config.activation,
            layer_norm=config.layer_norm,
            squash=config.squash_actions,
            log_std_init=config.log_std_init,
            learn_log_std=config.learn_log_std,
            normalize_observations=config.normalize_observations,
            observation_normalize_mask=(
                observation_normalize_mask.cpu() if observation_normalize_mask is not None else None
            ),
            observation_clip=config.observation_clip,
        )

    def _build(self) -> None:
        config, env = self.config, self.env
        model = (
            self._given_policy
            if self._given_policy is not None
            else self.build_policy(
                config,
                env.single_observation_space,
                env.single_action_space,
                observation_normalize_mask=observation_normalize_mask_of(env),
            )
        )
        # On the device, in the precision's dtype (float64 under Fabric's 64-true).
        model = self.fabric.strategy.precision.convert_module(model.to(self.device))
        # Every rank starts from rank 0's weights (no DDP wrapper: the gradients are
        # averaged by hand, once per update).
        if self.dist.world_size > 1:
            with torch.no_grad():
                for tensor in [*model.parameters(), *model.buffers()]:
                    tensor.copy_(self.dist.broadcast(tensor.detach().clone(), src=0))
        self.model = model
        # Checked in __init__ (a given policy) or by construction (the default one).
        self._policy = cast("DifferentiablePolicy", model)
        self.algorithm: DifferentiableAlgorithm | SHAC | AHAC
        if isinstance(config.algorithm, AHACConfig):
            self.algorithm = AHAC(
                model,
                config.algorithm,
                dist=self.dist,
                planned_updates=self.planned_updates,
                seed=derive_seed(config.seed, "sampler", rank=self.dist.rank),
                feature_width=AHAC.feature_width(model, _zero_observation(env, self.device)),
                normalize_observations=config.normalize_observations,
            )
        elif isinstance(config.algorithm, SHACConfig):
            self.algorithm = SHAC(
                model,
                config.algorithm,
                dist=self.dist,
                planned_updates=self.planned_updates,
                seed=derive_seed(config.seed, "sampler", rank=self.dist.rank),
                feature_width=SHAC.feature_width(model, _zero_observation(env, self.device)),
                normalize_observations=config.normalize_observations,
            )
        else:
            self.algorithm = APG(
                model,
                config.algorithm,
                dist=self.dist,
                planned_updates=self.planned_updates,
                normalize_observations=config.normalize_observations,
            )

    def _prepare(self) -> None:
        """Reset the env where it has no current observation (a fresh run)."""
        collector = self.collector
        if collector.needs_reset:
            rank = self.dist.rank
            collector.reset(
                seed=derive_seed(self.config.seed, "env", rank=rank)
                if self.iteration == 0
                else derive_seed(self.config.seed, "env_restart", rank=rank, index=self.iteration),
                options=self._reset_options,
            )

    def load(
        self, path: str | Path, *, strict_config: bool = True, restart_schedule: bool = False
    ) -> None:
        """Resume from a checkpoint (see :meth:`typedrl.training.AbstractTrainer.load`).

        Args:
            path: The checkpoint file.
            strict_config: Refuse a checkpoint saved with another config.
            restart_schedule: Start the learning-rate curves (and AHAC's dual step's)
                again from their beginning (the optimizers' moments, AHAC's horizon and
                multiplier are kept), to continue a finished run.
        """
        super().load(path, strict_config=strict_config, restart_schedule=restart_schedule)

    # ------------------------------------------------------------------ training

    def _train_iteration(self) -> IterationResult:
        """One optimizer update of the algorithm.

        SHAC's is :meth:`~typedrl.shac.SHAC.update` (a window, an actor step, a
        critic regression, a target update), followed by step 4; AHAC's is
        :meth:`~typedrl.ahac.AHAC.update` (a window of its horizon, an actor step,
        the horizon's step, a critic regression). APG's:

        1. ``begin_update``: gradients cleared.
        2. Collect and backpropagate: segmented, ``update_horizon //
           segment_length`` segments of the running env, each backpropagated at
           once and its graph cut (``detach_state``); complete,
           ``gradient_accumulation_steps`` rollouts from fresh resets, each to its
           (scheduled) horizon. A failure on any rank cancels the update on every
           rank and raises there.
        3. ``finish_update``: the update kernel (one all-reduce, the skip decision,
           clipping, the optimizer step) and, when applied, what follows an
           applied update (schedule step, observation normaliser).
        4. The iteration's metrics: the update's, episodes', schedule's and speed.
        """
        started = time.perf_counter()
        algorithm = self.algorithm
        if isinstance(algorithm, AHAC):
            # Every rank holds the same horizon (it moves on pooled statistics only).
            steps = algorithm.horizon.steps
            outcome, episodes = algorithm.update(self.collector, iteration=self.iteration)
            self._record_episodes(episodes)
            return self._iteration_result(outcome.metrics, {}, steps, started, algorithm.counters)
        if isinstance(algorithm, SHAC):
            outcome, episodes = algorithm.update(
                self.collector, num_steps=self.config.segment_length, iteration=self.iteration
            )
            self._record_episodes(episodes)
            return self._iteration_result(
                outcome.metrics, {}, self.config.segment_length, started, algorithm.counters
            )
        algorithm.begin_update()
        failure: TypedRLError | None = None
        collected: _Collected | None = None
        try:
            collected = (
                self._segmented_update(algorithm)
                if self.config.rollout_mode == "segmented"
                else self._complete_update(algorithm)
            )
        except TypedRLError as error:
            algorithm.cancel_update()
            failure = error
        except BaseException:
            # Nothing of a half-accumulated update may reach the weights.
            algorithm.cancel_update()
            raise
        # A bad env output on one rank stops every rank with its message, before the
        # update's all-reduce would wait for it.
        raise_together(failure, "collecting the rollouts", self.dist)
        # Collected: raise_together raised every rank's error when this rank collected nothing.
        data, local_steps, schedule = cast("_Collected", collected)
        metrics = algorithm.finish_update(data).metrics
        return self._iteration_result(metrics, schedule, local_steps, started, algorithm.counters)

    def _iteration_result(
        self,
        metrics: dict[str, float],
        schedule: dict[str, float],
        local_steps: int,
        started: float,
        counters: Counters,
    ) -> IterationResult:
        """Step 4: the update's metrics, the episodes', the schedule's, the speed, the count."""
        metrics.update(self._episode_means())
        metrics.update(schedule)
        steps = local_steps * self.global_num_envs
        metrics[TIME_SPS] = steps / (time.perf_counter() - started)
        metrics[TRAIN_APPLIED_UPDATES] = float(counters["applied"])
        return IterationResult(metrics=metrics, env_steps=steps)

    def _segmented_update(self, algorithm: DifferentiableAlgorithm) -> _Collected:
        config = self.config
        rollouts: list[DifferentiableRollout] = []
        for _ in range(config.horizon // config.segment_length):
            rollout = self.collector.collect(
                self._policy, num_steps=config.segment_length, iteration=self.iteration
            )
            algorithm.accumulate_segment(rollout)
            self.collector.detach_state()
            self._record_episodes(rollout.episodes)
            rollouts.append(rollout.detach())
        masks = [rollout.valid for rollout in rollouts]
        return UpdateData.of(rollouts, masks), config.horizon, {}

    def _complete_update(self, algorithm: DifferentiableAlgorithm) -> _Collected:
        config, env = self.config, self.env
        accumulation = config.gradient_accumulation_steps
        rollouts: list[DifferentiableRollout] = []
        metadata: dict[str, list[float]] = {}
        local_steps = 0
        for _ in range(accumulation):
            index = self.progress_counters["rollouts"]
            spec = (
                env.prepare_differentiable_rollout(index)  # type: ignore[attr-defined]
                if self.scheduled
                else DifferentiableRolloutSpec(num_steps=config.horizon)
            )
            if self.scheduled:
                self._agree_on_horizon(spec.num_steps, index)
            # Every complete rollout starts from fresh starts of the env's own streams.
            self.collector.reset(seed=None, options=self._reset_options)
            rollout = self.collector.collect(
                self._policy, num_steps=spec.num_steps, iteration=self.iteration
            )
            algorithm.accumulate_complete_rollout(
                rollout,
                objective_scale=spec.objective_scale,
                accumulation_scale=1.0 / accumulation,
            )
            self.progress_counters["rollouts"] = index + 1
            self._record_episodes(rollout.episodes)
            rollouts.append(rollout.detach())
            local_steps += spec.num_steps
            for key, value in spec.metadata.items():
                metadata.setdefault(key, []).append(float(value))
        schedule = {SCHEDULE_PREFIX + key: sum(v) / len(v) for key, v in metadata.items()}
        masks = [rollout.alive_mask & rollout.valid for rollout in rollouts]
        return UpdateData.of(rollouts, masks), local_steps, schedule

    def _agree_on_horizon(self, num_steps: int, index: int) -> None:
        """Every rank's scheduled env must plan the same horizon, or the ranks' steps diverge.

        Raises:
            DistributedError: The ranks' envs planned different horizons (on every rank).
        """
        if self.dist.world_size == 1:
            return
        planned = self.dist.all_gather(torch.tensor([num_steps], device=self.device))
        horizons = [int(value) for value in planned.reshape(-1).tolist()]
        if len(set(horizons)) > 1:
            by_rank = ", ".join(f"rank {rank}: {steps}" for rank, steps in enumerate(horizons))
            raise DistributedError(
                f"complete rollout {index}: the ranks' scheduled envs planned different "
                f"horizons ({by_rank}); prepare_differentiable_rollout must return the same "
                "num_steps on every rank (derive the schedule from the rollout index, not "
                "from rank-local state), or the ranks' env-step counts diverge"
            )

    # ------------------------------------------------------------------ checkpoints

    def _state(self) -> TrainerState:
        """Policy, algorithm counters, rollout index; optimizer and scheduler; the collector."""
        algorithm = self.algorithm.state()
        return TrainerState(
            modules={"policy": self.model, "progress": self.progress_counters, **algorithm.modules},
            optimizers=algorithm.optimizers,
            schedulers=algorithm.schedulers,
            rank_local={"collector": self.collector, **algorithm.rank_local},
        )

    def _config_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

    def _update_counts(self) -> UpdateCounts:
        """The algorithm's applied and skipped updates (checkpointed, so over the whole run)."""
        counters = self.algorithm.counters
        field = (
            "algorithm.actor.nonfinite"
            if isinstance(self.config.algorithm, SHACConfig | AHACConfig)
            else "algorithm.nonfinite"
        )
        return UpdateCounts(
            applied=counters["applied"],
            skipped=counters["skipped"],
            advice=(
                "See train/skipped_nonfinite and train/skipped_large in metrics.csv; "
                f"{field}='raise' stops at the first non-finite update and says whether the "
                "env returned NaN"
            ),
        )


def _zero_observation(env: VecEnv, device: torch.device) -> TensorDict:
    """One row of zeros shaped as the env's observations (to size a network's input)."""
    space = env.single_observation_space
    spaces = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {"obs": space}
    return TensorDict(
        {
            key: torch.zeros(1, *(sub.shape or ()), dtype=torch.float32, device=device)
            for key, sub in spaces.items()
        },
        batch_size=[1],
        device=device,
    )

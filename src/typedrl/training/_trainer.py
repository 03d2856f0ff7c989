"""The training lifecycle both trainer families stand on: fit loop, evaluation, checkpoints."""

import math
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, final

import torch
from lightning_fabric import Fabric
from lightning_fabric.loggers.logger import Logger
from torch.optim.lr_scheduler import LambdaLR

from typedrl._results import EvaluationResult
from typedrl._tensor_checks import same_device
from typedrl._validation import describe, positive_int
from typedrl.checkpoint import Checkpoint, CheckpointKind, CheckpointPaths, check_kind
from typedrl.checkpoint._match import resume_mismatch
from typedrl.checkpoint._state import Progress, SupportsScheduleRestart, TrainerState
from typedrl.checkpoint._trainer_io import (
    read_trainer_checkpoint,
    restore_trainer_state,
    save_trainer_state,
)
from typedrl.distributed import (
    Distributed,
    FabricDistributed,
    collective_failure,
    raise_together,
)
from typedrl.episodes import EpochEpisodes
from typedrl.errors import CheckpointError, ConfigError, EnvError, TypedRLError
from typedrl.evaluation import EpisodeEvaluator, pool_evaluations
from typedrl.logging import MetricAggregator, ProgressDisplay, build_loggers
from typedrl.metrics import (
    EPISODE_LENGTH,
    EPISODE_LENGTH_MEAN,
    EPISODE_RETURN,
    EPISODE_RETURN_MEAN,
    EVAL_EPISODES,
    EVAL_PREFIX,
    EVAL_RETURN_MEAN,
    EVAL_RETURN_STD,
    EVAL_SCORE,
    TIME_ENV_STEPS,
    TIME_ITERATION,
    TIME_ITERATION_SECONDS,
)
from typedrl.policies import PolicyFactory
from typedrl.protocols import Evaluator, Policy, VecEnv
from typedrl.seeding import derive_seed
from typedrl.training._fabric import default_fabric, require_fabric
from typedrl.training._options import RunOptions
from typedrl.training._signals import StopRequest
from typedrl.training._summary import RunSummary, UpdatePath, finite_or_none, write_summary
from typedrl.training._update import restart_schedule as restart_lr_schedule
from typedrl.training._update import resync_schedule

__all__ = [
    "SKIPPED_WARNING_FRACTION",
    "SKIPPED_WARNING_MIN_UPDATES",
    "AbstractTrainer",
    "Budget",
    "FitResult",
    "IterationResult",
    "UpdateCounts",
]

_EPISODE_MEANS: Final = {EPISODE_RETURN: EPISODE_RETURN_MEAN, EPISODE_LENGTH: EPISODE_LENGTH_MEAN}
"""What :meth:`AbstractTrainer._record_episodes` records, and the mean each is logged as."""

_ITERATION = "iteration"
_ENV_STEPS = "env_steps"

SKIPPED_WARNING_FRACTION: Final = 0.1
"""The console warns, once, when more than this share of the updates so far was skipped."""
SKIPPED_WARNING_MIN_UPDATES: Final = 10
"""Updates a run makes before that warning can be given."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """How long a run trains: exactly one of a number of env steps or of iterations.

    Example:
        >>> Budget(timesteps=100_000).timesteps
        100000
        >>> Budget(timesteps=10, iterations=2)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Budget needs exactly one of timesteps and iterations, got both
    """

    timesteps: int | None = None
    """Env steps over all envs and ranks."""
    iterations: int | None = None
    """Training iterations (PPO epochs, optimizer updates)."""

    def __post_init__(self) -> None:
        given = [name for name in ("timesteps", "iterations") if getattr(self, name) is not None]
        if len(given) != 1:
            found = "both" if given else "neither"
            raise ConfigError(f"Budget needs exactly one of timesteps and iterations, got {found}")
        positive_int("Budget", given[0], getattr(self, given[0]))

    def spent(self, *, iterations: int, env_steps: int) -> bool:
        """Whether a run at these counters has nothing left to train."""
        if self.timesteps is not None:
            return env_steps >= self.timesteps
        return self.iterations is not None and iterations >= self.iterations


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class IterationResult:
    """What one training iteration returns to the trainer core."""

    metrics: dict[str, float]
    """Rank-aggregated metrics of the iteration (identical on every rank)."""
    env_steps: int
    """Env steps the iteration took, summed over every env row of every rank."""

    def __post_init__(self) -> None:
        if self.env_steps < 0:
            raise ConfigError(f"IterationResult.env_steps must be >= 0, got {self.env_steps}")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateCounts:
    """A trainer's optimizer updates that were applied and skipped (over the whole run)."""

    applied: int
    """Updates that changed the weights."""
    skipped: int
    """Updates dropped for a non-finite or too large gradient (the weights untouched)."""
    advice: str
    """What to do when many are skipped (the console warning's last sentence)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FitResult:
    """What :meth:`AbstractTrainer.fit` returns."""

    metrics: dict[str, float]
    """The latest value of every metric logged during the run."""
    iterations: int
    """Iterations done (over the whole run, resumed parts included)."""
    env_steps: int
    """Env steps taken over all ranks."""
    best_score: float | None
    """The best value of ``RunOptions.best_metric`` (the evaluation score by default), or
    ``None`` when nothing was evaluated."""
    stopped_by_signal: bool
    """Whether a SIGINT/SIGTERM stopped the run before its budget was spent."""
    run_dir: Path | None
    """The run's folder, if it has one."""
    wall_seconds: float
    """Wall time of this :meth:`~AbstractTrainer.fit` call."""


class AbstractTrainer(ABC):
    """The lifecycle of every typedrl trainer; subclasses supply the algorithm.

    The core owns the Fabric setup, the loop, the counters (iterations, env
    steps), evaluation on schedule through an injected
    :class:`~typedrl.protocols.Evaluator`, the checkpoint schedule
    (``last.ckpt`` rolling, ``best.ckpt``, periodic ``epoch_<n>.ckpt``), resume
    with the config check, rank-aggregated logging and the progress display.
    It knows no algorithm. A concrete trainer sets :attr:`kind` and implements:

    - :meth:`_build`: its modules and optimizers, set up with Fabric;
    - :meth:`_prepare`: anything the next iteration needs before the loop starts
      (a first env reset, or a restart after a resume without env state);
    - :meth:`_train_iteration`: one iteration, returning its metrics and env steps;
    - :meth:`_state`: its :class:`TrainerState` (what a checkpoint holds);
    - :meth:`_config_dict`, :attr:`policy` and :attr:`budget`;
    - optionally :meth:`_update_counts`, when an iteration may skip its update,
      and :attr:`policy_factory`, so that its checkpoints can be evaluated and
      exported by name.

    Args:
        env: This rank's training env.
        fabric: A launched Fabric; by default a single-process one.
        eval_env: This rank's evaluation env, scored by an
            :class:`~typedrl.evaluation.EpisodeEvaluator` with
            ``options.eval_episodes`` episodes (seeded from ``seed``).
        evaluator: Any evaluator instead (not together with ``eval_env``);
            neither: the run is not evaluated.
        options: Run folder, cadences, loggers, progress.
        seed: The run's seed, from which the default evaluator's seed derives.
    """

    kind: ClassVar[CheckpointKind]
    """The checkpoint kind the trainer writes and accepts (set by every concrete trainer).

    Any identifier-like string (:func:`~typedrl.checkpoint.check_kind`): ``"ppo"``
    and ``"apg"`` are typedrl's; a trainer of your own declares its own."""
    resumable_changes: ClassVar[frozenset[str]] = frozenset()
    """Config fields that may differ between a checkpoint and the trainer resuming it."""

    def __init__(
        self,
        *,
        env: VecEnv,
        fabric: Fabric | None = None,
        eval_env: VecEnv | None = None,
        evaluator: Evaluator | None = None,
        options: RunOptions | None = None,
        seed: int = 0,
    ) -> None:
        kind: object = getattr(type(self), "kind", None)
        try:
            check_kind(kind, where=f"{type(self).__name__}.kind")
        except ConfigError as error:
            raise TypeError(str(error)) from None
        if not isinstance(env, VecEnv):
            raise ConfigError(f"env must be a typedrl VecEnv, got {type(env).__name__}")
        if options is None:
            options = RunOptions()
        if eval_env is not None and evaluator is not None:
            raise ConfigError(
                "pass eval_env (scored by the default EpisodeEvaluator) or evaluator, not both"
            )
        if evaluator is not None and not isinstance(evaluator, Evaluator):
            raise ConfigError(
                f"evaluator must implement typedrl.protocols.Evaluator, got {describe(evaluator)}"
            )
        self.env = env
        self.options = options
        self.fabric = (
            require_fabric(fabric, type(self).__name__) if fabric is not None else default_fabric()
        )
        self.dist: Distributed = FabricDistributed(self.fabric)
        self.device = self.fabric.device
        device_error = (
            ConfigError(
                f"the env runs on {env.device} but Fabric on {self.device}; "
                "create the env on fabric.device"
            )
            if not same_device(env.device, self.device)
            else None
        )
        # A rank with the wrong device stops every rank, before any other collective.
        raise_together(device_error, "the env device check", self.dist)
        env_rows = torch.tensor([env.num_envs], dtype=torch.int64, device=self.dist.device)
        self.global_num_envs = int(self.dist.all_reduce_sum(env_rows).item())
        """Env rows over every rank (every rank's ``env.num_envs`` summed)."""
        self.run_dir = Path(options.run_dir) if options.run_dir is not None else None
        self.paths = CheckpointPaths(self.run_dir / "checkpoints") if self.run_dir else None
        loggers: Sequence[Logger] = options.loggers or ()
        if options.loggers is None and self.run_dir is not None and self.dist.is_main:
            loggers = tuple(build_loggers(self.run_dir))
        self.loggers: list[Logger] = list(loggers)
        if eval_env is not None:
            evaluator = EpisodeEvaluator(
                eval_env,
                num_episodes=options.eval_episodes,
                seed=derive_seed(seed, "eval_env", rank=self.dist.rank),
            )
        self.evaluator = evaluator
        self.seed = seed
        """The run's seed (streams a resume on another number of ranks re-derives)."""
        self.iteration = 0
        self.env_steps = 0
        self.best_score: float | None = None
        self.last_metrics: dict[str, float] = {}
        self.episode_metrics = MetricAggregator(list(_EPISODE_MEANS), device=self.device)
        """The training episodes recorded since the last iteration's metrics."""
        self._is_built = False
        self._next_eval = options.eval_every_steps
        self._evaluated_at: int | None = None
        self._last_saved_iteration = 0
        self._last_saved_time = time.monotonic()
        self._best_return_mean: float | None = None
        self._warned_skipping = False

    @property
    def algorithm_name(self) -> str:
        """The algorithm's name in ``summary.json``.

        The checkpoint kind, unless a trainer running several algorithms names the one it runs.
        """
        return self.kind

    @property
    def update_path(self) -> UpdatePath:
        """How this trainer runs its updates, as ``summary.json`` records it (``"eager"``).

        A trainer that compiles its update when asked (PPO's ``compile``) says ``"compiled"``.
        """
        return "eager"

    @property
    def iteration_shape(self) -> tuple[int, int] | None:
        """``(env rows over every rank, steps per row)`` of one iteration, or ``None``.

        ``None`` (the default) when an iteration's length is not known in advance.
        With a shape, :meth:`fit` says on the console when a budget in env steps is
        rounded up to whole iterations (the loop stops at the first iteration
        boundary at or past the budget).
        """
        return None

    @property
    def policy_factory(self) -> PolicyFactory | None:
        """How to rebuild :attr:`policy`, recorded in every checkpoint (``None``: not recorded).

        ``typedrl evaluate``, ``export`` and ``--video`` rebuild a checkpoint's
        policy with it. The default records none; a trainer overrides it.
        """
        return None

    # ------------------------------------------------------------- to implement

    @property
    @abstractmethod
    def policy(self) -> Policy:
        """The policy evaluation runs (the unwrapped model)."""

    @property
    @abstractmethod
    def budget(self) -> Budget:
        """How long the run trains."""

    @abstractmethod
    def _build(self) -> None:
        """Build the modules and optimizers and set them up with Fabric (called once)."""

    @abstractmethod
    def _prepare(self) -> None:
        """Get ready for the next iteration; called at the start of every :meth:`fit`."""

    @abstractmethod
    def _train_iteration(self) -> IterationResult:
        """Run one iteration; return its rank-aggregated metrics and the env steps it took."""

    @abstractmethod
    def _state(self) -> TrainerState:
        """The checkpointable objects of the trainer (the same names every call)."""

    @abstractmethod
    def _config_dict(self) -> dict[str, Any]:
        """The run's configuration as JSON-like values."""

    def _update_counts(self) -> UpdateCounts | None:
        """Applied and skipped updates so far, identical on every rank.

        ``None`` (the default) for a trainer that never skips a whole update;
        ``summary.json`` then records ``null`` for both counts.
        """
        return None

    # ------------------------------------------------------------- episodes

    def _record_episodes(self, episodes: EpochEpisodes) -> None:
        """Record the returns and lengths of the episodes that ended (no host sync)."""
        ended = episodes.ended.reshape(-1)
        self.episode_metrics.add_many(EPISODE_RETURN, episodes.returns.reshape(-1), ended)
        self.episode_metrics.add_many(EPISODE_LENGTH, episodes.lengths.reshape(-1), ended)

    def _episode_means(self) -> dict[str, float]:
        """The recorded episodes' mean return and length over every rank; clears the record.

        One collective; a mean is left out when no rank's episode ended.
        """
        reduced = self.episode_metrics.reduce(self.dist)
        return {mean: reduced[name] for name, mean in _EPISODE_MEANS.items() if name in reduced}

    # ------------------------------------------------------------- lifecycle

    def setup(self) -> None:
        """Build the modules and optimizers and set them up with Fabric (idempotent).

        Torch's global generator is seeded from the run's ``"init"`` stream of this
        rank first, so the modules' initial weights derive from the run seed.
        """
        if not self._is_built:
            torch.manual_seed(derive_seed(self.seed, "init", rank=self.dist.rank))
            self._build()
            self._is_built = True

    def fit(self) -> FitResult:
        """Train until the budget is spent or a stop is requested; return the final metrics.

        The final policy is evaluated (when there is an evaluator and the last
        iteration did not evaluate it) before ``last.ckpt`` is written. The
        first SIGINT/SIGTERM on any rank finishes the current iteration on
        every rank, saves ``last.ckpt`` and returns normally without the final
        evaluation (``FitResult.stopped_by_signal``); a second one aborts at
        once. Loggers are finalised whatever happens (``"failed"`` when an
        exception leaves the loop).

        Raises:
            DistributedError: A collective failed because another rank died or
                hung past the collective timeout (the lost rank is named where
                it can be known).
        """
        status = "failed"
        try:
            self.setup()
            result = self._fit()
            status = "success"
            return result
        except RuntimeError as error:
            lost = collective_failure(error, self.dist)
            if lost is None:
                raise
            raise lost from error
        finally:
            for logger in self.loggers:
                logger.finalize(status)

    def _fit(self) -> FitResult:
        started = time.perf_counter()
        steps_at_start = self.env_steps
        self._prepare()
        budget = self.budget
        by_steps = budget.timesteps is not None
        total = budget.timesteps if by_steps else budget.iterations
        if self.dist.is_main:
            rounding = self.budget_rounding(budget)
            if rounding is not None:
                print(f"budget          {rounding}", flush=True)
        self._last_saved_iteration = self.iteration
        self._last_saved_time = time.monotonic()
        stopped = False
        with (
            StopRequest(announce=self.dist.is_main) as stop,
            ProgressDisplay(
                total_steps=total or 0,
                enabled=self.options.progress and self.dist.is_main,
                unit="steps" if by_steps else "iterations",
            ) as display,
        ):
            while not budget.spent(iterations=self.iteration, env_steps=self.env_steps):
                iteration_started = time.perf_counter()
                result = self._train_iteration()
                self.iteration += 1
                self.env_steps += result.env_steps
                metrics = dict(result.metrics)
                metrics[TIME_ITERATION_SECONDS] = time.perf_counter() - iteration_started
                self._evaluate_on_schedule(metrics)
                self._log(metrics)
                self._warn_if_skipping()
                display.update(
                    steps=self.env_steps if by_steps else self.iteration, metrics=metrics
                )
                periodic = self.options.checkpoint_every_iterations
                if periodic and self.iteration % periodic == 0:
                    self.save(self.paths.periodic(self.iteration) if self.paths else None)
                    self._prune_periodic()
                # Checked last, so that a signal received while logging stops this iteration.
                stopped, save_due = self._agree(stop.requested, self._last_checkpoint_due())
                if stopped:
                    break
                if save_due:
                    self._save_last()
            self.last_metrics["stopped_by_signal"] = float(stopped)
            # Evaluate the final policy unless it was just evaluated or a signal asked to stop.
            if self.evaluator is not None and not stopped and self._evaluated_at != self.env_steps:
                self._log(self.evaluate())
            if self._last_saved_iteration != self.iteration or self._evaluated_at == self.env_steps:
                self._save_last()
        fitted = FitResult(
            metrics=dict(self.last_metrics),
            iterations=self.iteration,
            env_steps=self.env_steps,
            best_score=self.best_score,
            stopped_by_signal=stopped,
            run_dir=self.run_dir,
            wall_seconds=time.perf_counter() - started,
        )
        self._write_summary(fitted, env_steps_taken=self.env_steps - steps_at_start)
        return fitted

    def budget_rounding(self, budget: Budget) -> str | None:
        """What a budget in env steps becomes in whole iterations, when it is rounded up.

        ``None`` when the budget is in iterations, is a whole number of them (from
        the env steps taken so far), is spent, or :attr:`iteration_shape` is unknown.
        """
        shape = self.iteration_shape
        remaining = None if budget.timesteps is None else budget.timesteps - self.env_steps
        if shape is None or budget.timesteps is None or remaining is None or remaining <= 0:
            return None
        rows, steps = shape
        iterations = math.ceil(remaining / (rows * steps))
        total = self.env_steps + iterations * rows * steps
        if total == budget.timesteps:
            return None
        plural = "" if iterations == 1 else "s"
        taken = f", after the {self.env_steps:,} taken" if self.env_steps else ""
        return (
            f"total_timesteps {budget.timesteps:,} rounded up to {total:,} ({iterations:,} "
            f"iteration{plural} of {rows:,} envs x {steps:,} steps{taken})"
        )

    def summary(self, result: FitResult, *, env_steps_taken: int) -> RunSummary:
        """What ``summary.json`` records for ``result`` (``env_steps_taken`` in that fit call)."""
        metrics = result.metrics
        paths = self.paths

        def relative(path: Path | None) -> str | None:
            if path is None or self.run_dir is None or not path.is_file():
                return None
            return str(path.relative_to(self.run_dir))

        wall = result.wall_seconds
        counts = self._update_counts()
        return RunSummary(
            algorithm=self.algorithm_name,
            env_id=self.options.env_id,
            global_step=result.env_steps,
            num_updates=result.iterations,
            applied_updates=counts.applied if counts is not None else None,
            skipped_updates=counts.skipped if counts is not None else None,
            wall_time_s=wall,
            env_steps_per_s=env_steps_taken / wall if wall > 0 else 0.0,
            final_eval_return_mean=finite_or_none(metrics.get(EVAL_RETURN_MEAN)),
            final_eval_return_std=finite_or_none(metrics.get(EVAL_RETURN_STD)),
            final_eval_score=finite_or_none(metrics.get(EVAL_SCORE)),
            best_eval_return_mean=finite_or_none(self._best_return_mean),
            best_score=finite_or_none(result.best_score),
            checkpoint_best=relative(paths.best if paths else None),
            checkpoint_last=relative(paths.last if paths else None),
            stopped_by_signal=result.stopped_by_signal,
            update=self.update_path,
        )

    def _warn_if_skipping(self) -> None:
        """Say once, on rank 0's standard error, that too many updates are being skipped.

        The threshold is more than :data:`SKIPPED_WARNING_FRACTION` of the
        updates so far, once there are :data:`SKIPPED_WARNING_MIN_UPDATES`.
        """
        counts = self._update_counts()
        if counts is None or self._warned_skipping or not self.dist.is_main:
            return
        total = counts.applied + counts.skipped
        if (
            total < SKIPPED_WARNING_MIN_UPDATES
            or counts.skipped <= SKIPPED_WARNING_FRACTION * total
        ):
            return
        self._warned_skipping = True
        print(
            f"warning: {counts.skipped:,} of the {total:,} updates so far were skipped (a "
            "non-finite or too large gradient; the weights did not move on them). "
            f"{counts.advice}",
            file=sys.stderr,
            flush=True,
        )

    def _write_summary(self, result: FitResult, *, env_steps_taken: int) -> None:
        """Write ``summary.json`` on rank 0 (with a run folder); a failure stops every rank."""
        error: TypedRLError | None = None
        if self.run_dir is not None and self.dist.is_main:
            try:
                write_summary(self.run_dir, self.summary(result, env_steps_taken=env_steps_taken))
            except TypedRLError as failure:
                error = failure
        raise_together(error, "writing summary.json", self.dist)

    def _prune_periodic(self) -> None:
        """Keep only the newest ``RunOptions.keep_checkpoints`` periodic checkpoints (rank 0)."""
        keep = self.options.keep_checkpoints
        if keep is None or self.paths is None or not self.dist.is_main:
            return
        for _, path in self.paths.periodic_files()[keep:]:
            path.unlink(missing_ok=True)

    def _evaluate_on_schedule(self, metrics: dict[str, float]) -> None:
        every = self.options.eval_every_steps
        if self._next_eval is None or every is None or self.env_steps < self._next_eval:
            return
        metrics.update(self.evaluate())
        while self._next_eval <= self.env_steps:
            self._next_eval += every

    def evaluate(self) -> dict[str, float]:
        """Evaluate the policy on every rank; every ``eval/*`` metric is pooled across ranks.

        Metrics are pooled with :func:`~typedrl.evaluation.pool_evaluations`
        (means weighted by episodes, extremes over ranks, pooled standard
        deviations). Writes ``best.ckpt`` when the pooled score is finite and
        strictly better than the best so far.
        """
        if self.evaluator is None:
            return {}
        self.setup()
        error: TypedRLError | None = None
        result: EvaluationResult | None = None
        try:
            result = self.evaluator.evaluate(self.policy)
        except TypedRLError as failure:
            error = failure
        except Exception as failure:
            # Any failure, not only typedrl's, must reach the other ranks.
            error = EnvError(
                f"the evaluator ({type(self.evaluator).__name__}) raised "
                f"{type(failure).__name__} at iteration {self.iteration}: {failure}"
            )
            error.__cause__ = failure
        # An evaluation that fails on one rank must stop every rank, not leave them waiting.
        raise_together(error, "evaluation", self.dist)
        if result is None:  # evaluation failed here, and raise_together has raised
            return {}
        # Plain values through the process group (a result's read-only mapping does not pickle).
        gathered = self.dist.all_gather_object(
            (dict(result.metrics), result.score, result.num_items)
        )
        pooled = pool_evaluations(
            [
                EvaluationResult(metrics=metrics, score=score, num_items=num_items)
                for metrics, score, num_items in gathered
            ]
        )
        self._evaluated_at = self.env_steps
        metrics = {EVAL_PREFIX + name: value for name, value in pooled.metrics.items()}
        metrics[EVAL_SCORE] = pooled.score
        metrics[EVAL_EPISODES] = float(pooled.num_items)
        name = self.options.best_metric
        if name not in metrics:
            raise ConfigError(
                f"RunOptions.best_metric is {name!r}, but the evaluation reports only "
                f"{sorted(metrics)}"
            )
        value = metrics[name]
        better = self.best_score is None or (
            value > self.best_score if self.options.best_mode == "max" else value < self.best_score
        )
        if math.isfinite(value) and better:
            self.best_score = value
            self.save(self.paths.best if self.paths else None)
        mean = metrics.get(EVAL_RETURN_MEAN)
        if (
            mean is not None
            and math.isfinite(mean)
            and (self._best_return_mean is None or mean > self._best_return_mean)
        ):
            self._best_return_mean = mean
        self.last_metrics.update(metrics)
        return metrics

    def _score_is_return_mean(self) -> bool:
        """Whether ``best_score`` is the best evaluation return mean (default evaluator)."""
        return (
            isinstance(self.evaluator, EpisodeEvaluator)
            and self.options.best_metric in (EVAL_SCORE, EVAL_RETURN_MEAN)
            and self.options.best_mode == "max"
        )

    def _last_checkpoint_due(self) -> bool:
        """Whether ``last.ckpt`` should be refreshed now (this rank's view)."""
        every_iterations = self.options.last_checkpoint_every_iterations
        every_seconds = self.options.last_checkpoint_every_seconds
        by_count = (
            every_iterations is not None
            and self.iteration - self._last_saved_iteration >= every_iterations
        )
        by_time = (
            every_seconds is not None and time.monotonic() - self._last_saved_time >= every_seconds
        )
        return by_count or by_time

    def _agree(self, stop: bool, save: bool) -> tuple[bool, bool]:
        """Whether any rank asks to stop and whether any asks to save (one collective)."""
        if self.dist.world_size == 1:
            return stop, save
        flags = torch.tensor([float(stop), float(save)], device=self.dist.device)
        agreed = self.dist.all_reduce_sum(flags).cpu()
        return bool(agreed[0] > 0.0), bool(agreed[1] > 0.0)

    def _save_last(self) -> None:
        self.save(self.paths.last if self.paths else None)
        self._last_saved_iteration = self.iteration
        self._last_saved_time = time.monotonic()

    def _log(self, metrics: dict[str, float]) -> None:
        metrics[TIME_ENV_STEPS] = float(self.env_steps)
        metrics[TIME_ITERATION] = float(self.iteration)
        self.last_metrics.update(metrics)
        if self.dist.is_main:
            for logger in self.loggers:
                logger.log_metrics(dict(metrics), step=self.env_steps)

    # ------------------------------------------------------------- checkpoints

    def save(self, path: str | Path | None) -> Path | None:
        """Write a full checkpoint to ``path`` on rank 0 (every rank must call it).

        ``None`` writes nothing (a rank without a run folder still takes part in
        the collectives, so that the ranks never wait on each other).

        Shared state (:attr:`TrainerState.modules`, optimizers, schedulers,
        counters) comes from rank 0; :attr:`TrainerState.rank_local` state and
        RNG states are gathered from every rank (``"<name>.rank<r>"``).

        Returns:
            The file written on rank 0, ``None`` on the other ranks.
        """
        self.setup()
        return save_trainer_state(
            path,
            self._state,
            dist=self.dist,
            kind=self.kind,
            progress=Progress(
                iteration=self.iteration, env_steps=self.env_steps, best_score=self.best_score
            ),
            config=self._config_dict,
            policy_factory=self.policy_factory,
            env_id=self.options.env_id,
        )

    def load(
        self, path: str | Path, *, strict_config: bool = True, restart_schedule: bool = False
    ) -> None:
        """Resume from a checkpoint written by :meth:`save` (call before :meth:`fit`).

        Every learning-rate scheduler of :attr:`TrainerState.schedulers` (the
        policy's and, for SHAC, the critic's alike) is then put on this run's
        curve: at its saved update of this run's plan (a longer budget has
        another curve; within the same plan nothing changes), or, with
        ``restart_schedule``, at the curve's beginning, as is every other
        object of the state that keeps a place on a schedule
        (:class:`SupportsScheduleRestart`: AHAC's horizon).

        Args:
            path: The checkpoint file.
            strict_config: Refuse a checkpoint whose config differs from this
                trainer's in any field but :attr:`resumable_changes`. The
                checkpoint holds rank 0's config, so rank 0 compares its own
                and a mismatch stops every rank. Pass ``False`` to resume with
                changed hyper-parameters on purpose; the run then no longer
                equals an uninterrupted one.
            restart_schedule: Start every learning-rate curve, and every other
                schedule of the state (:class:`SupportsScheduleRestart`), again
                from its beginning (the optimizers' moments and learned values
                are kept), to continue a finished run.

        Raises:
            CheckpointError: If the file is missing, corrupt, of another kind,
                lacks a piece of the trainer's state, holds state of another
                architecture, or (with ``strict_config``) was saved with another
                config. The file, kind and config are checked before the trainer
                is touched; a failure on one rank raises on every rank.

        A checkpoint saved by another number of ranks resumes too, valid but
        not bit-exact (rank 0 prints one line saying so): the shared state
        (modules, optimizers, schedulers, counters, best score) is restored
        exactly; of :attr:`TrainerState.rank_local` only the rank-independent part
        of rank 0's objects (:class:`SupportsSharedState`) is kept, generators
        and the global RNGs are re-seeded with :func:`~typedrl.seeding.derive_seed`
        (index: the iteration resumed at) and the collectors reset their envs.
        """

        def mismatch(checkpoint: Checkpoint) -> CheckpointError | None:
            return resume_mismatch(
                checkpoint,
                path,
                config=self._config_dict(),
                resumable_changes=self.resumable_changes,
                policy_factory=self.policy_factory,
            )

        checkpoint = read_trainer_checkpoint(
            path, dist=self.dist, kind=self.kind, mismatch=mismatch if strict_config else None
        )
        self.setup()
        state = self._state()
        progress = restore_trainer_state(
            checkpoint,
            state,
            file=Path(path),
            dist=self.dist,
            owner=type(self).__name__,
            seed=self.seed,
        )
        self.iteration = progress.iteration
        self.env_steps = progress.env_steps
        self.best_score = progress.best_score
        if self._score_is_return_mean():
            self._best_return_mean = progress.best_score
        every = self.options.eval_every_steps
        if every is not None:
            self._next_eval = (self.env_steps // every + 1) * every
        _put_on_curve(state, restart=restart_schedule)


def _put_on_curve(state: TrainerState, *, restart: bool) -> None:
    """Every schedule of the state on this run's curve: resynced or restarted.

    An object with a schedule of its own (:class:`SupportsScheduleRestart`)
    computes its place on this run's curve itself; it only needs the restart.
    """
    for scheduler in state.schedulers.values():
        if isinstance(scheduler, LambdaLR):
            (restart_lr_schedule if restart else resync_schedule)(scheduler)
    if restart:
        for group in (state.modules, state.optimizers, state.schedulers, state.rank_local):
            for item in group.values():
                if isinstance(item, SupportsScheduleRestart):
                    item.restart_schedule()

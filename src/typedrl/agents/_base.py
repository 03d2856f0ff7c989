"""The Fabric lifecycle shared by on-policy agents: setup, fit loop, evaluation, checkpoints."""

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from lightning.fabric import Fabric
from lightning.fabric.loggers.logger import Logger

from typedrl._values import EvaluationResult
from typedrl.agents._fabric import default_fabric
from typedrl.agents._signals import StopRequest
from typedrl.checkpoint import (
    Checkpoint,
    CheckpointKind,
    CheckpointMetadata,
    CheckpointPaths,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from typedrl.distributed import Distributed, FabricDistributed, raise_together
from typedrl.errors import CheckpointError, ConfigError, TypedRLError
from typedrl.evaluation import EpisodeEvaluator
from typedrl.logging import ProgressDisplay, build_loggers
from typedrl.protocols import Policy, VecEnv

__all__ = ["BaseAgent", "FitResult"]


class FitResult(dict[str, Any]):
    """What :meth:`BaseAgent.fit` returns: the last metrics, counters and best score."""


class BaseAgent(ABC):
    """Lifecycle of a Fabric-based agent; subclasses supply the algorithm.

    Order of operations: :meth:`setup` builds the model (:meth:`_build`),
    which also materialises lazy modules with one eval-mode, no-grad forward,
    creates the optimizer and calls ``fabric.setup``; :meth:`fit` then runs
    epochs (:meth:`_train_epoch`) until the budget is spent or a stop signal
    arrives, logging rank-aggregated metrics on rank 0, evaluating on schedule
    on the evaluation env (never on the training env, so no update is thrown
    away), and checkpointing on schedule.

    Args:
        env: This rank's training env.
        fabric: A launched Fabric; by default a single-process one.
        eval_env: This rank's evaluation env (evaluation is skipped without one).
        run_dir: Folder for logs and checkpoints; ``None`` disables both.
        eval_every_steps: Evaluate whenever this many more env steps (all ranks)
            have been taken; ``None`` evaluates only at the end.
        eval_episodes: Episodes per evaluation, per rank.
        checkpoint_every_epochs: Write ``epoch_<n>.ckpt`` every this many epochs.
        loggers: Fabric loggers; by default :func:`~typedrl.logging.build_loggers`.
        progress: Show a progress bar on rank 0 (when standard output is a terminal).
    """

    kind: CheckpointKind = "ppo"
    """The checkpoint kind this agent writes and accepts."""
    resumable_changes: frozenset[str] = frozenset()
    """Config fields that may differ between a checkpoint and the agent resuming it."""

    def __init__(
        self,
        *,
        env: VecEnv,
        fabric: Fabric | None = None,
        eval_env: VecEnv | None = None,
        run_dir: str | Path | None = None,
        eval_every_steps: int | None = None,
        eval_episodes: int = 10,
        checkpoint_every_epochs: int | None = None,
        loggers: Sequence[Logger] | None = None,
        progress: bool = True,
    ) -> None:
        if not isinstance(env, VecEnv):
            raise ConfigError(f"env must be a typedrl VecEnv, got {type(env).__name__}")
        for name, value in (
            ("eval_every_steps", eval_every_steps),
            ("checkpoint_every_epochs", checkpoint_every_epochs),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ConfigError(f"{name} must be a positive int or None, got {value!r}")
        self.env = env
        self.eval_env = eval_env
        self.fabric = fabric if fabric is not None else default_fabric()
        self.dist: Distributed = FabricDistributed(self.fabric)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.paths = CheckpointPaths(self.run_dir / "checkpoints") if self.run_dir else None
        if loggers is None and self.run_dir is not None and self.dist.is_main:
            loggers = build_loggers(self.run_dir)
        self.loggers = list(loggers or [])
        self.eval_every_steps = eval_every_steps
        self.checkpoint_every_epochs = checkpoint_every_epochs
        self.evaluator = (
            EpisodeEvaluator(eval_env, num_episodes=eval_episodes, seed=10_000 + self.dist.rank)
            if eval_env is not None
            else None
        )
        self.progress = progress
        self.epoch = 0
        self.env_steps = 0
        self.best_score: float | None = None
        self.last_metrics: dict[str, float] = {}
        self._is_setup = False
        self._next_eval = eval_every_steps
        self._evaluated_at: int | None = None

    # ------------------------------------------------------------- to implement

    @property
    @abstractmethod
    def policy(self) -> Policy:
        """The policy evaluation runs (the unwrapped model)."""

    @property
    @abstractmethod
    def total_timesteps(self) -> int:
        """The training budget in env steps over all ranks."""

    @abstractmethod
    def _build(self) -> None:
        """Build the model and optimizer and set them up with Fabric."""

    @abstractmethod
    def _start(self) -> None:
        """Reset the env and prepare the first epoch of a fresh run."""

    @abstractmethod
    def _train_epoch(self) -> dict[str, float]:
        """Collect one epoch, update the model, return rank-aggregated metrics."""

    @abstractmethod
    def _state(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """State dicts to checkpoint: (modules, optimizers)."""

    @abstractmethod
    def _load_state(
        self, checkpoint: Checkpoint, path: Path, rank_state: dict[str, dict[str, Any]]
    ) -> None:
        """Restore :meth:`_state` from a checkpoint, including the env where it can be."""

    @abstractmethod
    def _config_dict(self) -> dict[str, Any]:
        """The run's configuration as JSON-like values."""

    # ------------------------------------------------------------- lifecycle

    def setup(self) -> None:
        """Build the model and optimizer and set them up with Fabric (idempotent)."""
        if not self._is_setup:
            self._build()
            self._is_setup = True
            self._start()

    def fit(self) -> FitResult:
        """Train until the budget is spent or a stop is requested; return the final metrics.

        The final policy is evaluated (when an eval env is set and the last
        epoch did not evaluate it) before ``last.ckpt`` is written. The first
        SIGINT/SIGTERM on any rank finishes the current epoch on every rank,
        saves ``last.ckpt`` and returns normally without the final evaluation
        (``metrics["stopped_by_signal"] == 1``); a second one aborts at once.
        """
        self.setup()
        with (
            StopRequest() as stop,
            ProgressDisplay(
                total_steps=self.total_timesteps, enabled=self.progress and self.dist.is_main
            ) as display,
        ):
            stopped = False
            while self.env_steps < self.total_timesteps:
                started = time.perf_counter()
                metrics = self._train_epoch()
                self.epoch += 1
                metrics["time/epoch_seconds"] = time.perf_counter() - started
                if self._next_eval is not None and self.env_steps >= self._next_eval:
                    metrics.update(self.evaluate())
                    while self._next_eval <= self.env_steps:
                        self._next_eval += self.eval_every_steps or 0
                self._log(metrics)
                display.update(steps=self.env_steps, metrics=metrics)
                if self.checkpoint_every_epochs and self.epoch % self.checkpoint_every_epochs == 0:
                    self.save(self.paths.periodic(self.epoch) if self.paths else None)
                # Checked last, so that a signal received while logging stops this epoch.
                stopped = self._stop_agreed(stop.requested)
                if stopped:
                    self.last_metrics["stopped_by_signal"] = 1.0
                    break
            # Evaluate the final policy unless it was just evaluated or a signal asked to stop.
            if self.evaluator is not None and not stopped and self._evaluated_at != self.env_steps:
                self._log(self.evaluate())
            self.save(self.paths.last if self.paths else None)
        for logger in self.loggers:
            logger.finalize("success")
        return FitResult(
            metrics=dict(self.last_metrics),
            epoch=self.epoch,
            env_steps=self.env_steps,
            best_score=self.best_score,
        )

    def evaluate(self) -> dict[str, float]:
        """Evaluate the policy on every rank's eval env; scores are pooled across ranks.

        Writes ``best.ckpt`` when the pooled score is finite and strictly better
        than the best so far.
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
        # An evaluation that fails on one rank must stop every rank, not leave them waiting.
        raise_together(error, "evaluation", self.dist)
        if result is None:  # evaluation failed here, and raise_together has raised
            return {}
        self._evaluated_at = self.env_steps
        pooled = torch.tensor(
            [result.score * result.num_items, float(result.num_items)],
            dtype=torch.float64,
            device=self.dist.device,
        )
        total = self.dist.all_reduce_sum(pooled).cpu()
        score = float(total[0] / total[1])
        metrics = {f"eval/{name}": value for name, value in result.metrics.items()}
        metrics["eval/score"] = score
        if math.isfinite(score) and (self.best_score is None or score > self.best_score):
            self.best_score = score
            self.save(self.paths.best if self.paths else None)
        self.last_metrics.update(metrics)
        return metrics

    def _stop_agreed(self, requested: bool) -> bool:
        """Whether any rank received a stop signal (all ranks must leave the loop together)."""
        if self.dist.world_size == 1:
            return requested
        flag = torch.tensor([1.0 if requested else 0.0], device=self.dist.device)
        return bool(self.dist.all_reduce_sum(flag).item() > 0.0)

    def _log(self, metrics: dict[str, float]) -> None:
        metrics["time/env_steps"] = float(self.env_steps)
        metrics["time/epoch"] = float(self.epoch)
        self.last_metrics.update(metrics)
        if self.dist.is_main:
            for logger in self.loggers:
                logger.log_metrics(dict(metrics), step=self.env_steps)

    # ------------------------------------------------------------- checkpoints

    def _rank_state(self) -> dict[str, dict[str, Any]]:
        """State that differs between ranks (envs, per-env counters); saved for every rank.

        The default is nothing; subclasses add what an exact resume needs.
        """
        return {}

    def _gather(self, value: Any) -> list[Any]:
        """Every rank's ``value``, in rank order (pickled through the process group)."""
        return self.dist.all_gather_object(value)

    def save(self, path: str | Path | None) -> Path | None:
        """Write a full checkpoint to ``path`` on rank 0 (every rank must call it).

        Shared state (model, optimizer, counters) comes from rank 0; state that
        differs between ranks (RNG states, envs, per-env counters) is gathered
        from every rank and stored under ``"<name>.rank<r>"``.
        """
        rng = tuple(self._gather(capture_rng_state()))
        per_rank = self._gather(
            {name: _to_cpu(state) for name, state in self._rank_state().items()}
        )
        written: Path | None = None
        error: TypedRLError | None = None
        if path is not None and self.dist.is_main:
            modules, optimizers = self._state()
            for rank, states in enumerate(per_rank):
                for name, state in states.items():
                    modules[f"{name}.rank{rank}"] = state
            try:
                checkpoint = Checkpoint(
                    kind=self.kind,
                    modules=modules,
                    optimizers=optimizers,
                    counters={"epoch": self.epoch, "env_steps": self.env_steps},
                    best_score=self.best_score,
                    config=self._config_dict(),
                    rng=rng,
                    metadata=CheckpointMetadata.now(world_size=self.dist.world_size),
                )
                written = save_checkpoint(path, checkpoint)
            except TypedRLError as failure:
                error = failure
        # A failed write on rank 0 stops every rank instead of leaving them in a barrier.
        raise_together(error, f"writing the checkpoint {path}", self.dist)
        return written

    def load(self, path: str | Path, *, strict_config: bool = True) -> None:
        """Resume from a checkpoint written by :meth:`save` (call before :meth:`fit`).

        Args:
            path: The checkpoint file.
            strict_config: Refuse a checkpoint whose config differs from this
                agent's in any field but :attr:`resumable_changes` (for PPO
                ``total_timesteps``, ``compile_update`` and ``extra``). The
                checkpoint holds rank 0's config, so rank 0 compares its own
                (per-rank fields such as ``batch_size`` may differ on other
                ranks) and a mismatch stops every rank. Pass
                ``False`` to resume with changed hyper-parameters on purpose;
                the run then no longer equals an uninterrupted one.

        Raises:
            CheckpointError: If the file is missing, corrupt, of another kind,
                saved by another number of ranks, of another architecture, or
                (with ``strict_config``) saved with another config. The file,
                kind and config are checked before the agent is touched; a
                failure on one rank raises on every rank.
        """
        failure: TypedRLError | None = None
        checkpoint: Checkpoint | None = None
        try:
            checkpoint = load_checkpoint(path, expected_kind=self.kind)
        except TypedRLError as error:  # a file one rank cannot read stops every rank
            failure = error
        # The checkpoint holds rank 0's config (ranks may differ, in batch_size for
        # one): rank 0 compares, and a mismatch stops every rank.
        if checkpoint is not None and strict_config and self.dist.is_main:
            failure = self._config_mismatch(checkpoint.config, path)
        raise_together(failure, f"reading the checkpoint {path}", self.dist)
        if checkpoint is None:  # not reached: raise_together raised this rank's error
            raise CheckpointError(f"{path}: the checkpoint could not be read")
        if not self._is_setup:
            self._build()
            self._is_setup = True
        if len(checkpoint.rng) != self.dist.world_size:
            raise CheckpointError(
                f"{path}: saved by {len(checkpoint.rng)} rank(s), resumed on "
                f"{self.dist.world_size}; resume with the same number of ranks"
            )
        self.epoch = int(checkpoint.counters.get("epoch", 0))
        self.env_steps = int(checkpoint.counters.get("env_steps", 0))
        self.best_score = checkpoint.best_score
        if self.eval_every_steps is not None:
            self._next_eval = (self.env_steps // self.eval_every_steps + 1) * self.eval_every_steps
        suffix = f".rank{self.dist.rank}"
        rank_state = {
            name.removesuffix(suffix): state
            for name, state in checkpoint.modules.items()
            if name.endswith(suffix)
        }
        self._load_state(checkpoint, Path(path), rank_state)
        restore_rng_state(checkpoint.rng_state(self.dist.rank))

    def _config_mismatch(self, saved: dict[str, Any], path: str | Path) -> CheckpointError | None:
        current = self._config_dict()
        missing = object()
        # Fields the checkpoint lacks (added to the config after it was written) are
        # not compared; fields it has that the config no longer has are.
        changed = [
            f"{name}: saved {saved[name]!r}, now {current.get(name, '(absent)')!r}"
            for name in sorted(saved)
            if name not in self.resumable_changes
            and _plain(saved[name]) != _plain(current.get(name, missing))
        ]
        if not changed:
            return None
        return CheckpointError(
            f"{path}: saved with another config ({'; '.join(changed)}). Resume with the "
            "saved config (the checkpoint's config field), or pass strict_config=False to "
            "change hyper-parameters on purpose"
        )


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists, recursively (configs compare by content)."""
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _to_cpu(value: Any) -> Any:
    """``value`` with every tensor moved to the CPU (for gathering and saving)."""
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(item) for item in value)
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu()
    return value

"""Run options shared by every trainer: where a run writes, how often it evaluates and saves."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, final

from lightning.fabric.loggers.logger import Logger

from typedrl import _validation
from typedrl._validation import describe, positive_int
from typedrl.errors import ConfigError

__all__ = ["RunOptions"]


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunOptions:
    """How a run is kept: its folder, evaluation and checkpoint cadences, loggers, progress.

    One frozen, validated value that every trainer takes (``options=``), so that
    no trainer re-declares these settings. Invalid values raise
    :class:`~typedrl.errors.ConfigError` naming the field.

    Crash safety: with a ``run_dir``, ``checkpoints/last.ckpt`` is rewritten
    (atomically) every :attr:`last_checkpoint_every_iterations` iterations or
    :attr:`last_checkpoint_every_seconds` seconds of wall time, whichever comes
    first, and at the end of :meth:`~typedrl.training.AbstractTrainer.fit`; a
    killed run loses at most that much training.

    Example:
        >>> options = RunOptions(run_dir="runs/demo", eval_every_steps=10_000)
        >>> options.run_dir, options.last_checkpoint_every_iterations
        (PosixPath('runs/demo'), 100)
        >>> RunOptions(eval_episodes=0)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: RunOptions.eval_episodes must be a positive int, ...
    """

    run_dir: str | Path | None = None
    """Folder for ``metrics.csv`` (plus ``tensorboard/`` when installed), ``checkpoints/``
    and ``summary.json``; ``None`` writes nothing. A ``str`` is converted to a
    :class:`~pathlib.Path`."""
    env_id: str | None = None
    """The training env's id, recorded in every checkpoint (so that evaluation and export
    need no more than the file); ``None`` when the env has no id."""
    eval_every_steps: int | None = None
    """Evaluate whenever this many more env steps (all ranks) have been taken;
    ``None`` evaluates only at the end of the run."""
    eval_episodes: int = 10
    """Episodes per evaluation and rank (for the default evaluator)."""
    checkpoint_every_iterations: int | None = None
    """Also keep ``epoch_<n>.ckpt`` every this many iterations (``None``: never)."""
    keep_checkpoints: int | None = None
    """Keep only the newest this many ``epoch_<n>.ckpt`` files, deleting older ones after
    each periodic save (``None``: keep all). ``last.ckpt`` and ``best.ckpt`` are never
    deleted."""
    last_checkpoint_every_iterations: int | None = 100
    """Refresh ``last.ckpt`` at least every this many iterations (``None``: not by count)."""
    last_checkpoint_every_seconds: float | None = 60.0
    """Refresh ``last.ckpt`` at least every this many seconds of wall time (``None``: not by
    time). In DDP a save that any rank's count or clock calls for is agreed in the one
    collective of each iteration (with the stop signal), so all ranks save together."""
    loggers: Sequence[Logger] | None = None
    """Fabric loggers written on rank 0; ``None`` uses
    :func:`~typedrl.logging.build_loggers` (CSV, plus TensorBoard when installed) when
    there is a ``run_dir``, and none otherwise. A list is converted to a tuple."""
    progress: bool = True
    """Show a progress bar on rank 0 when standard output is a terminal."""
    best_metric: str = "eval/score"
    """The evaluation metric ``best.ckpt`` follows (any ``eval/*`` metric the evaluator
    reports, pooled over ranks)."""
    best_mode: Literal["max", "min"] = "max"
    """Whether a larger (``"max"``) or smaller (``"min"``) :attr:`best_metric` is better; a
    checkpoint is written on a strictly better finite value."""

    def _validate_best(self) -> None:
        if type(self.best_metric) is not str or not self.best_metric.startswith("eval/"):
            raise ConfigError(
                "RunOptions.best_metric must name an evaluation metric ('eval/...'), "
                f"got {describe(self.best_metric)}"
            )
        if self.best_mode not in ("max", "min"):
            raise ConfigError(
                "RunOptions.best_mode must be one of ['max', 'min'], "
                f"got {describe(self.best_mode)}"
            )

    def __post_init__(self) -> None:
        if self.run_dir is not None:
            if not isinstance(self.run_dir, str | Path):
                raise ConfigError(
                    "RunOptions.run_dir must be a str, a Path or None, "
                    f"got {describe(self.run_dir)}"
                )
            object.__setattr__(self, "run_dir", Path(self.run_dir))
        if self.env_id is not None and type(self.env_id) is not str:
            raise ConfigError(
                f"RunOptions.env_id must be a str or None, got {describe(self.env_id)}"
            )
        for name in (
            "eval_every_steps",
            "checkpoint_every_iterations",
            "keep_checkpoints",
            "last_checkpoint_every_iterations",
        ):
            value = getattr(self, name)
            if value is not None:
                positive_int("RunOptions", name, value)
        positive_int("RunOptions", "eval_episodes", self.eval_episodes)
        seconds = self.last_checkpoint_every_seconds
        if seconds is not None:
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not math.isfinite(seconds)
                or seconds <= 0
            ):
                raise ConfigError(
                    "RunOptions.last_checkpoint_every_seconds must be a positive, finite number "
                    f"or None, got {describe(seconds)}"
                )
            object.__setattr__(self, "last_checkpoint_every_seconds", float(seconds))
        if self.loggers is not None:
            given: object = self.loggers
            if isinstance(given, str) or not isinstance(given, Sequence):
                raise ConfigError(
                    f"RunOptions.loggers must be a sequence of Fabric loggers or None, "
                    f"got {describe(self.loggers)}"
                )
            loggers = tuple(self.loggers)
            for logger in loggers:
                if not isinstance(logger, Logger):
                    raise ConfigError(
                        f"RunOptions.loggers must hold lightning.fabric Logger objects, "
                        f"got {describe(logger)}"
                    )
            object.__setattr__(self, "loggers", loggers)
        self._validate_best()
        if self.progress is not True and self.progress is not False:
            raise ConfigError(f"RunOptions.progress must be a bool, got {describe(self.progress)}")

"""Run options shared by every trainer: where a run writes, how often it evaluates and saves."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, final

from lightning_fabric.loggers.logger import Logger

from typedrl import _config_fields, _validation
from typedrl._config_fields import check, optional
from typedrl._validation import describe, positive_float, positive_int
from typedrl.errors import ConfigError
from typedrl.metrics import EVAL_PREFIX, EVAL_SCORE
from typedrl.training._fabric import is_fabric_logger

__all__ = ["RunOptions"]

_OPTIONAL_POSITIVE_INT = check(optional(positive_int))


def _path(owner: str, name: str, value: object) -> Path | None:
    if value is None or isinstance(value, Path):
        return value
    if isinstance(value, str):
        return Path(value)
    raise ConfigError(f"{owner}.{name} must be a str, a Path or None, got {describe(value)}")


def _loggers(owner: str, name: str, value: object) -> tuple[object, ...] | None:
    # object, not Logger: the lightning package's loggers (another Logger class) pass too.
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(
            f"{owner}.{name} must be a sequence of Fabric loggers or None, got {describe(value)}"
        )
    for logger in value:
        if not is_fabric_logger(logger):
            raise ConfigError(
                f"{owner}.{name} must hold Fabric Logger objects (lightning_fabric.loggers), "
                f"got {describe(logger)}"
            )
    return tuple(value)


def _evaluation_metric(owner: str, name: str, value: object) -> str:
    if type(value) is not str or not value.startswith(EVAL_PREFIX):
        raise ConfigError(
            f"{owner}.{name} must name an evaluation metric ('{EVAL_PREFIX}...'), "
            f"got {describe(value)}"
        )
    return value


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

    run_dir: str | Path | None = field(default=None, metadata=check(_path))
    """Folder for ``metrics.csv`` (plus ``tensorboard/`` when installed), ``checkpoints/``
    and ``summary.json``; ``None`` writes nothing. A ``str`` is converted to a
    :class:`~pathlib.Path`."""
    env_id: str | None = None
    """The training env's id, recorded in every checkpoint (so that evaluation and export
    need no more than the file); ``None`` when the env has no id."""
    eval_every_steps: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Evaluate whenever this many more env steps (all ranks) have been taken;
    ``None`` evaluates only at the end of the run."""
    eval_episodes: int = field(default=10, metadata=check(positive_int))
    """Episodes per evaluation and rank (for the default evaluator)."""
    checkpoint_every_iterations: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Also keep ``epoch_<n>.ckpt`` every this many iterations (``None``: never)."""
    keep_checkpoints: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Keep only the newest this many ``epoch_<n>.ckpt`` files, deleting older ones after
    each periodic save (``None``: keep all). ``last.ckpt`` and ``best.ckpt`` are never
    deleted."""
    last_checkpoint_every_iterations: int | None = field(
        default=100, metadata=_OPTIONAL_POSITIVE_INT
    )
    """Refresh ``last.ckpt`` at least every this many iterations (``None``: not by count)."""
    last_checkpoint_every_seconds: float | None = field(
        default=60.0, metadata=check(optional(positive_float))
    )
    """Refresh ``last.ckpt`` at least every this many seconds of wall time (``None``: not by
    time). In DDP a save that any rank's count or clock calls for is agreed in the one
    collective of each iteration (with the stop signal), so all ranks save together."""
    loggers: Sequence[Logger] | None = field(default=None, metadata=check(_loggers))
    """Fabric loggers written on rank 0; ``None`` uses
    :func:`~typedrl.logging.build_loggers` (CSV, plus TensorBoard when installed) when
    there is a ``run_dir``, and none otherwise. A list is converted to a tuple."""
    progress: bool = True
    """Show a progress bar on rank 0 when standard output is a terminal."""
    best_metric: str = field(default=EVAL_SCORE, metadata=check(_evaluation_metric))
    """The evaluation metric ``best.ckpt`` follows (any ``eval/*`` metric the evaluator
    reports, pooled over ranks)."""
    best_mode: Literal["max", "min"] = "max"
    """Whether a larger (``"max"``) or smaller (``"min"``) :attr:`best_metric` is better; a
    checkpoint is written on a strictly better finite value."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)

"""``summary.json``: what a finished (or signal-stopped) run reached, in one small file."""

import json
import math
from pathlib import Path
from typing import Final, Literal, TypeAlias, TypedDict

from typedrl._atomic import write_text_atomically
from typedrl.errors import CheckpointError

__all__ = ["SUMMARY_FILE", "RunSummary", "UpdatePath", "write_summary"]

SUMMARY_FILE: Final = "summary.json"
"""The summary's file name in the run folder."""

UpdatePath: TypeAlias = Literal["eager", "compiled"]
"""How a trainer ran its updates: eagerly, or compiled with :func:`torch.compile`."""


class RunSummary(TypedDict):
    """The fields of ``summary.json`` (``None`` where a value does not exist, e.g. no eval).

    Checkpoint paths are relative to the run folder, so a moved folder stays valid.
    """

    algorithm: str
    """The trainer's algorithm (:attr:`~typedrl.training.AbstractTrainer.algorithm_name`)."""
    env_id: str | None
    """The training env's id (``RunOptions.env_id``)."""
    global_step: int
    """Env steps over every rank, resumed parts included."""
    num_updates: int
    """Iterations (PPO epochs, APG/SHAC updates), resumed parts included."""
    applied_updates: int | None
    """Optimizer updates applied, resumed parts included, for a trainer that may skip whole
    updates (APG/SHAC); ``None`` for one that does not (PPO skips single minibatches; its
    ``train/skipped_updates`` metric is their fraction per epoch)."""
    skipped_updates: int | None
    """Updates skipped for a non-finite or too large gradient (weights untouched), resumed
    parts included; ``None`` as for :attr:`applied_updates`."""
    wall_time_s: float
    """Wall time of the last :meth:`~typedrl.training.AbstractTrainer.fit` call."""
    env_steps_per_s: float
    """Env steps of that call over its wall time."""
    final_eval_return_mean: float | None
    """``eval/return_mean`` of the latest evaluation."""
    final_eval_return_std: float | None
    """``eval/return_std`` of the latest evaluation."""
    final_eval_score: float | None
    """``eval/score`` of the latest evaluation."""
    best_eval_return_mean: float | None
    """The best ``eval/return_mean`` of the run (over resumes while ``best.ckpt`` follows it)."""
    best_score: float | None
    """The best value of ``RunOptions.best_metric`` (what ``best.ckpt`` holds)."""
    checkpoint_best: str | None
    """``checkpoints/best.ckpt`` when it exists."""
    checkpoint_last: str | None
    """``checkpoints/last.ckpt`` when it exists."""
    stopped_by_signal: bool
    """Whether a SIGINT/SIGTERM stopped the run before its budget was spent."""
    update: UpdatePath
    """How the updates ran (:attr:`~typedrl.training.AbstractTrainer.update_path`):
    ``"eager"``, or ``"compiled"`` with :func:`torch.compile` (PPO's ``compile``)."""


def finite_or_none(value: float | None) -> float | None:
    """``value`` as a float when it is finite, else ``None`` (JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def write_summary(run_dir: Path, summary: RunSummary) -> Path:
    """Write ``<run_dir>/summary.json`` atomically (temporary file, fsync, rename).

    Raises:
        CheckpointError: The file cannot be written (the message names it).
    """
    path = run_dir / SUMMARY_FILE
    try:
        write_text_atomically(path, json.dumps(summary, indent=2, allow_nan=False) + "\n")
    except OSError as error:
        raise CheckpointError(f"{path}: cannot write the run summary ({error.strerror})") from None
    return path

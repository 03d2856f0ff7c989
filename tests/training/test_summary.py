"""Tests for summary.json and the keep-last-N schedule of periodic checkpoints."""

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.training.test_trainer import TinyTrainer, _KindlessTrainer
from typedrl.errors import CheckpointError, ConfigError
from typedrl.testing import CountingVecEnv
from typedrl.training import (
    SUMMARY_FILE,
    Budget,
    IterationResult,
    RunOptions,
    UpdateCounts,
    UpdatePath,
)


def _options(**kwargs: Any) -> RunOptions:
    kwargs.setdefault("progress", False)
    kwargs.setdefault("loggers", [])
    return RunOptions(**kwargs)


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / SUMMARY_FILE).read_text())
    return data


def test_a_finished_run_writes_its_summary(tmp_path: Path) -> None:
    """Counters, the final and best evaluation, checkpoints relative to the run folder."""
    trainer = TinyTrainer(
        budget=Budget(iterations=4),
        eval_env=CountingVecEnv(num_envs=2, truncate_after=3),
        options=_options(run_dir=tmp_path, env_id="Counting-v0", eval_episodes=2),
    )
    result = trainer.fit()
    summary = _summary(tmp_path)
    assert summary == {
        "algorithm": "apg",
        "env_id": "Counting-v0",
        "global_step": 12,
        "num_updates": 4,
        "applied_updates": None,
        "skipped_updates": None,
        "wall_time_s": pytest.approx(result.wall_seconds),
        "env_steps_per_s": pytest.approx(12 / result.wall_seconds),
        "final_eval_return_mean": 6.0,
        "final_eval_return_std": 0.0,
        "final_eval_score": 6.0,
        "best_eval_return_mean": 6.0,
        "best_score": 6.0,
        "checkpoint_best": "checkpoints/best.ckpt",
        "checkpoint_last": "checkpoints/last.ckpt",
        "stopped_by_signal": False,
        "update": "eager",
    }
    assert not list(tmp_path.glob(".*.tmp"))


def test_without_evaluation_the_eval_fields_are_null(tmp_path: Path) -> None:
    """No evaluator: nulls (JSON has no NaN), no best checkpoint; no run folder, no file."""
    TinyTrainer(budget=Budget(iterations=2), options=_options(run_dir=tmp_path)).fit()
    summary = _summary(tmp_path)
    assert summary["final_eval_return_mean"] is None
    assert summary["best_eval_return_mean"] is None
    assert summary["checkpoint_best"] is None
    assert summary["checkpoint_last"] == "checkpoints/last.ckpt"
    assert summary["env_id"] is None
    TinyTrainer(budget=Budget(iterations=1), options=_options()).fit()


class _CompilingTrainer(_KindlessTrainer):
    """Says its updates are compiled, as PPO with compile=True does."""

    kind = "apg"

    @property
    def update_path(self) -> UpdatePath:
        return "compiled"


def test_the_update_path_reaches_the_summary(tmp_path: Path) -> None:
    """The trainer's update_path is the summary's update."""
    _CompilingTrainer(budget=Budget(iterations=1), options=_options(run_dir=tmp_path)).fit()
    assert _summary(tmp_path)["update"] == "compiled"


class _SkippingTrainer(_KindlessTrainer):
    """Skips the update of every iteration listed in ``skips``, as APG skips a non-finite one."""

    kind = "apg"

    def __init__(self, *, skips: set[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.skips = skips
        self.counts = {"applied": 0, "skipped": 0}

    def _train_iteration(self) -> IterationResult:
        self.counts["skipped" if self.iteration in self.skips else "applied"] += 1
        return super()._train_iteration()

    def _update_counts(self) -> UpdateCounts:
        return UpdateCounts(
            applied=self.counts["applied"], skipped=self.counts["skipped"], advice="Look."
        )


def test_skipped_updates_reach_the_summary_and_warn_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Counts in summary.json; one warning, past 10% of the updates and not before the 10th."""
    # Update 1 is skipped (too early to warn), 1 of 10 is not over 10%, 2 of 12 is; once only.
    trainer = _SkippingTrainer(
        skips={0, 11, 12, 13}, budget=Budget(iterations=15), options=_options(run_dir=tmp_path)
    )
    trainer.fit()
    summary = _summary(tmp_path)
    assert (summary["applied_updates"], summary["skipped_updates"]) == (11, 4)
    assert capsys.readouterr().err.splitlines() == [
        "warning: 2 of the 12 updates so far were skipped (a non-finite or too large gradient; "
        "the weights did not move on them). Look."
    ]


def test_a_signal_stop_writes_the_summary(tmp_path: Path) -> None:
    """SIGINT mid-run: the iteration finishes, last.ckpt and a summary that says so."""

    def interrupt(trainer: _KindlessTrainer) -> None:
        if trainer.iteration == 1:
            os.kill(os.getpid(), signal.SIGINT)

    trainer = TinyTrainer(
        budget=Budget(iterations=100),
        on_iteration=interrupt,
        options=_options(run_dir=tmp_path),
    )
    result = trainer.fit()
    assert result.stopped_by_signal
    summary = _summary(tmp_path)
    assert (summary["stopped_by_signal"], summary["num_updates"]) == (True, 2)
    assert summary["checkpoint_last"] == "checkpoints/last.ckpt"


def test_the_best_return_mean_survives_a_resume(tmp_path: Path) -> None:
    """A resumed run reports the best evaluation return of the whole run."""

    def make(iterations: int) -> TinyTrainer:
        return TinyTrainer(
            budget=Budget(iterations=iterations),
            eval_env=CountingVecEnv(num_envs=2, truncate_after=3),
            options=_options(run_dir=tmp_path, eval_episodes=2),
        )

    make(2).fit()
    resumed = make(3)
    resumed.load(tmp_path / "checkpoints" / "last.ckpt")
    resumed.fit()
    summary = _summary(tmp_path)
    assert (summary["num_updates"], summary["best_eval_return_mean"]) == (3, 6.0)


def test_an_unwritable_summary_is_a_checkpoint_error(tmp_path: Path) -> None:
    """A folder where summary.json cannot be written fails, naming the file."""
    (tmp_path / SUMMARY_FILE).mkdir()
    trainer = TinyTrainer(budget=Budget(iterations=1), options=_options(run_dir=tmp_path))
    with pytest.raises(CheckpointError, match=r"summary\.json: cannot write the run summary"):
        trainer.fit()


def test_only_the_newest_periodic_checkpoints_are_kept(tmp_path: Path) -> None:
    """keep_checkpoints=2 leaves the two newest epoch files; last and best stay."""
    TinyTrainer(
        budget=Budget(iterations=5),
        options=_options(run_dir=tmp_path, checkpoint_every_iterations=1, keep_checkpoints=2),
    ).fit()
    names = sorted(path.name for path in (tmp_path / "checkpoints").iterdir())
    assert names == ["epoch_00000004.ckpt", "epoch_00000005.ckpt", "last.ckpt"]
    TinyTrainer(
        budget=Budget(iterations=3),
        options=_options(run_dir=tmp_path / "all", checkpoint_every_iterations=1),
    ).fit()
    assert len(list((tmp_path / "all" / "checkpoints").glob("epoch_*.ckpt"))) == 3


def test_keep_checkpoints_must_be_positive() -> None:
    """A keep count of zero is refused, naming the field."""
    with pytest.raises(ConfigError, match="keep_checkpoints must be a positive int"):
        RunOptions(keep_checkpoints=0)

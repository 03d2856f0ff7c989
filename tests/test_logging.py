"""MetricAggregator (weighted means of scalars on the device) and build_loggers."""

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from lightning_fabric.loggers.logger import Logger

import typedrl.logging as logging_module
from typedrl.distributed import SingleProcess
from typedrl.errors import MissingDependencyError
from typedrl.logging import CSVMetricsLogger, MetricAggregator, build_loggers, drop_rows_after

CPU = torch.device("cpu")


def test_add_is_a_weighted_mean_and_reduce_resets() -> None:
    metrics = MetricAggregator(["loss", "return"], device=CPU)
    metrics.add("loss", torch.tensor(2.0))
    metrics.add("loss", 4.0, weight=torch.tensor(3.0))
    assert metrics.reduce(SingleProcess()) == {"loss": pytest.approx(3.5)}
    # Reduced sums start again from zero; unrecorded metrics are left out.
    metrics.add("return", 1.0)
    assert metrics.reduce(SingleProcess()) == {"return": 1.0}
    assert metrics.reduce(SingleProcess()) == {}


def test_add_rows_records_every_row_with_weight_one() -> None:
    metrics = MetricAggregator(["a", "b", "c"], device=CPU)
    rows = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 20.0]])
    metrics.add_rows(("c", "a"), rows)
    metrics.add("a", 40.0)
    # c: mean of column 0; a: column 1 and the extra record, four records in all.
    assert metrics.reduce(SingleProcess()) == {
        "a": pytest.approx((10.0 + 30.0 + 20.0 + 40.0) / 4),
        "c": pytest.approx(3.0),
    }
    # No rows: nothing recorded.
    metrics.add_rows(("a", "b"), rows[:0])
    assert metrics.reduce(SingleProcess()) == {}


def test_add_many_records_the_masked_entries() -> None:
    metrics = MetricAggregator(["length"], device=CPU)
    values = torch.tensor([2, 4, 8, 16])
    metrics.add_many("length", values, torch.tensor([True, False, True, False]))
    assert metrics.reduce(SingleProcess()) == {"length": pytest.approx(5.0)}


def _pretend_installed(monkeypatch: pytest.MonkeyPatch, installed: set[str]) -> None:
    """Make build_loggers see exactly the ``installed`` optional packages."""

    def find_spec(name: str) -> object:
        return object() if name in installed else None

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


class _FakeLogger(Logger):
    """Records how it was built, in place of an optional third-party logger."""

    built: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        _FakeLogger.built.append({"args": args, **kwargs})

    @property
    def name(self) -> str:
        return "fake"

    @property
    def version(self) -> str:
        return "0"

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Nothing to record."""

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """Nothing to record."""


def test_build_loggers_csv_always_tensorboard_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pretend_installed(monkeypatch, set())
    (csv,) = build_loggers(tmp_path)
    assert isinstance(csv, CSVMetricsLogger)
    assert Path(csv.root_dir) == tmp_path
    assert csv.path == tmp_path / "metrics.csv"
    with pytest.raises(MissingDependencyError, match="tensorboard=True needs TensorBoard"):
        build_loggers(tmp_path, tensorboard=True)
    _pretend_installed(monkeypatch, {"tensorboard"})
    monkeypatch.setattr(logging_module, "TensorBoardLogger", _FakeLogger)
    _FakeLogger.built.clear()
    assert [type(logger) for logger in build_loggers(tmp_path, run_name="r")] == [
        CSVMetricsLogger,
        _FakeLogger,
    ]
    assert _FakeLogger.built == [{"args": (tmp_path,), "name": "tensorboard", "version": ""}]
    assert len(build_loggers(tmp_path, tensorboard=False)) == 1


def test_build_loggers_names_what_wandb_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """W&B is asked for without wandb, or without the lightning package its logger is in."""
    _pretend_installed(monkeypatch, set())
    with pytest.raises(MissingDependencyError, match="needs W&B"):
        build_loggers(tmp_path, wandb_project="typedrl-tests")
    # The logger is PyTorch Lightning's: W&B alone is not enough.
    _pretend_installed(monkeypatch, {"wandb"})
    with pytest.raises(MissingDependencyError, match=r"needs W&B \(missing: lightning\)"):
        build_loggers(tmp_path, wandb_project="typedrl-tests")


def test_csv_metrics_reach_the_file_at_once_and_append_on_resume(tmp_path: Path) -> None:
    """Every row is on disk when logged (a kill keeps it); a reopened log appends."""
    logger = CSVMetricsLogger(tmp_path)
    for step in (32, 64):  # even steps: Lightning's logger would not have written them
        logger.log_metrics({"loss": step / 32}, step=step)
    lines = logger.path.read_text().splitlines()
    assert lines == ["step,loss", "32,1.0", "64,2.0"]
    resumed = CSVMetricsLogger(tmp_path)
    resumed.log_metrics({"loss": 3.0, "eval/score": 9.5}, step=96)
    assert logger.path.read_text().splitlines() == [
        "step,loss,eval/score",
        "32,1.0,",
        "64,2.0,",
        "96,3.0,9.5",
    ]


def test_a_run_that_fails_keeps_its_metrics_and_a_resume_appends(tmp_path: Path) -> None:
    """A failing PPO run leaves its epochs' rows; resuming into the same folder appends."""
    from typedrl.ppo import PPOAgent, PPOConfig
    from typedrl.testing import CountingVecEnv
    from typedrl.training import RunOptions

    config = PPOConfig(total_timesteps=64, num_steps=8, batch_size=8, num_mini_epochs=1)
    options = RunOptions(run_dir=tmp_path, progress=False, last_checkpoint_every_iterations=1)
    agent = PPOAgent(
        env=CountingVecEnv(num_envs=2, terminate_after=3), config=config, options=options
    )
    calls = 0
    original = agent._train_iteration

    def fail_in_the_third() -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("simulated crash")
        return original()

    agent._train_iteration = fail_in_the_third  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="simulated crash"):
        agent.fit()
    path = tmp_path / "metrics.csv"
    assert len(path.read_text().splitlines()) == 1 + 2  # the header and two epochs
    longer = PPOConfig(total_timesteps=80, num_steps=8, batch_size=8, num_mini_epochs=1)
    resumed = PPOAgent(
        env=CountingVecEnv(num_envs=2, terminate_after=3), config=longer, options=options
    )
    resumed.load(tmp_path / "checkpoints" / "last.ckpt")
    resumed.fit()
    steps = [line.split(",")[0] for line in path.read_text().splitlines()[1:]]
    assert steps[:2] == ["16", "32"]
    assert steps[-1] == "80"


def test_drop_rows_after_keeps_one_series_for_a_resume(tmp_path: Path) -> None:
    """Rows past the checkpoint's step go; the header, blank steps and earlier rows stay."""
    logger = CSVMetricsLogger(tmp_path)
    for step in (16, 32, 48, 64):
        logger.log_metrics({"loss": float(step)}, step=step)
    logger.log_metrics({"note": 1.0})
    path = tmp_path / "metrics.csv"
    assert drop_rows_after(path, 32) == 2
    assert path.read_text().splitlines() == ["step,loss,note", "16,16.0,", "32,32.0,", ",,1.0"]
    assert sorted(item.name for item in tmp_path.iterdir()) == ["metrics.csv"]
    before = path.stat().st_mtime_ns
    assert drop_rows_after(path, 32) == 0
    assert path.stat().st_mtime_ns == before  # nothing to drop: not rewritten
    # A resumed logger appends after the kept rows.
    CSVMetricsLogger(tmp_path).log_metrics({"loss": 48.5}, step=48)
    assert path.read_text().splitlines()[-1] == "48,48.5,"
    assert drop_rows_after(tmp_path / "absent.csv", 0) == 0


def test_progress_prints_compact_lines_when_stdout_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not a terminal: a line per interval and one at the end, none on other ranks."""
    from typedrl.logging import ProgressDisplay

    with ProgressDisplay(total_steps=300, line_every_seconds=0.0) as display:
        display.update(steps=100, metrics={"time/sps": 1234.0, "episode/return_mean": 2.5})
        display.update(steps=300, metrics={"eval/score": 9.0})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "train 100/300 steps  1,234 sps  return 2.50",
        "train 300/300 steps  eval 9.00",
    ]
    with ProgressDisplay(total_steps=300, enabled=False) as display:
        display.update(steps=300, metrics={})
    assert capsys.readouterr().out == ""

"""MetricAggregator (weighted means of scalars on the device) and build_loggers."""

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import lightning.pytorch.loggers
import pytest
import torch
from lightning.fabric.loggers.csv_logs import CSVLogger
from lightning.fabric.loggers.logger import Logger

import typedrl.logging as logging_module
from typedrl.distributed import SingleProcess
from typedrl.errors import MissingDependencyError
from typedrl.logging import MetricAggregator, build_loggers

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
    assert isinstance(csv, CSVLogger)
    assert Path(csv.root_dir) == tmp_path / "logs"
    with pytest.raises(MissingDependencyError, match="tensorboard=True needs TensorBoard"):
        build_loggers(tmp_path, tensorboard=True)
    _pretend_installed(monkeypatch, {"tensorboard"})
    monkeypatch.setattr(logging_module, "TensorBoardLogger", _FakeLogger)
    _FakeLogger.built.clear()
    assert [type(logger) for logger in build_loggers(tmp_path, run_name="r")] == [
        CSVLogger,
        _FakeLogger,
    ]
    assert _FakeLogger.built == [{"args": (tmp_path / "logs",), "name": "r", "version": ""}]
    assert len(build_loggers(tmp_path, tensorboard=False)) == 1


def test_build_loggers_adds_wandb_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pretend_installed(monkeypatch, set())
    with pytest.raises(MissingDependencyError, match="needs W&B"):
        build_loggers(tmp_path, wandb_project="typedrl-tests")
    _pretend_installed(monkeypatch, {"wandb"})
    monkeypatch.setattr(lightning.pytorch.loggers, "WandbLogger", _FakeLogger)
    _FakeLogger.built.clear()
    loggers = build_loggers(tmp_path, wandb_project="typedrl-tests", run_name="r")
    assert [type(logger) for logger in loggers] == [CSVLogger, _FakeLogger]
    build_loggers(tmp_path, wandb_project="typedrl-tests", wandb_run_name="w")
    save_dir = str(tmp_path / "logs")
    assert _FakeLogger.built == [
        {"args": (), "project": "typedrl-tests", "name": "r", "save_dir": save_dir},
        {"args": (), "project": "typedrl-tests", "name": "w", "save_dir": save_dir},
    ]

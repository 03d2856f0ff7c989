"""typedrl beside the ``lightning`` package (PyTorch Lightning), which it never needs to train.

The W&B logger is PyTorch Lightning's, and users hand typedrl objects of the
``lightning`` namespace. ``nox -s lightning`` runs these tests in their own
environment: with ``lightning`` installed, ``lightning_fabric`` imports
torchmetrics in every process (2-3 s each), so the main suite runs without it.
"""

import importlib.util
from pathlib import Path
from typing import Any

import lightning.fabric
import lightning.pytorch.loggers
import pytest
from lightning.fabric.loggers.csv_logs import CSVLogger as LightningCSVLogger
from lightning_fabric import Fabric

from tests.loggers import RecordingLogger
from tests.test_logging import _FakeLogger, _pretend_installed
from tests.test_package import _heavy_modules_after
from typedrl.cli import main
from typedrl.errors import ConfigError
from typedrl.logging import CSVMetricsLogger, build_loggers
from typedrl.training import RunOptions
from typedrl.training._fabric import require_fabric


def test_require_fabric_names_the_package_to_import() -> None:
    """A lightning.fabric.Fabric is refused with the import to use; others by their type."""
    fabric = Fabric(accelerator="cpu", devices=1)
    assert require_fabric(fabric, "PPOAgent") is fabric
    with pytest.raises(ConfigError, match=r"PPOAgent: .*'from lightning_fabric import Fabric'"):
        require_fabric(lightning.fabric.Fabric(accelerator="cpu", devices=1), "PPOAgent")
    with pytest.raises(ConfigError, match=r"must be a lightning_fabric\.Fabric, got str"):
        require_fabric("cpu", "PPOAgent")


def test_loggers_of_the_lightning_package_are_accepted(tmp_path: Path) -> None:
    """A logger built on ``lightning.fabric``'s Logger (PyTorch Lightning's W&B one) is kept.

    Fabric only calls its methods; typedrl itself runs on lightning_fabric.
    """
    logger: object = LightningCSVLogger(tmp_path)
    options = RunOptions(loggers=[logger])  # type: ignore[list-item]
    assert options.loggers is not None
    assert list(options.loggers) == [logger]


def test_a_training_run_never_imports_pytorch_lightning(tmp_path: Path) -> None:
    """``typedrl train`` runs on lightning_fabric and leaves the lightning package unloaded.

    Importing ``lightning`` (PyTorch Lightning with torchmetrics) costs over a
    second per process; a run and its evaluation need only Fabric.
    """
    run = str(tmp_path / "run")
    code = (
        "import contextlib, io\n"
        "from typedrl.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['train', '--total-timesteps', '256', '--num-envs', '4', '--run-dir', {run!r}, "
        "'--no-progress', '--set', 'num_steps=16', '--set', 'batch_size=32'])\n"
        f"    main(['evaluate', {run!r}, '--episodes', '2', '--num-envs', '2'])"
    )
    loaded = _heavy_modules_after(code)
    assert "lightning_fabric" in loaded
    assert "lightning" not in loaded


def test_build_loggers_adds_wandb_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With wandb and lightning installed, build_loggers adds PyTorch Lightning's W&B logger."""
    _pretend_installed(monkeypatch, {"wandb", "lightning"})
    monkeypatch.setattr(lightning.pytorch.loggers, "WandbLogger", _FakeLogger)
    _FakeLogger.built.clear()
    loggers = build_loggers(tmp_path, wandb_project="typedrl-tests", run_name="r")
    assert [type(logger) for logger in loggers] == [CSVMetricsLogger, _FakeLogger]
    build_loggers(tmp_path, wandb_project="typedrl-tests", wandb_run_name="w")
    save_dir = str(tmp_path)
    assert _FakeLogger.built == [
        {"args": (), "project": "typedrl-tests", "name": "r", "save_dir": save_dir},
        {"args": (), "project": "typedrl-tests", "name": "w", "save_dir": save_dir},
    ]


def test_train_logs_to_wandb_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--wandb-project adds a W&B logger (here a stand-in) next to the CSV one, on rank 0."""
    real_find_spec = importlib.util.find_spec
    built: list[tuple[RecordingLogger, dict[str, Any]]] = []

    def with_wandb(name: str, *args: Any) -> Any:
        return object() if name == "wandb" else real_find_spec(name, *args)

    class FakeWandbLogger(RecordingLogger):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__()
            built.append((self, kwargs))

        @property
        def name(self) -> str:
            return "wandb"

    monkeypatch.setattr(importlib.util, "find_spec", with_wandb)
    monkeypatch.setattr(lightning.pytorch.loggers, "WandbLogger", FakeWandbLogger)
    run_dir = tmp_path / "run"
    argv = ["train", "--total-timesteps", "512", "--run-dir", str(run_dir), "--no-progress"]
    assert main([*argv, "--wandb-project", "typedrl-tests", "--set", "num_steps=16"]) == 0
    save_dir = str(run_dir)
    ((logger, kwargs),) = built
    assert kwargs == {"project": "typedrl-tests", "name": "run", "save_dir": save_dir}
    # Training and evaluation metrics reach it, as they reach the CSV file.
    assert any("time/sps" in metrics for metrics in logger.records)
    assert any("eval/score" in metrics for metrics in logger.records)
    assert (run_dir / "metrics.csv").is_file()

"""The recording Fabric logger the trainer tests share."""

from collections.abc import Callable
from typing import Any

from lightning_fabric.loggers.logger import Logger

__all__ = ["RecordingLogger"]


class RecordingLogger(Logger):
    """A Fabric logger that keeps every logged metrics dict, with an optional callback."""

    def __init__(self, on_log: Callable[[dict[str, float]], None] | None = None) -> None:
        super().__init__()
        self.records: list[dict[str, float]] = []
        self.finalized: list[str] = []
        self._on_log = on_log

    @property
    def name(self) -> str:
        return "recording"

    @property
    def version(self) -> str:
        return "0"

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        del params, args, kwargs

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        del step
        self.records.append(dict(metrics))
        if self._on_log is not None:
            self._on_log(metrics)

    def finalize(self, status: str) -> None:
        self.finalized.append(status)

"""Metric aggregation across ranks, run loggers (CSV, TensorBoard, W&B) and the progress display."""

import csv
import importlib.util
import io
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, final

import torch
from lightning_fabric.loggers.logger import Logger
from lightning_fabric.loggers.tensorboard import TensorBoardLogger
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import Tensor

from typedrl._atomic import write_text_atomically
from typedrl.distributed import Distributed
from typedrl.errors import MissingDependencyError
from typedrl.metrics import EPISODE_RETURN_MEAN, EVAL_SCORE, TIME_SPS

__all__ = [
    "CSVMetricsLogger",
    "MetricAggregator",
    "ProgressDisplay",
    "build_loggers",
    "drop_rows_after",
    "require_wandb",
]


@final
class MetricAggregator:
    """Accumulates weighted scalar metrics on the device and reduces them once, across ranks.

    ``add`` keeps running sums of ``value * weight`` and of ``weight`` as float64
    tensors, so recording a metric never synchronises with the device;
    :meth:`reduce` sums both over all ranks (one collective for all metrics)
    and returns the weighted means as Python floats. A metric nobody recorded
    (zero total weight) is left out rather than reported as NaN.

    Example:
        >>> import torch
        >>> from typedrl.distributed import SingleProcess
        >>> metrics = MetricAggregator(["loss", "return"], device=torch.device("cpu"))
        >>> metrics.add("loss", torch.tensor(2.0))
        >>> metrics.add("loss", torch.tensor(4.0), weight=3.0)
        >>> metrics.reduce(SingleProcess())
        {'loss': 3.5}
    """

    def __init__(self, names: list[str], *, device: torch.device) -> None:
        self.names = list(names)
        self._index = {name: i for i, name in enumerate(self.names)}
        self._sums = torch.zeros(2, len(self.names), dtype=torch.float64, device=device)
        self._vector_index: dict[tuple[str, ...], Tensor] = {}

    def add(self, name: str, value: Tensor | float, weight: Tensor | float = 1.0) -> None:
        """Record one scalar ``value`` with ``weight`` (0-d tensors allowed; no host sync)."""
        i = self._index[name]
        value_t = torch.as_tensor(value, dtype=torch.float64, device=self._sums.device)
        weight_t = torch.as_tensor(weight, dtype=torch.float64, device=self._sums.device)
        self._sums[0, i] += value_t.reshape(()) * weight_t
        self._sums[1, i] += weight_t

    def add_rows(self, names: tuple[str, ...], rows: Tensor) -> None:
        """Record every row of ``rows`` (``[n, len(names)]``): ``rows[k, i]`` for ``names[i]``."""
        index = self._vector_index.get(names)
        if index is None:
            index = torch.tensor([self._index[n] for n in names], device=self._sums.device)
            self._vector_index[names] = index
        self._sums[0].index_add_(0, index, rows.to(torch.float64).sum(0))
        self._sums[1].index_add_(
            0,
            index,
            torch.full(
                (len(names),), float(rows.shape[0]), dtype=torch.float64, device=self._sums.device
            ),
        )

    def add_many(self, name: str, values: Tensor, mask: Tensor) -> None:
        """Record every ``values[mask]`` entry with weight 1 (no host sync)."""
        i = self._index[name]
        selected = mask.to(torch.float64)
        self._sums[0, i] += (values.to(torch.float64) * selected).sum()
        self._sums[1, i] += selected.sum()

    def reduce(self, dist: Distributed) -> dict[str, float]:
        """Weighted means over every rank's records; resets the accumulator."""
        totals = dist.all_reduce_sum(self._sums.clone()).cpu()
        self._sums.zero_()
        return {
            name: float(totals[0, i] / totals[1, i])
            for i, name in enumerate(self.names)
            if float(totals[1, i]) > 0.0
        }


@final
class CSVMetricsLogger(Logger):
    """Streams metrics to ``<root>/metrics.csv``, one row per call, appending.

    Unlike Lightning's CSV logger, which writes only every 100 steps and clears
    an existing log folder, every :meth:`log_metrics` call reaches the file at
    once (a killed run keeps every row it logged), and a resumed run appends
    to the rows already there, so its curves continue where they stopped. The
    header is the union of every metric seen; when a new metric appears the
    file is rewritten once with the wider header (earlier rows leave it blank).

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> with tempfile.TemporaryDirectory() as root:
        ...     logger = CSVMetricsLogger(root)
        ...     logger.log_metrics({"loss": 1.5}, step=10)
        ...     CSVMetricsLogger(root).log_metrics({"loss": 1.0, "score": 2.0}, step=20)
        ...     print(Path(logger.path).read_text().strip())
        step,loss,score
        10,1.5,
        20,1.0,2.0
    """

    def __init__(self, root: str | Path, *, name: str = "typedrl") -> None:
        super().__init__()
        self._root = Path(root)
        self._name = name
        self.path = self._root / "metrics.csv"
        self._columns: list[str] = []
        if self.path.is_file():
            with self.path.open(newline="") as handle:
                header = next(csv.reader(handle), [])
            self._columns = [column for column in header if column != "step"]

    @property
    def name(self) -> str:
        """The run's name."""
        return self._name

    @property
    def version(self) -> str:
        """No versions: one file per run folder."""
        return ""

    @property
    def root_dir(self) -> str:
        """The folder ``metrics.csv`` lives in."""
        return str(self._root)

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """Hyper-parameters go to the run's checkpoints, not to the metrics file."""
        del params, args, kwargs

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Append one row (``step`` and every metric) and flush it to the file."""
        new = [key for key in metrics if key not in self._columns]
        if new:
            self._columns.extend(new)
            self._rewrite_header()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.is_file()
        with self.path.open("a", newline="") as handle:
            writer = csv.writer(handle)
            if fresh:
                writer.writerow(["step", *self._columns])
            writer.writerow(
                ["" if step is None else step]
                + [_cell(metrics.get(column)) for column in self._columns]
            )
            handle.flush()

    def _rewrite_header(self) -> None:
        """Widen an existing file's header to the current columns (rows keep their values)."""
        if not self.path.is_file():
            return
        with self.path.open(newline="") as handle:
            rows = list(csv.reader(handle))
        if not rows:
            return
        old = rows[0]
        index = {column: position for position, column in enumerate(old)}
        header = ["step", *self._columns]
        widened = [
            [
                row[index[column]] if column in index and index[column] < len(row) else ""
                for column in header
            ]
            for row in rows[1:]
        ]
        write_text_atomically(self.path, _csv_text([header, *widened]), newline="")


def _cell(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def drop_rows_after(path: str | Path, step: int) -> int:
    r"""Remove the rows of a ``metrics.csv`` logged past ``step``; return how many went.

    A run resumed from a checkpoint taken at env step ``step`` logs the
    iterations after it again, so rows a killed run logged past its last
    checkpoint would appear twice. Dropping them first keeps the file one
    series. Rows are kept by their ``step`` column (env steps over all ranks):
    blank ones and those at or before ``step`` stay, as does the header. The
    file is rewritten atomically (a temporary file renamed over it), and left
    untouched when nothing is dropped or it does not exist.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as root:
        ...     path = Path(root) / "metrics.csv"
        ...     _ = path.write_text("step,loss\n16,1.0\n32,0.5\n48,0.25\n")
        ...     print(drop_rows_after(path, 32), path.read_text().split())
        1 ['step,loss', '16,1.0', '32,0.5']
    """
    file = Path(path)
    if not file.is_file():
        return 0
    with file.open(newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows or "step" not in rows[0]:
        return 0
    column = rows[0].index("step")
    kept = [rows[0]] + [row for row in rows[1:] if not _after(row, column, step)]
    dropped = len(rows) - len(kept)
    if dropped == 0:
        return 0
    write_text_atomically(file, _csv_text(kept), newline="")
    return dropped


def _csv_text(rows: list[list[str]]) -> str:
    """``rows`` as the text :mod:`csv` writes."""
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    return text.getvalue()


def _after(row: list[str], column: int, step: int) -> bool:
    """Whether ``row`` was logged past ``step`` (a blank or unreadable step is not)."""
    try:
        return column < len(row) and float(row[column]) > step
    except ValueError:
        return False


def require_wandb(what: str) -> None:
    """Raise :class:`~typedrl.errors.MissingDependencyError` unless the W&B logger can be built.

    The logger is PyTorch Lightning's ``WandbLogger``: it needs ``wandb`` and the
    ``lightning`` package, which the ``wandb`` extra installs. ``what`` names the
    option that asked for it.
    """
    missing = [name for name in ("wandb", "lightning") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingDependencyError(
            f"{what} needs W&B (missing: {', '.join(missing)}): pip install 'typedrl[wandb]'"
        )


def build_loggers(
    run_dir: str | Path,
    *,
    tensorboard: bool | None = None,
    wandb_project: str | None = None,
    run_name: str = "typedrl",
    wandb_run_name: str | None = None,
) -> list[Logger]:
    """The run's loggers: CSV always, TensorBoard when installed, W&B when asked.

    Metrics stream to ``<run_dir>/metrics.csv`` (appending when the file is
    there, as a resumed run's are), TensorBoard event files go to
    ``<run_dir>/tensorboard/`` and W&B keeps its files in ``<run_dir>/wandb/``.

    Args:
        run_dir: Folder of the run.
        tensorboard: ``None`` uses TensorBoard when ``tensorboard`` (or
            ``tensorboardX``) is installed; ``True`` requires it; ``False`` skips it.
        wandb_project: A Weights & Biases project name to log to (needs ``wandb``).
        run_name: Name of the run in every logger.
        wandb_run_name: Name of the W&B run, when it should differ (default ``run_name``).

    Raises:
        MissingDependencyError: TensorBoard or W&B was asked for but is not installed.
    """
    root = Path(run_dir)
    loggers: list[Logger] = [CSVMetricsLogger(root, name=run_name)]
    has_tensorboard = any(
        importlib.util.find_spec(name) is not None for name in ("tensorboard", "tensorboardX")
    )
    if tensorboard and not has_tensorboard:
        raise MissingDependencyError(
            "tensorboard=True needs TensorBoard: pip install 'typedrl[tensorboard]'"
        )
    if has_tensorboard and tensorboard is not False:
        # TensorBoard writes to <root>/<name>/<version>: here <run_dir>/tensorboard/.
        loggers.append(TensorBoardLogger(root, name="tensorboard", version=""))
    if wandb_project is not None:
        require_wandb(f"wandb_project={wandb_project!r}")
        from lightning.pytorch.loggers import WandbLogger  # noqa: PLC0415 - optional extra

        wandb_logger: Any = WandbLogger(
            project=wandb_project, name=wandb_run_name or run_name, save_dir=str(root)
        )
        loggers.append(wandb_logger)
    return loggers


@final
class ProgressDisplay:
    """A rich progress bar of env steps (or iterations) with SPS and the latest mean return.

    Shown on rank 0 only; ``unit`` names what the bar counts (``"steps"`` or
    ``"iterations"``). Disabled (a no-op) on other ranks and when ``enabled`` is
    ``False``. When standard output is not a terminal (``nohup``, a scheduler's
    log file) and ``force`` is not set, it prints one compact line at most every
    ``line_every_seconds`` seconds instead (progress, SPS, return, eval score).
    """

    def __init__(
        self,
        *,
        total_steps: int,
        enabled: bool = True,
        force: bool = False,
        unit: str = "steps",
        line_every_seconds: float = 10.0,
    ) -> None:
        terminal = force or sys.stdout.isatty()
        self._active = enabled and terminal
        self._lines = enabled and not terminal
        self._progress: Progress | None = None
        self._task: Any = None
        self._total = total_steps
        self._unit = unit
        self._line_every = line_every_seconds
        self._last_line = time.monotonic()

    def __enter__(self) -> "ProgressDisplay":
        if self._active:
            self._progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,} " + self._unit),
                TextColumn("{task.fields[sps]:>9} sps"),
                TextColumn("return {task.fields[ret]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            )
            self._progress.start()
            self._task = self._progress.add_task("train", total=self._total, sps="-", ret="-")
        return self

    def update(self, *, steps: int, metrics: Mapping[str, float]) -> None:
        """Move the bar to ``steps`` and show the latest SPS and mean episode return."""
        sps = metrics.get(TIME_SPS)
        ret = metrics.get(EPISODE_RETURN_MEAN)
        if self._lines:
            now = time.monotonic()
            if now - self._last_line >= self._line_every or steps >= self._total:
                self._last_line = now
                score = metrics.get(EVAL_SCORE)
                parts = [
                    f"train {steps:,}/{self._total:,} {self._unit}",
                    f"{sps:,.0f} sps" if sps is not None else "",
                    f"return {ret:.2f}" if ret is not None else "",
                    f"eval {score:.2f}" if score is not None else "",
                ]
                print("  ".join(part for part in parts if part), flush=True)
            return
        if self._progress is None:
            return
        self._progress.update(
            self._task,
            completed=steps,
            sps=f"{sps:,.0f}" if sps is not None else "-",
            ret=f"{ret:.1f}" if ret is not None else "-",
        )

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

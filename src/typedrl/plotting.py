"""Learning curves from run folders: overlaid runs, and mean ± std over seeds.

:func:`read_run` reads what a run folder written by ``typedrl train`` holds
for plotting (its ``metrics.csv``, the ``config.yaml`` it was trained with);
:func:`plot_runs` draws one metric of several runs into a PNG. Runs whose
configs differ only by their seed (and the command line and run folder) are
drawn as one curve, the mean over seeds with a ± one standard deviation band
on a common grid of env steps; every other run is a curve of its own. Needs
matplotlib (``pip install 'typedrl[plot]'``); figures are drawn with the Agg
backend, so no display is needed.

The step column of ``metrics.csv`` counts env steps over all ranks. Wall time
is the running sum of ``time/iteration_seconds``, the time each logged
iteration took.
"""

import csv
import importlib
import importlib.util
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, final

import numpy as np

from typedrl.checkpoint import StrPath
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.metrics import EPISODE_RETURN_MEAN, EVAL_RETURN_MEAN, TIME_ITERATION_SECONDS
from typedrl.runs import CONFIG_FILE, read_run_config

__all__ = [
    "EVAL_RETURN_METRIC",
    "TRAIN_RETURN_METRIC",
    "Curve",
    "RunData",
    "XAxis",
    "plot_runs",
    "read_run",
    "seed_groups",
]

EVAL_RETURN_METRIC: Final = EVAL_RETURN_MEAN
"""The mean deterministic evaluation return, logged when the trainer evaluates."""

TRAIN_RETURN_METRIC: Final = EPISODE_RETURN_MEAN
"""The mean return of the training episodes that ended in an iteration."""

XAxis: TypeAlias = Literal["env_steps", "wall_time"]
"""What the x axis shows: env steps over all ranks, or seconds of training."""

_WALL_TIME_COLUMN: Final = TIME_ITERATION_SECONDS
_X_LABELS: Final[Mapping[XAxis, str]] = {"env_steps": "env steps", "wall_time": "wall time (s)"}
_MARKED_POINTS: Final = 20
_IGNORED_KEYS: Final = frozenset({"seed", "command"})
"""Keys of ``config.yaml`` that do not make two runs different experiments."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunData:
    """What :func:`read_run` found in a run folder."""

    run_dir: Path
    """The run folder."""

    columns: Mapping[str, np.ndarray[Any, np.dtype[np.float64]]]
    """Every column of ``metrics.csv`` (``"step"`` included) as float64, NaN where blank."""

    config: Mapping[str, Any] = field(default_factory=dict)
    """The run's ``config.yaml`` (empty when the folder has none)."""

    @property
    def algorithm(self) -> str | None:
        """The ``algo`` of the config, else of ``summary.json``; ``None`` if neither says."""
        return _describe(self, "algo", "algorithm")

    @property
    def env_id(self) -> str | None:
        """The ``env_id`` of the config, else of ``summary.json``; ``None`` if neither says."""
        return _describe(self, "env_id", "env_id")

    def experiment(self) -> Mapping[str, Any]:
        """The config without what differs between seeds of one experiment.

        That is ``seed``, ``config.seed``, ``command``, and every key, at any
        depth, whose name contains ``run_dir`` (where a run was written).
        """
        kept = {key: value for key, value in self.config.items() if key not in _IGNORED_KEYS}
        inner = kept.get("config")
        if isinstance(inner, Mapping):
            kept["config"] = {key: value for key, value in inner.items() if key != "seed"}
        experiment: Mapping[str, Any] = _without_run_dirs(kept)
        return experiment

    def series(self, metric: str, *, x: XAxis = "env_steps") -> "Curve":
        """The rows where ``metric`` was logged, as ``(x, value)`` arrays sorted by x.

        Raises:
            ConfigError: The run never logged ``metric`` (the message lists what it
                logged), or ``x="wall_time"`` and it has no iteration times.
        """
        if metric not in self.columns:
            logged = sorted(name for name in self.columns if name != "step")
            raise ConfigError(
                f"{self.run_dir / 'metrics.csv'} has no metric {metric!r}; it logged {logged}"
            )
        if x == "env_steps":
            xs = self.columns["step"]
        else:
            if _WALL_TIME_COLUMN not in self.columns:
                raise ConfigError(
                    f"{self.run_dir / 'metrics.csv'} has no {_WALL_TIME_COLUMN!r} column, "
                    "so --x wall_time cannot be drawn; use --x env_steps"
                )
            xs = np.cumsum(np.nan_to_num(self.columns[_WALL_TIME_COLUMN]))
        values = self.columns[metric]
        keep = np.isfinite(values) & np.isfinite(xs)
        order = np.argsort(xs[keep], kind="stable")
        return Curve(x=xs[keep][order], y=values[keep][order])


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    """One metric against x: ``x`` ascending, ``y`` of the same length."""

    x: np.ndarray[Any, np.dtype[np.float64]]
    """The x values (env steps or seconds), ascending."""

    y: np.ndarray[Any, np.dtype[np.float64]]
    """The metric at each x."""


def _describe(run: RunData, config_key: str, summary_key: str) -> str | None:
    value = run.config.get(config_key)
    if isinstance(value, str):
        return value
    summary = run.run_dir / "summary.json"
    if summary.is_file():
        try:
            found = json.loads(summary.read_text()).get(summary_key)
        except (json.JSONDecodeError, AttributeError):
            return None
        return found if isinstance(found, str) else None
    return None


def _without_run_dirs(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_run_dirs(item) for key, item in value.items() if "run_dir" not in key}
    if isinstance(value, list | tuple):
        return [_without_run_dirs(item) for item in value]
    return value


def _metrics_file(run_dir: Path) -> Path:
    for candidate in (run_dir / "metrics.csv", run_dir / "logs" / "typedrl" / "metrics.csv"):
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"{run_dir} holds no metrics.csv; expected a run folder written by `typedrl train`"
    )


def _number(cell: str) -> float:
    if not cell:
        return math.nan
    try:
        return float(cell)
    except ValueError:
        return math.nan


def read_run(run_dir: StrPath) -> RunData:
    """Read a run folder's ``metrics.csv`` and ``config.yaml``.

    ``metrics.csv`` is looked for in the folder, then in ``logs/typedrl/``
    (where earlier releases wrote it). Blank and non-numeric cells read as NaN.

    Args:
        run_dir: A folder written by ``typedrl train``.

    Returns:
        The columns of the metrics and the config (empty without ``config.yaml``).

    Raises:
        ConfigError: ``run_dir`` is not a folder, holds no ``metrics.csv``, its
            ``metrics.csv`` has no ``step`` column, or its ``config.yaml`` is
            not a run's config (:func:`~typedrl.runs.read_run_config`).
    """
    folder = Path(run_dir)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; expected a run folder of `typedrl train`")
    path = _metrics_file(folder)
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0] if rows else []
    if "step" not in header:
        raise ConfigError(f"{path} has no 'step' column; its header is {header}")
    body = rows[1:]
    columns = {
        name: np.array(
            [_number(row[i]) if i < len(row) else math.nan for row in body], dtype=np.float64
        )
        for i, name in enumerate(header)
    }
    config: Mapping[str, Any] = {}
    config_path = folder / CONFIG_FILE
    if config_path.is_file():
        config = read_run_config(config_path)
    return RunData(run_dir=folder, columns=columns, config=config)


def seed_groups(runs: Sequence[RunData]) -> list[list[RunData]]:
    """Runs grouped by :meth:`RunData.experiment`, in the order they first appear.

    Runs without a ``config.yaml`` are never grouped: each is a group of its own.
    """
    groups: list[list[RunData]] = []
    keys: list[str | None] = []
    for run in runs:
        key = json.dumps(run.experiment(), sort_keys=True, default=str) if run.config else None
        if key is not None and key in keys:
            groups[keys.index(key)].append(run)
        else:
            groups.append([run])
            keys.append(key)
    return groups


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            flat.update(_flatten(item, f"{name}."))
        else:
            flat[name] = item
    return flat


def _short(value: object, limit: int = 32) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _labels(groups: Sequence[Sequence[RunData]]) -> list[str]:
    """Name each group by the config values that set it apart, else by its folder."""
    flats = [_flatten(group[0].experiment()) for group in groups]
    # Only runs with a config are told apart by it; the others go by their folder name.
    described = [flat for group, flat in zip(groups, flats, strict=True) if group[0].config]
    # Top-level keys (algo, env_id, num_envs) name a run better than nested ones.
    names = sorted(
        {name for flat in described for name in flat if name != "source"},
        key=lambda name: (name.count("."), name),
    )
    differing = [
        name
        for name in names
        if len({json.dumps(flat.get(name), sort_keys=True, default=str) for flat in described}) > 1
    ]
    labels = []
    for group, flat in zip(groups, flats, strict=True):
        values = ", ".join(f"{name}={_short(flat.get(name))}" for name in differing[:3])
        label = values if group[0].config and differing else group[0].run_dir.name
        if len(group) > 1:
            label += f" (mean ± std, {len(group)} seeds)"
        labels.append(label)
    return labels


def _on_common_grid(curves: Sequence[Curve]) -> Curve | None:
    """Interpolate every curve onto the x range they all cover; ``None`` if there is none."""
    start = max(float(curve.x[0]) for curve in curves)
    end = min(float(curve.x[-1]) for curve in curves)
    if end < start:
        return None
    points = max(len(curve.x) for curve in curves)
    grid = np.linspace(start, end, points) if end > start else np.array([start])
    stacked = np.stack([np.interp(grid, curve.x, curve.y) for curve in curves])
    return Curve(x=grid, y=stacked)


def _marker(xs: np.ndarray[Any, np.dtype[np.float64]]) -> str | None:
    """Dots on sparse curves (a few evaluations), plain lines on dense ones."""
    return "o" if len(xs) <= _MARKED_POINTS else None


def _pyplot() -> Any:
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingDependencyError(
            "plotting learning curves needs matplotlib: pip install 'typedrl[plot]'"
        )
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _logged(run: RunData, metric: str) -> int:
    """How many rows of ``run`` hold a value of ``metric``."""
    return int(np.isfinite(run.columns[metric]).sum()) if metric in run.columns else 0


def _default_metric(runs: Sequence[RunData]) -> str:
    # The evaluation return makes a curve only when some run evaluated more than once
    # (a run evaluated at its end alone has one point); else the training return. A
    # metric every run logged comes first.
    every = [
        m for m in (EVAL_RETURN_METRIC, TRAIN_RETURN_METRIC) if all(_logged(r, m) for r in runs)
    ]
    if EVAL_RETURN_METRIC in every and any(_logged(r, EVAL_RETURN_METRIC) > 1 for r in runs):
        return EVAL_RETURN_METRIC
    preferred = [m for m in (TRAIN_RETURN_METRIC, EVAL_RETURN_METRIC) if m in every]
    for metric in (*preferred, EVAL_RETURN_METRIC, TRAIN_RETURN_METRIC):
        if any(_logged(run, metric) for run in runs):
            return metric
    raise ConfigError(
        f"none of {[str(run.run_dir) for run in runs]} logged {EVAL_RETURN_METRIC!r} or "
        f"{TRAIN_RETURN_METRIC!r}; name a metric they logged with metric=... (--metric)"
    )


def _title(runs: Sequence[RunData], metric: str) -> str:
    """``"<algorithms> on <envs>: <metric>"``, leaving out what no run records."""
    algorithms = sorted({run.algorithm.upper() for run in runs if run.algorithm})
    envs = sorted({run.env_id for run in runs if run.env_id})
    parts = [" / ".join(algorithms)] if algorithms else []
    if envs:
        parts.append(f"on {' / '.join(envs)}")
    return f"{' '.join(parts)}: {metric}" if parts else metric


def plot_runs(
    run_dirs: Sequence[StrPath],
    output: StrPath,
    *,
    metric: str | None = None,
    x: XAxis = "env_steps",
) -> Path:
    r"""Draw ``metric`` of every run in ``run_dirs`` into the PNG ``output``.

    Runs that differ only by seed (see :meth:`RunData.experiment`) are one
    curve: the mean over the seeds with a ± one standard deviation band,
    interpolated onto a common grid over the x range every seed covers. Other
    runs are overlaid, each labelled by the config values that set it apart
    (or its folder's name). The x axis is env steps (or seconds of training
    with ``x="wall_time"``), the y axis the metric; the title names the
    algorithms and envs.

    Args:
        run_dirs: At least one run folder.
        output: The PNG file to write (its folder is created).
        metric: A column of ``metrics.csv``; default the evaluation return
            (:data:`EVAL_RETURN_METRIC`) when every run logged it and one run
            logged it more than once, else the training episode return
            (:data:`TRAIN_RETURN_METRIC`) when every run logged it, else the
            evaluation return when every run logged it, else whichever of the
            two (evaluation first) any run logged.
        x: ``"env_steps"`` or ``"wall_time"``.

    Returns:
        The written file.

    Raises:
        ConfigError: No run folders, an ``output`` that is not a PNG, a folder
            without ``metrics.csv``, a run that never logged ``metric``, or
            no run with any value of it.
        MissingDependencyError: matplotlib is not installed.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> with tempfile.TemporaryDirectory() as run:
        ...     _ = (Path(run) / "metrics.csv").write_text(
        ...         "step,episode/return_mean\n100,10.0\n200,25.0\n300,40.0\n"
        ...     )
        ...     plot_runs([run], Path(run) / "curve.png").name
        'curve.png'
    """
    if not run_dirs:
        raise ConfigError("plot_runs needs at least one run folder, got none")
    target = Path(output)
    if target.suffix.lower() != ".png":
        raise ConfigError(
            f"plot_runs writes a PNG file; expected a path ending in .png, got {target}"
        )
    runs = [read_run(run_dir) for run_dir in run_dirs]
    name = metric if metric is not None else _default_metric(runs)
    curves = {id(run): run.series(name, x=x) for run in runs}
    if all(len(curve.x) == 0 for curve in curves.values()):
        raise ConfigError(
            f"no run logged a value of {name!r} in {[str(run.run_dir) for run in runs]}"
        )
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7.0, 4.5))
    try:
        groups = seed_groups(runs)
        for group, label in zip(groups, _labels(groups), strict=True):
            members = [(run, curves[id(run)]) for run in group if len(curves[id(run)].x)]
            combined = (
                _on_common_grid([curve for _, curve in members]) if len(members) > 1 else None
            )
            if combined is None:
                # One seed, or seeds whose x ranges do not overlap: a curve for each.
                for run, curve in members:
                    suffix = f" ({run.run_dir.name})" if len(members) > 1 else ""
                    axes.plot(curve.x, curve.y, marker=_marker(curve.x), label=label + suffix)
                continue
            mean, std = combined.y.mean(axis=0), combined.y.std(axis=0)
            if len(combined.x) == 1:
                # One common point (one evaluation per run): a mean with a ± std bar.
                axes.errorbar(combined.x, mean, yerr=std, marker="o", capsize=4, label=label)
                continue
            (line,) = axes.plot(combined.x, mean, marker=_marker(combined.x), label=label)
            axes.fill_between(
                combined.x, mean - std, mean + std, color=line.get_color(), alpha=0.25
            )
        axes.set_xlabel(_X_LABELS[x])
        axes.set_ylabel(name)
        axes.set_title(_title(runs, name))
        axes.grid(visible=True, alpha=0.3)
        axes.legend(loc="best", fontsize="small")
        figure.tight_layout()
        target.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(target, dpi=120)
    finally:
        plt.close(figure)
    return target

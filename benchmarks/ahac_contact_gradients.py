"""How an AHAC run's actor gradient grows with the contact forces of its windows.

AHAC's threshold ``C`` (``contact_threshold``) is compared with each step's
mean contact-force norm over the env's rows; a run logs the mean of these over
each window (``ahac/contact_norm``). The reference's
``C = 500`` is for its own simulator's scale (contact forces divided by body
accelerations); typedrl's Newton envs report newtons. This script measures
where, in an env's own units, the windows' gradients turn large: it bins every
update of one or more AHAC run folders by the window's mean contact norm and
prints, per bin, the number of updates and the median and 90th percentile of
the actor's gradient norm before clipping (``train/grad_norm``) and the median
of the largest per-row action adjoint (``adjoint/norm_max``)::

    python benchmarks/ahac_contact_gradients.py runs/ahac-halfcheetah-s0 runs/ahac-halfcheetah-s1

``--bins`` sets the bin edges (newtons for the Newton envs; the last bin is
open above). ``--replay C [C ...]`` also replays each run's horizon rule
(:class:`typedrl.ahac.AdaptiveHorizon`, the run's own settings) at other
thresholds on the run's logged window means: every step of a window takes
the window's mean, and the windows stay those the run had, so the horizons
it prints are an estimate, not a run. ``docs/guides/ahac.rst`` reads the
HalfCheetah's table.
"""

import argparse
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from typedrl.ahac import AdaptiveHorizon
from typedrl.plotting import RunData, read_run

_Column = np.ndarray[Any, np.dtype[np.float64]]

CONTACT = "ahac/contact_norm"
GRADIENT = "train/grad_norm"
ADJOINT = "adjoint/norm_max"
DEFAULT_BINS = (0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 400.0, 500.0, 750.0, 1000.0)


@dataclass(frozen=True)
class Bin:
    """The updates whose window's mean contact norm lies in ``[low, high)``."""

    low: float
    high: float
    updates: int
    gradient_median: float
    gradient_p90: float
    adjoint_median: float


def contact_bins(
    contact: _Column, gradient: _Column, adjoint: _Column, edges: Sequence[float]
) -> list[Bin]:
    """The non-empty bins of the updates, by contact norm; updates with a NaN are left out.

    Example:
        >>> rows = contact_bins(
        ...     np.array([10.0, 20.0, 300.0]), np.array([1.0, 3.0, 9.0]),
        ...     np.array([0.1, 0.2, 0.5]), [0.0, 100.0])
        >>> [(b.low, b.high, b.updates, b.gradient_median) for b in rows]
        [(0.0, 100.0, 2, 2.0), (100.0, inf, 1, 9.0)]
    """
    known = ~(np.isnan(contact) | np.isnan(gradient))
    bounds = [*edges, math.inf]
    bins = []
    for low, high in itertools.pairwise(bounds):
        inside = known & (contact >= low) & (contact < high)
        if not inside.any():
            continue
        grads = gradient[inside]
        adjoints = adjoint[inside & ~np.isnan(adjoint)]
        bins.append(
            Bin(
                low=low,
                high=high,
                updates=int(inside.sum()),
                gradient_median=float(np.median(grads)),
                gradient_p90=float(np.quantile(grads, 0.9)),
                adjoint_median=float(np.median(adjoints)) if adjoints.size else math.nan,
            )
        )
    return bins


@dataclass(frozen=True)
class Replay:
    """The horizon ``H`` replayed at threshold ``C`` over a run's logged windows."""

    threshold: float
    final: float
    largest: float
    longer: int
    """The windows after which ``H`` rounds above its minimum."""


def replay_horizon(contact: _Column, algorithm: dict[str, Any], threshold: float) -> Replay:
    """``H`` after each of the windows, their means as every step's contacts, at ``threshold``.

    ``algorithm`` holds the run's AHAC settings (``horizon_min``, ``horizon_max``,
    ``horizon_learning_rate`` and its schedule); the schedule spans the logged windows.

    Example:
        >>> settings = {"horizon_min": 8, "horizon_max": 64, "horizon_learning_rate": 0.01,
        ...     "horizon_learning_rate_schedule": "constant", "horizon_min_learning_rate": 0.0}
        >>> replay_horizon(np.array([1500.0, 1500.0]), settings, 500.0)
        Replay(threshold=500.0, final=10.6, largest=10.6, longer=2)
    """
    means = [float(c) for c in contact if not math.isnan(c)]
    horizon = AdaptiveHorizon(
        minimum=int(algorithm["horizon_min"]),
        maximum=int(algorithm["horizon_max"]),
        threshold=threshold,
        learning_rate=float(algorithm["horizon_learning_rate"]),
        schedule=algorithm["horizon_learning_rate_schedule"],
        min_learning_rate=float(algorithm["horizon_min_learning_rate"]),
        planned_updates=len(means),
    )
    trace = []
    for mean in means:
        horizon.update([mean] * horizon.steps)
        trace.append(horizon.horizon)
    return Replay(
        threshold=threshold,
        final=round(trace[-1], 2) if trace else horizon.horizon,
        largest=round(max(trace, default=horizon.horizon), 2),
        longer=sum(round(h) > horizon.minimum for h in trace),
    )


def _algorithm_settings(run: RunData) -> dict[str, Any]:
    config = run.config.get("config", {})
    algorithm = config.get("algorithm", {}) if isinstance(config, dict) else {}
    return dict(algorithm) if isinstance(algorithm, dict) else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="AHAC run folders of `typedrl train --algo ahac`")
    parser.add_argument(
        "--bins",
        type=float,
        nargs="+",
        default=list(DEFAULT_BINS),
        help="the bins' lower edges, increasing (default: %(default)s)",
    )
    parser.add_argument(
        "--replay",
        type=float,
        nargs="+",
        default=[],
        metavar="C",
        help="thresholds at which to replay each run's horizon rule (an estimate)",
    )
    args = parser.parse_args()
    columns: dict[str, list[_Column]] = {CONTACT: [], GRADIENT: [], ADJOINT: []}
    runs = []
    for run_dir in args.runs:
        run = read_run(run_dir)
        if CONTACT not in run.columns:
            parser.error(f"{run_dir} logs no {CONTACT}: not an AHAC run")
        if args.replay and "horizon_learning_rate" not in _algorithm_settings(run):
            parser.error(f"{run_dir}/config.yaml holds no AHAC settings to replay")
        runs.append(run)
        for name, parts in columns.items():
            parts.append(run.columns.get(name, np.full_like(run.columns[CONTACT], math.nan)))
    contact, gradient, adjoint = (np.concatenate(columns[name]) for name in columns)
    print(f"{len(args.runs)} run(s), {int((~np.isnan(contact)).sum())} updates")
    print("contact norm        updates   grad norm median   grad norm p90   adjoint max median")
    for row in contact_bins(contact, gradient, adjoint, args.bins):
        span = f"{row.low:g}-{row.high:g}" if math.isfinite(row.high) else f">= {row.low:g}"
        print(
            f"{span:>16}  {row.updates:10d}  {row.gradient_median:17.3g}  "
            f"{row.gradient_p90:14.3g}  {row.adjoint_median:19.3g}"
        )
    for run in runs if args.replay else []:
        print(f"{run.run_dir}: the horizon replayed on its windows' means (an estimate)")
        print("       C   final H   largest H   windows longer than the minimum")
        for threshold in args.replay:
            replay = replay_horizon(run.columns[CONTACT], _algorithm_settings(run), threshold)
            print(
                f"{replay.threshold:8g}  {replay.final:8g}  {replay.largest:10g}  "
                f"{replay.longer:32d}"
            )


if __name__ == "__main__":
    main()

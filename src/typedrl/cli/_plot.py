"""``typedrl plot``: learning curves of run folders, overlaid or aggregated over seeds."""

import argparse
from pathlib import Path

from typedrl.cli._parser import Commands, add_command

__all__ = ["add_plot_parser", "run_plot"]


def add_plot_parser(commands: Commands) -> None:
    """Add the ``plot`` subcommand."""
    plot = add_command(commands, "plot", handler=run_plot)
    plot.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    plot.add_argument(
        "-o",
        "--output",
        type=Path,
        help="the PNG to write (default: RUN_DIR/curve.png for one run, else curve.png)",
    )
    plot.add_argument(
        "--metric",
        help=(
            "a metrics.csv column (default: eval/return_mean when every run logged it and "
            "one run more than once, else episode/return_mean; see the CLI guide)"
        ),
    )
    plot.add_argument(
        "--x",
        choices=["env_steps", "wall_time"],
        default="env_steps",
        help="x axis: env steps (default) or seconds of training",
    )


def run_plot(args: argparse.Namespace) -> int:
    """Draw learning curves of run folders into a PNG (needs matplotlib).

    Draw one metric of each run's metrics.csv against env steps. Runs whose config.yaml
    differ only by seed are drawn as their mean with a ± std band; other runs are overlaid
    and labelled.
    """
    from typedrl.plotting import plot_runs  # noqa: PLC0415 - keep `typedrl --help` fast

    run_dirs: list[Path] = list(args.run_dirs)
    output: Path = args.output or (
        run_dirs[0] / "curve.png" if len(run_dirs) == 1 else Path("curve.png")
    )
    # `typedrl plot runs/*` draws the runs there are: a folder that never logged is named.
    trained = [run_dir for run_dir in run_dirs if not _never_logged(run_dir)]
    if len(run_dirs) > 1 and trained:
        for run_dir in run_dirs:
            if run_dir not in trained:
                print(f"skipped {run_dir}: no metrics.csv (not a run, or one that never trained)")
        run_dirs = trained
    written = plot_runs(run_dirs, output, metric=args.metric, x=args.x)
    print(f"wrote {written}")
    return 0


def _never_logged(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a folder without a ``metrics.csv`` (where ``read_run`` looks)."""
    return run_dir.is_dir() and not any(
        (run_dir / name).is_file() for name in ("metrics.csv", "logs/typedrl/metrics.csv")
    )

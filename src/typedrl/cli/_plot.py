"""``typedrl plot``: learning curves of run folders, overlaid or aggregated over seeds."""

import argparse
from pathlib import Path

__all__ = ["add_plot_parser", "run_plot"]


def add_plot_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the ``plot`` subcommand."""
    plot = commands.add_parser(
        "plot",
        help="draw learning curves of run folders into a PNG (needs matplotlib)",
        description=(
            "Draw one metric of each run's metrics.csv against env steps. Runs whose "
            "config.yaml differ only by seed are drawn as their mean with a ± std band; "
            "other runs are overlaid and labelled."
        ),
    )
    plot.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    plot.add_argument(
        "-o",
        "--output",
        type=Path,
        help="the PNG to write (default: RUN_DIR/curve.png for one run, else curve.png)",
    )
    plot.add_argument(
        "--metric",
        help="a metrics.csv column (default: eval/return_mean, else episode/return_mean)",
    )
    plot.add_argument(
        "--x",
        choices=["env_steps", "wall_time"],
        default="env_steps",
        help="x axis: env steps (default) or seconds of training",
    )
    plot.set_defaults(handler=run_plot)


def run_plot(args: argparse.Namespace) -> int:
    """Draw the curves and print where the PNG went."""
    from typedrl.plotting import plot_runs  # noqa: PLC0415 - keep `typedrl --help` fast

    output: Path = args.output or (
        args.run_dirs[0] / "curve.png" if len(args.run_dirs) == 1 else Path("curve.png")
    )
    written = plot_runs(args.run_dirs, output, metric=args.metric, x=args.x)
    print(f"wrote {written}")
    return 0

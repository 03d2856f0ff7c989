"""Entry point and argument parsing of the ``typedrl`` command."""

import argparse
import platform
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

__all__ = ["build_parser", "main"]

_REPORTED_PACKAGES = ("typedrl", "torch", "gymnasium", "tensordict", "lightning", "numpy")


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _run_info(_: argparse.Namespace) -> int:
    """Print the versions and devices typedrl sees (paste this into bug reports)."""
    import torch  # noqa: PLC0415 - keep `typedrl --help` fast

    print(f"python      {platform.python_version()} ({platform.platform()})")
    for name in _REPORTED_PACKAGES:
        print(f"{name:<11} {_package_version(name)}")
    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print(f"cuda        {cuda} device(s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``typedrl`` command."""
    parser = argparse.ArgumentParser(
        prog="typedrl", description="Typed, shape-checked reinforcement learning on PyTorch."
    )
    parser.add_argument(
        "--version", action="version", version=f"typedrl {_package_version('typedrl')}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = commands.add_parser("info", help="print package versions and available devices")
    info.set_defaults(handler=_run_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``typedrl`` command and return its exit status.

    Example:
        >>> main(["info"])  # doctest: +ELLIPSIS
        python ...
        0
    """
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())

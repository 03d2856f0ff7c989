"""Entry point and argument parsing of the ``typedrl`` command."""

import argparse
import ast
import importlib.util
import os
import platform
import sys
import warnings
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["build_parser", "main"]

from typedrl.cli._evaluate import add_evaluate_parser
from typedrl.cli._export import add_export_parser
from typedrl.cli._parser import add_command, add_debug_flag, add_env_arguments
from typedrl.cli._plot import add_plot_parser
from typedrl.cli._train import add_train_parser
from typedrl.errors import TypedRLError

_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""

_REPORTED_PACKAGES = ("typedrl", "torch", "gymnasium", "tensordict", "lightning-fabric", "numpy")


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _torch_is_cpu_build() -> bool:
    """Whether the installed torch was built without CUDA and ROCm, known without importing it.

    Reads the ``cuda`` and ``hip`` assignments of ``torch/version.py`` (importing
    ``torch.version`` would import torch, about a second). Anything unexpected
    (no such file, another layout) answers ``False``, so the caller asks torch.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    try:
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    built: dict[str, object] = {}
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            built[target.id] = value.value
    return "cuda" in built and "hip" in built and built["cuda"] is None and built["hip"] is None


def _run_info(_: argparse.Namespace) -> int:
    """Print package versions and available devices.

    Print the versions of typedrl and the packages it runs on, and the devices torch
    sees: paste this into bug reports. A CPU build of torch is not imported (it
    would take about a second to say it sees no CUDA device).
    """
    print(f"{'python':<16} {platform.python_version()} ({platform.platform()})")
    for name in _REPORTED_PACKAGES:
        print(f"{name:<16} {_package_version(name)}")
    if _torch_is_cpu_build():
        print(f"{'cuda':<16} 0 device(s) (a CPU build of torch)")
        return 0
    import torch  # noqa: PLC0415 - keep `typedrl --help` fast

    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print(f"{'cuda':<16} {cuda} device(s)")
    return 0


def _run_check_env(args: argparse.Namespace) -> int:
    """Check an env against the vector-env contract (exit status 1 on violations).

    Build the env by id (with --env-kwargs and --wrapper as typedrl train takes them), run
    the conformance checker (the gradient rules too for a
    differentiable env, unless --no-gradients) and print its report.
    """
    from typedrl.cli._config import parse_env_kwargs  # noqa: PLC0415
    from typedrl.envs import (  # noqa: PLC0415 - keep `typedrl --help` fast
        check_differentiable_vec_env,
        check_vec_env,
        make,
    )
    from typedrl.envs._gymnasium import check_env_hint  # noqa: PLC0415
    from typedrl.protocols import DifferentiableVecEnv  # noqa: PLC0415

    env = make(
        args.env_id,
        num_envs=args.num_envs,
        vectorization=args.vectorization,
        device=args.device,
        float_dtype=args.float_dtype,
        env_kwargs=parse_env_kwargs(args.env_kwargs),
        wrappers=args.wrapper,
    )
    try:
        differentiable = isinstance(env, DifferentiableVecEnv) and not args.no_gradients
        check = check_differentiable_vec_env if differentiable else check_vec_env
        report = check(env, seed=args.seed, num_steps=args.num_steps, max_examples=args.examples)
    finally:
        env.close()
    # The env's own messages end by pointing here; within this report that goes without saying.
    print(str(report).replace(f"; {check_env_hint(args.env_id)}", ""))
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``typedrl`` command."""
    parser = argparse.ArgumentParser(
        prog="typedrl", description="Typed, shape-checked reinforcement learning on PyTorch."
    )
    parser.add_argument(
        "--version", action="version", version=f"typedrl {_package_version('typedrl')}"
    )
    add_debug_flag(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_command(commands, "info", handler=_run_info)
    add_train_parser(commands)
    add_evaluate_parser(commands)
    add_plot_parser(commands)
    add_export_parser(commands)
    check = add_command(commands, "check-env", handler=_run_check_env)
    check.add_argument(
        "env_id",
        help="a Gymnasium id (module:EnvId for one a package registers, e.g. "
        '"ale_py:ALE/Pong-v5"), a built-in id such as "typedrl/Pendulum-v0", or module:callable',
    )
    add_env_arguments(check)
    check.add_argument("--num-envs", type=int, default=4)
    check.add_argument(
        "--vectorization", choices=["sync", "async", "vector_entry_point"], default="sync"
    )
    check.add_argument("--device", default="cpu")
    check.add_argument("--float-dtype", choices=["float32", "float64"], default="float32")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--num-steps", type=int, default=32, help="steps per rollout")
    check.add_argument("--examples", type=int, default=10, help="rollouts (hypothesis examples)")
    check.add_argument(
        "--no-gradients",
        action="store_true",
        help="skip the gradient rules of differentiable envs",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``typedrl`` command and return its exit status.

    Example:
        >>> main(["info"])  # doctest: +ELLIPSIS
        python ...
        0
    """
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(arguments)
    args.command_line = ["typedrl", *arguments]  # recorded in a run folder's config.yaml
    # As `python -m` does: modules in the current folder can be named (my_envs:make_env),
    # by train and by every command that rebuilds a run's env; for this command only.
    here = str(Path.cwd())
    added = here not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        with warnings.catch_warnings():
            if not args.debug:
                # Gymnasium's AsyncVectorEnv reports a worker's exception as warnings (its
                # traceback among them) before it raises it again in this process, where the
                # Gymnasium adapter turns it into one line; --debug shows them.
                warnings.filterwarnings(
                    "ignore",
                    message=".*ERROR: ",
                    category=UserWarning,
                    module=r"gymnasium\.vector\.async_vector_env",
                )
            status: int = args.handler(args)
    except TypedRLError as error:
        if args.debug:
            raise
        # One clear line for a mistake a user can fix, on every rank: each node's log says
        # why its processes stopped, and a rank that failed alone names its own error.
        first, *rest = str(error).splitlines() or [""]
        print(f"typedrl: {type(error).__name__}: {first}", file=sys.stderr)
        for line in rest:
            print(f"  {line}", file=sys.stderr)
        print("(run with --debug for the traceback)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C before a trainer installs its own signal handling (imports, env start-up).
        if args.debug:
            raise
        if os.environ.get("RANK", "0") == "0":
            print(f"typedrl {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return _INTERRUPTED
    finally:
        if added and here in sys.path:
            sys.path.remove(here)
    return status


if __name__ == "__main__":
    raise SystemExit(main())

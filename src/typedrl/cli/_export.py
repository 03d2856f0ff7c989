"""``typedrl export``: a checkpoint's deterministic policy as ONNX or TorchScript."""

import argparse
from pathlib import Path

from typedrl.cli._parser import Commands, add_checkpoint_argument, add_command

__all__ = ["add_export_parser", "run_export"]


def add_export_parser(commands: Commands) -> None:
    """Add the ``export`` subcommand."""
    export = add_command(commands, "export", handler=run_export)
    add_checkpoint_argument(export)
    export.add_argument(
        "--format",
        dest="export_format",
        choices=["onnx", "torchscript"],
        default="onnx",
        help="onnx (default; needs typedrl[onnx]) or torchscript",
    )
    export.add_argument(
        "-o",
        "--output",
        type=Path,
        help="the file to write (default: RUN_DIR/policy.onnx, or beside the checkpoint)",
    )
    export.add_argument(
        "--env", dest="env_id", help="the env whose spaces to use (default: the checkpoint's)"
    )


def run_export(args: argparse.Namespace) -> int:
    """Export a run's or checkpoint's deterministic policy (ONNX or TorchScript).

    Write the deterministic policy of a checkpoint (or of a run folder's best.ckpt, else
    last.ckpt), observation normalisation included, as a model from an observation tensor
    [batch, obs_dim] to actions.
    """
    from typedrl.export import export_checkpoint  # noqa: PLC0415 - keep `typedrl --help` fast

    result = export_checkpoint(
        args.checkpoint, output=args.output, export_format=args.export_format, env_id=args.env_id
    )
    action = (
        "int64 [batch] (action index)"
        if result.discrete
        else f"[batch, {', '.join(map(str, result.action_shape))}]"
    )
    print(f"checkpoint  {result.checkpoint.path}")
    print(f"env         {result.env_id}")
    print(f"input       obs float32 [batch, {result.obs_dim}]")
    print(f"output      action {action}")
    print(f"wrote       {result.path} ({result.format})")
    return 0

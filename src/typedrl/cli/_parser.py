"""The argument-parser pieces that several ``typedrl`` subcommands share."""

import argparse
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

__all__ = [
    "Commands",
    "Handler",
    "add_checkpoint_argument",
    "add_command",
    "add_debug_flag",
    "add_env_arguments",
    "add_env_kwargs_argument",
    "add_policy_arguments",
]

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The subcommand group of the ``typedrl`` parser."""
Handler: TypeAlias = Callable[[argparse.Namespace], int]
"""Runs a parsed subcommand and returns its exit status."""


def add_command(commands: Commands, name: str, *, handler: Handler) -> argparse.ArgumentParser:
    """Add the subcommand ``name``, which :func:`~typedrl.cli.main` runs with ``handler``.

    The handler's docstring is the command's help, so the text has one copy: its
    summary line (without the full stop) is what ``typedrl --help`` lists, and
    the paragraph after it, if there is one, is the description ``typedrl NAME
    --help`` shows (under ``python -OO``, which strips docstrings, both are left
    out).
    """
    summary, _, rest = inspect.cleandoc(handler.__doc__ or "").partition("\n\n")
    description = " ".join(rest.partition("\n\n")[0].split()) or None
    parser = commands.add_parser(
        name, help=" ".join(summary.split()).removesuffix(".") or None, description=description
    )
    parser.set_defaults(handler=handler)
    return parser


def add_debug_flag(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """Add ``--debug``: an error shows its full traceback instead of its one-line message.

    On a subcommand the flag sets ``debug`` only when it is given, so that it never
    overrides the same flag given before the subcommand's name.
    """
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help="show the full traceback of an error instead of its one-line message",
    )


def add_env_kwargs_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """Add the repeatable ``--env-kwargs`` (parsed by :func:`.parse_env_kwargs`)."""
    parser.add_argument(
        "--env-kwargs", action="append", default=[], metavar="JSON|KEY=VALUE", help=help
    )


def add_env_arguments(parser: argparse.ArgumentParser) -> None:
    """Add what builds the env besides its id: ``--env-kwargs`` and the repeatable ``--wrapper``.

    ``typedrl train`` and ``typedrl check-env`` take them with the same meaning.
    """
    add_env_kwargs_argument(parser, help="keyword arguments of the env's constructor (repeatable)")
    parser.add_argument(
        "--wrapper",
        action="append",
        default=[],
        metavar="SPEC",
        help="a Gymnasium wrapper for each single env, applied in order (repeatable): "
        "gymnasium.wrappers.<Name>, a dotted path or module:Class, with keyword arguments of "
        "literal values if it needs them, e.g. 'FrameStackObservation(stack_size=4)'",
    )


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--policy`` and the repeatable ``--policy-kwargs``: a policy factory, its arguments."""
    parser.add_argument(
        "--policy",
        metavar="MODULE:FUNCTION",
        help="train the policy this factory builds, called as FUNCTION(observation_space, "
        "action_space, **kwargs) (default: the algorithm's MLP); recorded in config.yaml and "
        "every checkpoint, so evaluate, export and --resume rebuild it",
    )
    parser.add_argument(
        "--policy-kwargs",
        action="append",
        default=[],
        metavar="JSON|KEY=VALUE",
        help="keyword arguments of the policy factory, JSON values (repeatable)",
    )


def add_checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    """Add the positional ``RUN_DIR|CKPT`` (read by :func:`typedrl.restore.locate_checkpoint`)."""
    parser.add_argument(
        "checkpoint",
        type=Path,
        metavar="RUN_DIR|CKPT",
        help="a run folder (its best.ckpt, else last.ckpt) or a checkpoint file",
    )

"""Tests of the argument-parser pieces the subcommands share."""

import argparse

from typedrl.cli._parser import add_command, add_debug_flag, add_env_kwargs_argument


def _run(args: argparse.Namespace) -> int:
    del args
    return 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="typedrl")
    add_debug_flag(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    command = add_command(commands, "run", handler=_run, help="run it", description="Runs it.")
    add_debug_flag(command, subcommand=True)
    add_env_kwargs_argument(command, help="env options")
    return parser


def test_add_command_registers_the_handler() -> None:
    """The parsed subcommand carries the handler that runs it."""
    args = _parser().parse_args(["run"])
    assert args.handler(args) == 3


def test_debug_flag_before_or_after_the_subcommand() -> None:
    """``--debug`` counts on either side of the subcommand; absent on both, it is off."""
    parser = _parser()
    assert parser.parse_args(["run"]).debug is False
    assert parser.parse_args(["--debug", "run"]).debug is True
    assert parser.parse_args(["run", "--debug"]).debug is True


def test_env_kwargs_repeat_in_order() -> None:
    """``--env-kwargs`` collects its values in order, an empty list without any."""
    parser = _parser()
    assert parser.parse_args(["run"]).env_kwargs == []
    args = parser.parse_args(["run", "--env-kwargs", "a=1", "--env-kwargs", '{"b": 2}'])
    assert args.env_kwargs == ["a=1", '{"b": 2}']

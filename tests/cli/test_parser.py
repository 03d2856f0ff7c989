"""Tests of the argument-parser pieces the subcommands share."""

import argparse

from typedrl.cli._main import build_parser
from typedrl.cli._parser import add_command, add_debug_flag, add_env_kwargs_argument


def _run(args: argparse.Namespace) -> int:
    """Run it.

    Runs it, as the tests
    say.

    A developer's note the help leaves out.
    """
    del args
    return 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="typedrl")
    add_debug_flag(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    command = add_command(commands, "run", handler=_run)
    add_debug_flag(command, subcommand=True)
    add_env_kwargs_argument(command, help="env options")
    return parser


def test_add_command_registers_the_handler() -> None:
    """The parsed subcommand carries the handler that runs it."""
    args = _parser().parse_args(["run"])
    assert args.handler(args) == 3


def test_the_handler_docstring_is_the_help() -> None:
    """The summary line without its full stop is the help; the next paragraph, the description."""
    parser = _parser()
    listing = parser.format_help()
    assert "Run it" in listing
    assert "Run it." not in listing
    commands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    description = commands.choices["run"].description
    assert description == "Runs it, as the tests say."


def test_every_typedrl_command_has_help_and_a_description() -> None:
    """Each subcommand of ``typedrl`` lists a help line and shows a description."""
    parser = build_parser()
    commands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    listed = {choice.dest: choice.help for choice in commands._choices_actions}
    assert set(listed) == set(commands.choices)
    for name, help_text in listed.items():
        assert help_text, name
        assert not help_text.endswith("."), name
        assert commands.choices[name].description, name


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

"""Tests for the typedrl command's entry point."""

import pytest

from typedrl.cli import main


def test_info_prints_versions(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl info` prints one line per package and exits 0."""
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out
    assert "gymnasium" in out
    assert "cuda" in out


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl --version` prints the version and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("typedrl ")


def test_missing_command_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Running without a subcommand exits 2 with a usage message."""
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "usage: typedrl" in capsys.readouterr().err

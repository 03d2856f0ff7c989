"""`typedrl train --algo ahac` from the command line, without Newton."""

import sys
from pathlib import Path

import pytest

from typedrl.cli import main
from typedrl.errors import ConfigError, MissingDependencyError


def test_an_env_without_contact_forces_stops_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--algo ahac on the built-in Pendulum: one line naming the capability, no run folder."""
    run_dir = tmp_path / "run"
    argv = ["train", "typedrl/Pendulum-v0", "--algo", "ahac", "--run-dir", str(run_dir)]
    assert main([*argv, "--num-envs", "2", "--no-progress"]) != 0
    first, *_ = capsys.readouterr().err.strip().splitlines()
    assert first.startswith("typedrl: ConfigError: AHAC needs an env with the "), first
    assert "SupportsContactForces" in first
    assert not run_dir.exists()
    with pytest.raises(ConfigError, match="SupportsContactForces"):
        main(["--debug", *argv, "--num-envs", "2", "--no-progress"])


def test_the_default_env_is_the_newton_ant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--algo ahac with no env builds the Newton Ant: without the newton extra, a clear error."""
    # Newton and Warp cannot be imported in this test, installed or not.
    monkeypatch.setitem(sys.modules, "newton", None)
    monkeypatch.setitem(sys.modules, "warp", None)
    run_dir = tmp_path / "run"
    with pytest.raises(MissingDependencyError, match=r"typedrl\[newton\]"):
        main(["--debug", "train", "--algo", "ahac", "--run-dir", str(run_dir), "--no-progress"])

"""`typedrl train --resume auto`: one command line for the first start and every restart."""

import csv
import json
from pathlib import Path

import pytest

from tests.cli.factories import SMALL_RUN
from typedrl.cli import main


def _steps(run_dir: Path) -> list[int]:
    """The env steps of the training rows of ``metrics.csv`` (evaluation rows left out)."""
    with (run_dir / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    return [int(float(row["step"])) for row in rows if row["time/iteration_seconds"]]


def test_resume_auto_starts_a_run_then_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first call starts the run, the next ones resume it to a larger budget, then stop."""
    run_dir = tmp_path / "run"
    argv = ["train", *SMALL_RUN, "--resume", "auto", "--run-dir", str(run_dir)]
    assert main([*argv, "--total-timesteps", "32"]) == 0
    assert _steps(run_dir) == [16, 32]
    assert main([*argv, "--total-timesteps", "64"]) == 0
    assert _steps(run_dir) == [16, 32, 48, 64]
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 64
    capsys.readouterr()
    assert main([*argv, "--total-timesteps", "64"]) == 0
    assert "already reached its budget of 64 env steps" in capsys.readouterr().out
    assert _steps(run_dir) == [16, 32, 48, 64]


def test_resume_auto_restarts_a_start_that_saved_no_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder whose run has no checkpoint yet (killed early) is started afresh."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("algo: ppo\n")
    (run_dir / "metrics.csv").write_text("global_step\n16\n")
    (run_dir / "notes.txt").write_text("mine")
    argv = ["train", *SMALL_RUN, "--resume", "auto", "--run-dir", str(run_dir)]
    assert main([*argv, "--total-timesteps", "32"]) == 0
    assert "overwrite       removed config.yaml, metrics.csv" in capsys.readouterr().out
    assert _steps(run_dir) == [16, 32]
    assert (run_dir / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            [],
            "--resume auto continues the run in --run-dir, and none was given; add --run-dir "
            "DIR (the same on every start and restart)",
        ),
        (
            ["--run-dir", "run", "--overwrite"],
            "--resume auto continues the run in --run-dir when it has a checkpoint, and "
            "--overwrite would delete it; pass one of them",
        ),
    ],
)
def test_resume_auto_misuse_is_one_line(
    extra: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resume auto needs --run-dir and refuses --overwrite."""
    assert main(["train", *SMALL_RUN, "--resume", "auto", *extra]) == 1
    assert capsys.readouterr().err.splitlines()[0] == f"typedrl: ConfigError: {line}"

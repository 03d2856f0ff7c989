"""`typedrl train` says when a budget in env steps is rounded up to whole iterations."""

from pathlib import Path

import pytest

from typedrl.cli import main

from .factories import SMALL_RUN


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["CartPole-v1", *SMALL_RUN, "--total-timesteps", "20"],
            "budget          total_timesteps 20 rounded up to 32 "
            "(2 iterations of 2 envs x 8 steps)",
        ),
        (["CartPole-v1", *SMALL_RUN, "--total-timesteps", "32"], None),
        (
            [
                "typedrl/PointMass-v0",
                "--algo",
                "apg",
                "--num-envs",
                "4",
                "--set",
                "segment_length=16",
                "--total-timesteps",
                "50",
                "--no-progress",
            ],
            "budget          total_timesteps 50 rounded up to 64 "
            "(1 iteration of 4 envs x 16 steps)",
        ),
    ],
)
def test_a_budget_rounded_up_to_whole_iterations_is_said(
    argv: list[str], line: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console says when total_timesteps is not a whole number of iterations (PPO, APG)."""
    assert main(["train", *argv, "--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out.splitlines()
    budget = [text for text in out if text.startswith("budget ")]
    assert budget == ([] if line is None else [line])
    steps = int(next(text for text in out if text.startswith("env steps")).split()[-1])
    assert steps == (32 if line is None else int(line.split("rounded up to ")[1].split()[0]))

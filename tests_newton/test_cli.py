"""`typedrl train --algo apg|shac` on the Newton envs, from the command line."""

import json
from pathlib import Path

import pytest

from typedrl.cli import main


@pytest.mark.parametrize("algo", ["apg", "shac"])
def test_train_runs_on_a_newton_env(tmp_path: Path, algo: str) -> None:
    """Two iterations of 2 envs x 4 steps on the Hopper, evaluated, with a summary."""
    run_dir = tmp_path / "run"
    argv = ["train", "typedrl/NewtonHopper-v0", "--algo", algo, "--run-dir", str(run_dir)]
    budget = ["--num-envs", "2", "--total-timesteps", "16", "--set", "segment_length=4"]
    assert main([*argv, *budget, "--eval-episodes", "1", "--no-progress"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 16
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()

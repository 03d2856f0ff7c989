"""`typedrl train --devices 2`: its resume on one device (a line, the budget)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from typedrl.cli import main

_RUN = ["typedrl/CartPole-v0", "--num-envs", "4", "--set", "num_steps=16", "--set", "batch_size=32"]
"""4 rows per rank, 16 steps: 128 env steps per iteration on two ranks, 64 on one."""


@pytest.mark.distributed
def test_a_two_device_run_resumes_on_one_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The resume says the world size changed and trains on to the new budget."""
    run_dir = tmp_path / "run"
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM_", "TORCHELASTIC_", "MASTER_"))
        and key not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    }
    argv = ["train", *_RUN, "--devices", "2", "--accelerator", "cpu", "--no-progress"]
    budget = ["--total-timesteps", "256", "--run-dir", str(run_dir)]
    first = subprocess.run(
        [sys.executable, "-m", "typedrl", *argv, *budget],
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    # No rank outlives the command: none of the processes naming the run folder is left.
    left = subprocess.run(
        ["pgrep", "-f", str(run_dir)], capture_output=True, text=True, check=False
    )
    assert left.stdout == "", left.stdout
    capsys.readouterr()
    resume = ["train", "--resume", str(run_dir), "--devices", "1", "--total-timesteps", "384"]
    assert main(resume) == 0
    last = run_dir / "checkpoints" / "last.ckpt"
    assert (
        f"world size changed 2 -> 1 on resume from {last}: weights, optimizers, schedules, "
        "normaliser statistics, counters and best score restored; envs reset and per-rank "
        "random streams re-derived (a valid resume, not bit-exact)\n"
    ) in capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    # Two iterations of 128 env steps on two ranks, then two of 64 on one.
    assert (summary["global_step"], summary["num_updates"]) == (384, 4)

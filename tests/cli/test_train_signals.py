"""`typedrl train` stopped by signals and kills, as a scheduler or a user stops it."""

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.factories import SMALL_RUN
from tests.multiprocess import wait_until
from typedrl.checkpoint import load_checkpoint
from typedrl.cli import main

_ROOT = Path(__file__).resolve().parents[2]


def _start(run_dir: Path, *extra: str) -> "subprocess.Popen[str]":
    """`typedrl train CartPole-v1` with a budget it will not reach, in its own process group."""
    argv = [sys.executable, "-m", "typedrl", "train", "CartPole-v1", "--run-dir", str(run_dir)]
    return subprocess.Popen(
        [*argv, "--total-timesteps", "100000000", *SMALL_RUN, *extra],
        cwd=_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _resume(run_dir: Path, steps: int) -> None:
    """Resume the run folder in this process (sync envs, a resumable change) to ``steps``."""
    argv = ["train", "--resume", str(run_dir), "--total-timesteps", str(steps)]
    assert main([*argv, "--vectorization", "sync", "--no-progress"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["global_step"], summary["stopped_by_signal"]) == (steps, False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_async_run_stopped_by_a_signal_to_its_process_group_saves_and_resumes(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """Ctrl-C or a scheduler's SIGTERM to every process: exit 0, last.ckpt, summary.json."""
    run_dir = tmp_path / "run"
    process = _start(run_dir, "--vectorization", "async")
    wait_until(process, lambda: len(_rows(run_dir / "metrics.csv")) >= 3)
    os.killpg(process.pid, signum)
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    # Said at the signal, before the iteration ends: what happens, and what a second one does.
    assert f"typedrl: {signum.name} received: stopping after the current iteration" in err
    assert f"stopped by a signal; resume with: typedrl train --resume {run_dir}" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by_signal"] is True
    assert summary["checkpoint_last"] == "checkpoints/last.ckpt"
    checkpoint = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    assert checkpoint.counters["env_steps"] == summary["global_step"] > 0
    _resume(run_dir, int(summary["global_step"]) + 32)


def test_a_killed_run_keeps_its_metrics_and_a_loadable_last_checkpoint(tmp_path: Path) -> None:
    """SIGKILL: rows and last.ckpt are on disk; a resume drops the rows past the checkpoint."""
    run_dir = tmp_path / "run"
    process = _start(run_dir)
    last = run_dir / "checkpoints" / "last.ckpt"
    wait_until(process, last.is_file)
    checkpointed = int(load_checkpoint(last).counters["env_steps"])
    # Iterations past the checkpoint, which the kill leaves logged (however loaded the machine).
    wait_until(
        process,
        lambda: any(int(row["step"]) > checkpointed for row in _rows(run_dir / "metrics.csv")),
    )
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    rows = _rows(run_dir / "metrics.csv")
    checkpoint = load_checkpoint(last)
    saved_steps = int(checkpoint.counters["env_steps"])
    assert checkpoint.counters["iteration"] >= 100
    assert len(rows) >= checkpoint.counters["iteration"]
    assert [int(row["step"]) for row in rows[:3]] == [16, 32, 48]
    assert not (run_dir / "summary.json").exists()
    logged_past = [int(row["step"]) for row in rows if int(row["step"]) > saved_steps]
    assert logged_past  # the run went on after its last checkpoint before the kill
    _resume(run_dir, saved_steps + 32)
    steps = [int(row["step"]) for row in _rows(run_dir / "metrics.csv")]
    kept = [int(row["step"]) for row in rows if int(row["step"]) <= saved_steps]
    assert steps[: len(kept)] == kept  # nothing up to the checkpoint is lost
    # The rows logged past the checkpoint went: one series, each iteration once.
    assert steps[len(kept) :] == [saved_steps + 16, saved_steps + 32, saved_steps + 32]

"""`typedrl train --devices 2`: its resume on one device (a line, the budget), its end."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from typedrl.cli import _train, main

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


def _launched(*codes: str) -> SimpleNamespace:
    """A stand-in Fabric whose launcher started one child per Python snippet."""
    children = [subprocess.Popen([sys.executable, "-c", code]) for code in codes]
    return SimpleNamespace(strategy=SimpleNamespace(launcher=SimpleNamespace(procs=children)))


def test_rank_zero_waits_for_the_ranks_it_launched(capsys: pytest.CaptureFixture[str]) -> None:
    """A launched rank failing or hanging after the run makes the status 1, named on stderr."""
    wait = _train._wait_for_launched_ranks
    assert wait(SimpleNamespace(strategy=SimpleNamespace(launcher=None))) == 0  # type: ignore[arg-type]
    assert wait(_launched("pass", "pass")) == 0  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""
    failed = _launched("pass", "raise SystemExit(3)")
    assert wait(failed) == 1  # type: ignore[arg-type]
    pid = failed.strategy.launcher.procs[1].pid
    assert f"rank 2 (process {pid}) exited with status 3 after the run ended" in (
        capsys.readouterr().err
    )
    hung = _launched("import time; time.sleep(60)")
    started = time.monotonic()
    assert wait(hung, timeout_s=0.5) == 1  # type: ignore[arg-type]
    assert time.monotonic() - started < 30.0
    child = hung.strategy.launcher.procs[0]
    assert child.returncode is not None  # stopped, not left behind
    assert f"rank 1 (process {child.pid}) had not exited 0.5 s after the run ended; stopped it" in (
        capsys.readouterr().err
    )

"""Tests for faults in a two-rank run: a killed or hung rank ends the other, an error ends both."""

import multiprocessing
import os
import signal
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import final

import pytest
from lightning_fabric import Fabric

from tests.apg.test_trainer import Faulty, point_mass, trainer_for
from tests.multiprocess import free_port
from tests.ppo._envs import RandomWalkEnv
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl._results import StepResult
from typedrl.checkpoint import load_checkpoint
from typedrl.distributed import COLLECTIVE_TIMEOUT_ENV, collective_timeout
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.protocols import VecEnv
from typedrl.testing import VecEnvWrapper
from typedrl.training import RunOptions
from typedrl.types import Action

TIMEOUT_S = 5
"""The collective timeout of these runs (``TYPEDRL_COLLECTIVE_TIMEOUT``)."""
JOIN_S = 90.0
"""How long the test waits for each rank (start-up included)."""
STEPS = 4
"""PPO steps per row and iteration."""


@final
class Sabotaged(VecEnvWrapper):
    """Wraps a VecEnv; its step ``at`` (from 0) kills this process, stops it, or raises."""

    def __init__(self, env: VecEnv, *, at: int, fault: str, mark: Path) -> None:
        super().__init__(env)
        self._at, self._fault, self._mark = at, fault, mark
        self.steps_taken = 0

    def step(self, action: Action) -> StepResult:
        """The env's step, or the fault at step ``at`` (the time it came written to ``mark``)."""
        if self.steps_taken == self._at:
            self._mark.write_text(repr(time.time()))
            if self._fault == "raise":
                raise RuntimeError("the simulator diverged")
            os.kill(os.getpid(), signal.SIGKILL if self._fault == "kill" else signal.SIGSTOP)
        self.steps_taken += 1
        return self.env.step(action)


def _fabric(rank: int, port: int) -> Fabric:
    """Join a two-rank gloo group with the collective timeout the variable sets."""
    os.environ[COLLECTIVE_TIMEOUT_ENV] = str(TIMEOUT_S)
    assert collective_timeout() == timedelta(seconds=TIMEOUT_S)
    return launch_two_rank_fabric(rank, port, timeout=collective_timeout())


def _worker(rank: int, port: int, algo: str, fault: str, out_dir: str) -> None:
    """Train until rank 1's fault; write this rank's error and when it came; exit 1 on one."""
    out = Path(out_dir)
    code = 0
    try:
        fabric = _fabric(rank, port)
        if algo == "ppo":
            walk = RandomWalkEnv(num_envs=2, seed=rank)
            env = (
                Sabotaged(walk, at=2 * STEPS + 1, fault=fault, mark=out / "fault")
                if rank == 1
                else walk
            )
            config = PPOConfig(
                total_timesteps=10**6, num_steps=STEPS, batch_size=4, num_mini_epochs=1, seed=3
            )
            options = RunOptions(
                run_dir=out / "run", loggers=[], progress=False, last_checkpoint_every_iterations=1
            )
            PPOAgent(env=env, config=config, fabric=fabric, options=options).fit()
        else:
            faulty = Faulty(point_mass(num_envs=2, seed=rank), raise_at=[9] if rank == 1 else [])
            trainer_for(faulty, fabric=fabric, segment_length=4, total_updates=5).train()
        (out / f"rank{rank}.txt").write_text("finished")
    except Exception as error:
        code = 1
        (out / f"rank{rank}.txt").write_text(f"{time.time()!r}\n{type(error).__name__}: {error}")
        traceback.print_exc()
    os._exit(code)


def _run(algo: str, fault: str, out_dir: Path) -> list[int | None]:
    """Both ranks' exit codes (``None``: still running after :data:`JOIN_S`, then killed)."""
    context = multiprocessing.get_context("spawn")
    port = free_port()
    processes = [
        context.Process(target=_worker, args=(rank, port, algo, fault, str(out_dir)), daemon=True)
        for rank in (0, 1)
    ]
    for process in processes:
        process.start()
    try:
        processes[0].join(JOIN_S)
        if fault == "stop":
            processes[1].kill()
        processes[1].join(JOIN_S)
        return [process.exitcode for process in processes]
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(5.0)
            process.close()


def _error(out_dir: Path, rank: int) -> tuple[float, str]:
    when, message = (out_dir / f"rank{rank}.txt").read_text().split("\n", 1)
    return float(when), message


@pytest.mark.distributed
@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_a_lost_rank_ends_the_other_within_the_timeout(fault: str, tmp_path: Path) -> None:
    """Rank 1 killed (or stopped, as a hung node): rank 0 exits 1 naming it; last.ckpt loads."""
    codes = _run("ppo", fault, tmp_path)
    assert codes[0] == 1
    assert codes[1] == -signal.SIGKILL
    faulted = float((tmp_path / "fault").read_text())
    ended, message = _error(tmp_path, 0)
    assert message.startswith("DistributedError: rank 0 lost rank 1: a collective failed ("), (
        message
    )
    assert f"collective timeout of {TIMEOUT_S} s (TYPEDRL_COLLECTIVE_TIMEOUT)" in message
    assert "\n" not in message
    waited = ended - faulted
    # A dead rank's closed connections fail the next collective at once; a hung one at the timeout.
    assert (waited < TIMEOUT_S) if fault == "kill" else (TIMEOUT_S <= waited < TIMEOUT_S + 10)
    checkpoint = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert checkpoint.counters["iteration"] == 2


@pytest.mark.distributed
@pytest.mark.parametrize("algo", ["ppo", "apg"])
def test_an_env_error_on_one_rank_ends_both_with_its_message(algo: str, tmp_path: Path) -> None:
    """Rank 1's env raises: rank 1 raises its EnvError, rank 0 a DistributedError repeating it."""
    assert _run(algo, "raise", tmp_path) == [1, 1]
    _, own = _error(tmp_path, 1)
    _, other = _error(tmp_path, 0)
    assert own.startswith("EnvError: the env ("), own
    assert "diverged" in own
    what = "the rollout" if algo == "ppo" else "collecting the rollouts"
    assert other == f"DistributedError: {what} failed on rank 1, every rank stops: {own}"

"""typedrl leaves the process as it found it: training and the ``typedrl`` command.

A library changes nothing process-wide: no environment variable, signal
handler or mask, torch flag or thread count, warning filter, logging level or
``sys.path`` entry outlives a call. (The trainers seed torch's global
generator, as their ``seed`` promises; generators are not compared here.)
"""

import logging
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.cli.factories import SMALL_RUN
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig, SHACConfig
from typedrl.cli import main
from typedrl.envs import make
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _process_state() -> dict[str, Any]:
    """Everything process-wide a trainer or a command could leave changed."""
    return {
        "environ": dict(os.environ),
        "cwd": Path.cwd(),
        "sys.path": list(sys.path),
        "recursion limit": sys.getrecursionlimit(),
        "handlers": [signal.getsignal(signum) for signum in _SIGNALS],
        "signal mask": signal.pthread_sigmask(signal.SIG_BLOCK, []),
        "torch threads": torch.get_num_threads(),
        "default dtype": torch.get_default_dtype(),
        "grad enabled": torch.is_grad_enabled(),
        "anomaly detection": torch.is_anomaly_enabled(),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "float32 matmul precision": torch.get_float32_matmul_precision(),
        "cudnn": (
            torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic,
            torch.backends.cudnn.allow_tf32,
        ),
        "cuda matmul tf32": torch.backends.cuda.matmul.allow_tf32,
        "warning filters": list(warnings.filters),
        "root logging level": logging.getLogger().level,
    }


def _assert_unchanged(before: dict[str, Any]) -> None:
    after = _process_state()
    changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    assert changed == {}


def test_ppo_fit_changes_nothing_process_wide() -> None:
    """Building, fitting and closing a PPO run on a Gymnasium env leaves the process as it was."""
    before = _process_state()
    env = make("CartPole-v1", num_envs=2, seed=0)
    agent = PPOAgent(
        env=env,
        config=PPOConfig(total_timesteps=64, num_steps=16, batch_size=16, seed=0),
        options=RunOptions(progress=False, loggers=[]),
    )
    agent.fit()
    env.close()
    _assert_unchanged(before)


def test_shac_fit_changes_nothing_process_wide() -> None:
    """SHAC's fit (the differentiable trainer, a target critic) leaves the process as it was."""
    before = _process_state()
    env = make("typedrl/Pendulum-v0", num_envs=4, seed=0)
    trainer = DifferentiableTrainer(
        env=env,
        config=DifferentiableTrainerConfig(
            total_updates=2, segment_length=8, algorithm=SHACConfig(), seed=0
        ),
        options=RunOptions(progress=False, loggers=[]),
    )
    trainer.fit()
    env.close()
    _assert_unchanged(before)


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_typedrl_train_changes_nothing_process_wide(tmp_path: Path, vectorization: str) -> None:
    """The command run in-process (a notebook, a test) leaves the process as it was."""
    before = _process_state()
    argv = ["train", "CartPole-v1", "--total-timesteps", "32", "--run-dir", str(tmp_path / "run")]
    assert main([*argv, "--vectorization", vectorization, *SMALL_RUN]) == 0
    _assert_unchanged(before)

"""Tests for typedrl.cli._memory: a rollout too large for memory is refused before envs exist."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.cli import _memory, main


def test_transition_bytes_count_every_leaf() -> None:
    """Observation and action leaves by their dtypes (integers as int64) plus the scalars."""
    obs = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float64),
            "cell": gym.spaces.MultiDiscrete([4, 4]),
        }
    )
    action = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert _memory.transition_nbytes(obs, action) == 3 * 8 + 2 * 8 + 2 * 4 + 6 * 4 + 3


def test_the_cpus_available_memory_is_read() -> None:
    """The CPU reports a positive number of bytes; a device it cannot read reports None."""
    free = _memory.available_memory(torch.device("cpu"))
    assert free is not None
    assert free > 0
    assert _memory.available_memory(torch.device("meta")) is None


def test_train_refuses_a_rollout_larger_than_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A huge --num-envs prints one line with the figure in GiB, and no env is built for it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_memory, "available_memory", lambda _: 2 * 1024**3)
    argv = ["train", "CartPole-v1", "--num-envs", "100000000", "--set", "num_steps=32"]
    assert main(argv) == 1
    first, *rest = capsys.readouterr().err.splitlines()
    assert rest == ["(run with --debug for the traceback)"]
    assert first == (
        "typedrl: ConfigError: --num-envs 100,000,000: the rollout needs at least 152.0 GiB "
        "(51 bytes per transition x 100,000,000 envs x 32 steps), but this machine has 2.0 GiB "
        "available; lower --num-envs or --set num_steps=N"
    )


def test_ahac_sizes_its_rollout_by_its_longest_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """AHAC's windows grow to horizon_max (64), not segment_length: the line names it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_memory, "available_memory", lambda _: 2 * 1024**3)
    argv = ["train", "typedrl.testing:ContactQuadraticEnv", "--algo", "ahac"]
    assert main([*argv, "--num-envs", "100000000", "--no-progress"]) == 1
    first, *_ = capsys.readouterr().err.splitlines()
    assert first == (
        "typedrl: ConfigError: --num-envs 100,000,000: the rollout needs at least 208.6 GiB "
        "(35 bytes per transition x 100,000,000 envs x 64 steps), but this machine has 2.0 GiB "
        "available; lower --num-envs or --set algorithm.horizon_max=N"
    )

"""Tests for the typedrl command's entry point."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from typedrl.cli import main


def test_info_prints_versions(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl info` prints one line per package and exits 0."""
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out
    assert "gymnasium" in out
    assert "cuda" in out


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl --version` prints the version and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("typedrl ")


def test_missing_command_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Running without a subcommand exits 2 with a usage message."""
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "usage: typedrl" in capsys.readouterr().err


def test_check_env_passes_on_a_conforming_env(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl check-env CartPole-v1` reports no violations and exits 0."""
    status = main(["check-env", "CartPole-v1", "--num-envs", "2", "--examples", "2"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "no violations" in out


class _NaNRewardEnv(gym.Env[np.ndarray, np.int64]):
    """A single env whose rewards are NaN: the checker must flag it."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros(2, np.float32), float("nan"), False, False, {}


def _make_nan_reward_env(**_: Any) -> gym.Env[Any, Any]:
    return _NaNRewardEnv()


# Gymnasium's passive env checker warns about the NaN reward before typedrl sees it.
@pytest.mark.filterwarnings("ignore:.*The reward is a NaN value:UserWarning")
def test_check_env_fails_on_a_broken_env(capsys: pytest.CaptureFixture[str]) -> None:
    """A registered env with NaN rewards makes `typedrl check-env` exit 1 naming the rule."""
    env_id = "typedrl-tests/NaNReward-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=_make_nan_reward_env)
    status = main(["check-env", env_id, "--num-envs", "2", "--examples", "1"])
    out = capsys.readouterr().out
    assert status == 1
    assert "step.finite" in out

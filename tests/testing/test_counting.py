"""Tests for typedrl.testing.CountingVecEnv."""

import pytest
import torch

from typedrl.errors import ConfigError, SpecError
from typedrl.testing import CountingVecEnv


def _zeros(env: CountingVecEnv) -> torch.Tensor:
    return torch.zeros(env.num_envs, 1)


def test_reset_layout() -> None:
    """Reset gives [t, episode, row] rows with t = episode = 0."""
    env = CountingVecEnv(num_envs=3)
    obs, info = env.reset(seed=1)
    assert obs.batch_size == torch.Size([3])
    assert obs["obs"].tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 2.0]]
    assert info == {}


def test_same_step_autoreset_with_terminal_observation() -> None:
    """A row that ends is already reset in obs while final_obs holds its last state."""
    env = CountingVecEnv(num_envs=2, terminate_after=[2, 4], truncate_after=[5, 3])
    env.reset()
    env.step(_zeros(env))
    result = env.step(_zeros(env))
    assert result.terminated.tolist() == [True, False]
    assert result.truncated.tolist() == [False, False]
    assert result.reward.tolist() == [2.0, 2.0]
    assert result.obs["obs"][0].tolist() == [0.0, 1.0, 0.0]
    assert result.final_obs is not None
    assert result.final_obs["obs"][0].tolist() == [2.0, 0.0, 0.0]
    assert torch.equal(result.final_obs["obs"][1], result.obs["obs"][1])
    result = env.step(_zeros(env))
    assert result.truncated.tolist() == [False, True]
    assert result.terminated.tolist() == [False, False]
    assert result.final_obs is not None
    assert result.final_obs["obs"][1].tolist() == [3.0, 0.0, 1.0]


def test_both_limits_set_both_flags() -> None:
    """When termination and truncation coincide, both flags are set."""
    env = CountingVecEnv(num_envs=1, terminate_after=1, truncate_after=1)
    env.reset()
    result = env.step(_zeros(env))
    assert result.terminated.tolist() == [True]
    assert result.truncated.tolist() == [True]


def test_without_final_obs() -> None:
    """An env configured without terminal observations says so and returns None."""
    env = CountingVecEnv(num_envs=1, truncate_after=1, provides_final_obs=False)
    assert not env.provides_final_obs
    env.reset()
    assert env.step(_zeros(env)).final_obs is None


def test_discrete_actions_and_validation() -> None:
    """Discrete envs take int64 [num_envs] actions; wrong shapes are rejected."""
    env = CountingVecEnv(num_envs=2, action_space="discrete")
    env.reset()
    action = torch.tensor([0, 1])
    env.step(action)
    assert env.last_action is action
    with pytest.raises(SpecError, match=r"CountingVecEnv\.step"):
        env.step(torch.zeros(2, 1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_envs": 0},
        {"num_envs": 2, "terminate_after": 0},
        {"num_envs": 2, "terminate_after": [1]},
        {"num_envs": 2, "truncate_after": [1, 0]},
    ],
)
def test_rejects_bad_config(kwargs: dict[str, object]) -> None:
    """Invalid settings raise ConfigError."""
    with pytest.raises(ConfigError, match="CountingVecEnv"):
        CountingVecEnv(**kwargs)  # type: ignore[arg-type]


def test_close() -> None:
    """close() marks the env closed and may be called twice."""
    env = CountingVecEnv(num_envs=1)
    env.close()
    env.close()
    assert env.closed

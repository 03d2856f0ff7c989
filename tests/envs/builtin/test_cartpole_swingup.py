"""CartPoleSwingUp: hanging start, smooth reward, track termination."""

import math

import pytest
import torch

from typedrl.envs.builtin import CartPoleSwingUp
from typedrl.errors import CheckpointError
from typedrl.evaluation import EpisodeEvaluator
from typedrl.testing import ConstantPolicy


def test_starts_hanging_down() -> None:
    """theta = pi + U(-0.05, 0.05); the other components are within 0.05 of zero."""
    env = CartPoleSwingUp(num_envs=256, dtype="float64")
    obs, _ = env.reset(seed=0)
    x, x_dot, cos, sin, theta_dot = obs["obs"].unbind(-1)
    assert float(cos.max()) < -math.cos(0.05) + 1e-12
    assert float(sin.abs().max()) <= math.sin(0.05) + 1e-12
    for column in (x, x_dot, theta_dot):
        assert float(column.abs().max()) <= 0.05


def test_reward_is_the_documented_function() -> None:
    """r = 0.5 (1 + cos theta') (1 - 0.5 (x' / 2.4)^2) - 0.01 a^2."""
    env = CartPoleSwingUp(num_envs=2, dtype="float64")
    env.reset(seed=0)
    action = torch.tensor([[0.3], [-0.7]], dtype=torch.float64)
    result = env.step(action)
    assert result.final_obs is not None
    x, _, cos, _, _ = result.final_obs["obs"].unbind(-1)
    expected = 0.5 * (1 + cos) * (1 - 0.5 * (x / 2.4) ** 2) - 0.01 * action[:, 0] ** 2
    torch.testing.assert_close(result.reward, expected)


def test_no_angle_termination_but_track_termination() -> None:
    """The pole may turn freely; leaving the track (|x| > 2.4) terminates."""
    env = CartPoleSwingUp(num_envs=2, dtype="float64")
    env.reset(seed=0)
    env._state = torch.tensor(
        [[0.0, 0.0, 1.5, 3.0], [2.39, 1.0, math.pi, 0.0]], dtype=torch.float64
    )
    result = env.step(torch.zeros(2, 1, dtype=torch.float64))
    assert result.terminated.tolist() == [False, True]
    assert env.max_episode_steps == 500


def _run_upright_then(env: CartPoleSwingUp, theta_after: dict[int, float]) -> torch.Tensor:
    """Step zero actions from upright rest; at step k set row theta to theta_after[k]."""
    env.reset(seed=0)
    env._state = torch.zeros(env.num_envs, 4, dtype=torch.float64)
    success = torch.zeros(env.num_envs, dtype=torch.bool)
    for step in range(env.max_episode_steps):
        if step in theta_after:
            env._state[0, 2] = theta_after[step]
        result = env.step(torch.zeros(env.num_envs, 1, dtype=torch.float64))
        flags = result.info["is_success"]
        assert flags.shape == (env.num_envs,)
        assert flags.dtype == torch.bool
        if step < env.max_episode_steps - 1:
            assert not bool(flags.any()), "success is reported only when an episode ends"
        success = flags
    return success


def test_success_needs_the_pole_upright_for_the_last_half() -> None:
    """Row 0's pole is moved at one step; row 1 stays balanced at rest (exact equilibrium)."""
    env = CartPoleSwingUp(num_envs=2, max_episode_steps=10, dtype="float64")
    # Upright from the start: both succeed.
    assert _run_upright_then(env, {}).tolist() == [True, True]
    # Hanging for the first half, upright for the last five steps: still a success.
    assert _run_upright_then(env, {0: math.pi, 5: 0.0}).tolist() == [True, True]
    # Upright until step 5, then 13 degrees off: row 0 fails.
    assert _run_upright_then(env, {5: math.radians(13.0)}).tolist() == [False, True]
    # 10 degrees off (it falls to about 11 by the end, within 12): row 0 still succeeds.
    assert _run_upright_then(env, {5: math.radians(10.0)}).tolist() == [True, True]


def test_terminated_rows_never_succeed() -> None:
    env = CartPoleSwingUp(num_envs=1, max_episode_steps=10, dtype="float64")
    env.reset(seed=0)
    env._state = torch.tensor([[2.399, 5.0, 0.0, 0.0]], dtype=torch.float64)
    result = env.step(torch.zeros(1, 1, dtype=torch.float64))
    assert result.terminated.tolist() == [True]
    assert result.info["is_success"].tolist() == [False]


def test_state_dict_keeps_the_upright_count() -> None:
    env = CartPoleSwingUp(num_envs=2, max_episode_steps=10, dtype="float64")
    env.reset(seed=0)
    env._state = torch.zeros(2, 4, dtype=torch.float64)
    for _ in range(6):
        env.step(torch.zeros(2, 1, dtype=torch.float64))
    saved = env.state_dict()
    assert saved["upright_run"].tolist() == [6, 6]
    other = CartPoleSwingUp(num_envs=2, max_episode_steps=10, dtype="float64")
    other.load_state_dict(saved)
    zeros = torch.zeros(2, 1, dtype=torch.float64)
    steps = [(env.step(zeros), other.step(zeros)) for _ in range(4)]
    expected, restored = steps[-1]
    assert restored.info["is_success"].tolist() == expected.info["is_success"].tolist()
    assert restored.info["is_success"].tolist() == [True, True]


def test_state_dict_without_the_upright_count_is_refused() -> None:
    env = CartPoleSwingUp(num_envs=2)
    env.reset(seed=0)
    saved = env.state_dict()
    del saved["upright_run"]
    with pytest.raises(CheckpointError, match="upright_run"):
        env.load_state_dict(saved)
    saved = env.state_dict()
    saved["upright_run"] = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(CheckpointError, match=r"shape \[2\]"):
        env.load_state_dict(saved)


def test_the_evaluator_reports_the_upright_share() -> None:
    """An evaluation of a zero policy: the pole never comes up, so the success rate is 0."""
    env = CartPoleSwingUp(num_envs=4, max_episode_steps=20)
    result = EpisodeEvaluator(env, num_episodes=4).evaluate(ConstantPolicy(torch.zeros(1)))
    assert result.metrics["success_rate"] == 0.0

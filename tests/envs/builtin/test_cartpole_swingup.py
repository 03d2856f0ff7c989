"""CartPoleSwingUp: hanging start, smooth reward, track termination."""

import math

import torch

from typedrl.envs.builtin import CartPoleSwingUp


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

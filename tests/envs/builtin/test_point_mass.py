"""PointMass: dynamics, goal handling and reward."""

import torch

from typedrl.envs.builtin import PointMass


def test_semi_implicit_euler_and_fixed_goal() -> None:
    """v' = v + dt (2 a - 0.5 v), p' = p + dt v'; the goal stays fixed within an episode."""
    env = PointMass(num_envs=3, dtype="float64")
    obs, _ = env.reset(seed=0)
    position, velocity, offset = obs["obs"][:, 0:2], obs["obs"][:, 2:4], obs["obs"][:, 4:6]
    goal = position + offset
    assert float(velocity.abs().max()) == 0.0
    action = torch.tensor([[1.0, -0.5], [0.0, 0.2], [-1.0, 1.0]], dtype=torch.float64)
    result = env.step(action)
    next_velocity = velocity + 0.05 * (2.0 * action - 0.5 * velocity)
    next_position = position + 0.05 * next_velocity
    torch.testing.assert_close(result.obs["obs"][:, 0:2], next_position)
    torch.testing.assert_close(result.obs["obs"][:, 2:4], next_velocity)
    torch.testing.assert_close(result.obs["obs"][:, 4:6] + next_position, goal)
    distance = torch.sqrt(((goal - next_position) ** 2).sum(-1) + 0.05**2) - 0.05
    expected = -distance - 0.01 * (action**2).sum(-1)
    torch.testing.assert_close(result.reward, expected)


def test_goals_are_redrawn_per_episode() -> None:
    """Each episode draws a new goal inside [-1, 1]^2."""
    env = PointMass(num_envs=512, max_episode_steps=1)
    obs, _ = env.reset(seed=0)
    goal = obs["obs"][:, 0:2] + obs["obs"][:, 4:6]
    result = env.step(torch.zeros(512, 2))
    new_goal = result.obs["obs"][:, 0:2] + result.obs["obs"][:, 4:6]
    assert float(goal.abs().max()) <= 1.0 + 1e-6
    assert not torch.allclose(goal, new_goal)

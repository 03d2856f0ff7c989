"""Reacher: reachable targets, fingertip observation and reward."""

import math

import torch

from typedrl.envs.builtin import Reacher


def _fingertip(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # cos/sin of (q1, q2): fingertip = 0.5 (cos q1 + cos(q1 + q2), sin q1 + sin(q1 + q2))
    cos_outer = cos[:, 0] * cos[:, 1] - sin[:, 0] * sin[:, 1]
    sin_outer = sin[:, 0] * cos[:, 1] + cos[:, 0] * sin[:, 1]
    return 0.5 * torch.stack((cos[:, 0] + cos_outer, sin[:, 0] + sin_outer), dim=-1)


def test_targets_are_reachable_and_observation_consistent() -> None:
    """Targets lie in the annulus 0.2 <= r <= 0.9; f - target matches the joint angles."""
    env = Reacher(num_envs=1024, dtype="float64")
    obs, _ = env.reset(seed=0)
    features = obs["obs"]
    radius = features[:, 4:6].norm(dim=-1)
    assert float(radius.min()) >= 0.2 - 1e-9
    assert float(radius.max()) <= 0.9 + 1e-9
    tip = _fingertip(features[:, 0:2], features[:, 2:4])
    torch.testing.assert_close(tip - features[:, 4:6], features[:, 8:10])
    assert float(features[:, 6:8].abs().max()) <= 0.1


def test_reward_is_the_documented_function() -> None:
    """r = -(sqrt(|f' - target|^2 + 0.05^2) - 0.05) - 0.01 |a|^2."""
    env = Reacher(num_envs=4, dtype="float64")
    env.reset(seed=1)
    action = torch.tensor([[1.0, -1.0], [0.5, 0.0], [0.0, 0.0], [-0.2, 0.7]], dtype=torch.float64)
    result = env.step(action)
    assert result.final_obs is not None
    offset = result.final_obs["obs"][:, 8:10]
    expected = -(torch.sqrt((offset**2).sum(-1) + 0.05**2) - 0.05) - 0.01 * (action**2).sum(-1)
    torch.testing.assert_close(result.reward, expected)


def test_torque_accelerates_the_arm_and_energy_decays_without_torque() -> None:
    """A torque on joint 1 turns it; without torque, damping slows the arm down."""
    env = Reacher(num_envs=1, dtype="float64", max_episode_steps=1000)
    env.reset(seed=0)
    env._state = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.5, 0.0]], dtype=torch.float64)
    pushed = env.step(torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    assert float(pushed.obs["obs"][0, 6]) > 0.0
    env._state = torch.tensor([[0.0, 1.0, 2.0, -1.0, 0.5, 0.0]], dtype=torch.float64)
    speed = []
    for _ in range(200):
        result = env.step(torch.zeros(1, 2, dtype=torch.float64))
        speed.append(float(result.obs["obs"][0, 6:8].norm()))
    assert speed[-1] < speed[0]
    assert all(math.isfinite(value) for value in speed)

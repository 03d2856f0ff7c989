"""Pendulum against Gymnasium's Pendulum-v1."""

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

from typedrl.envs.builtin import Pendulum


def test_matches_gymnasium_step_for_step() -> None:
    """From identical states and actions, one step equals Gymnasium's (float64)."""
    env = Pendulum(num_envs=16, dtype="float64", max_episode_steps=1000)
    obs, _ = env.reset(seed=0)
    reference = cast(Any, gym.make("Pendulum-v1").unwrapped)
    reference.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(40):
        # Torques beyond the bounds exercise Gymnasium's clipping as well.
        action = (torch.rand(16, 1, generator=generator, dtype=torch.float64) * 6 - 3).clamp(-2, 2)
        result = env.step(action)
        assert result.final_obs is not None
        for row in range(16):
            cos, sin, speed = obs["obs"][row].tolist()
            reference.state = np.array([math.atan2(sin, cos), speed])
            _, reward, terminated, _, _ = reference.step(action[row].numpy())
            theta, theta_dot = reference.state
            expected = [math.cos(theta), math.sin(theta), theta_dot]
            assert np.allclose(result.final_obs["obs"][row].numpy(), expected, atol=1e-10)
            assert math.isclose(float(result.reward[row]), float(reward), abs_tol=1e-9)
            assert not terminated
        obs = result.obs
    reference.close()


def test_initial_distribution_and_time_limit() -> None:
    """theta ~ U(-pi, pi), theta_dot ~ U(-1, 1); episodes truncate after 200 steps."""
    env = Pendulum(num_envs=4096)
    obs, _ = env.reset(seed=0)
    speed = obs["obs"][:, 2]
    assert float(speed.abs().max()) <= 1.0
    assert abs(float(speed.mean())) < 0.05
    assert abs(float(obs["obs"][:, 0].mean())) < 0.05  # E[cos theta] = 0 for uniform theta
    small = Pendulum(num_envs=2)
    small.reset(seed=0)
    for step in range(200):
        result = small.step(torch.zeros(2, 1))
        assert bool(result.truncated.all()) == (step == 199)
        assert not bool(result.terminated.any())

"""The Gymnasium VectorEnv view of a torch env."""

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from typedrl.envs.builtin import GymnasiumVectorView, PointMass


def test_view_returns_torch_tensors_and_same_step_final_obs() -> None:
    """Tensors out, NumPy or torch actions in, final_obs and its mask in every info."""
    view = GymnasiumVectorView(PointMass(num_envs=3, max_episode_steps=2))
    assert view.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert view.observation_space.shape == (3, 6)
    obs, info = view.reset(seed=0)
    assert isinstance(obs, torch.Tensor)
    assert info == {}
    obs, reward, terminated, truncated, info = view.step(view.action_space.sample())
    assert not bool(truncated.any())
    assert isinstance(reward, torch.Tensor)
    assert reward.shape == (3,)
    obs, reward, terminated, truncated, info = view.step(torch.zeros(3, 2))
    assert bool(truncated.all())
    assert not bool(terminated.any())
    assert torch.equal(info["_final_obs"], truncated)
    assert not torch.allclose(info["final_obs"], obs)
    assert view.torch_env.num_envs == 3
    view.close()
    view.close()


def test_discrete_numpy_actions_are_converted() -> None:
    """NumPy integer actions from action_space.sample() drive a discrete env."""
    envs = gym.make_vec("typedrl/CartPole-v0", num_envs=4, array_type="torch")
    envs.reset(seed=0)
    _, reward, _, _, _ = envs.step(np.array([0, 1, 0, 1]))
    assert torch.equal(reward, torch.ones(4))
    envs.close()

"""HalfCheetahTask: Gymnasium's HalfCheetah-v5 on mujoco-torch."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.envs.mujoco import HalfCheetahTask, MujocoVecEnv, half_cheetah_xml
from typedrl.errors import ConfigError


def test_steps_match_gymnasium_half_cheetah_v5() -> None:
    """From the same state and actions: Gymnasium's observations and rewards, to 1e-9."""
    env = MujocoVecEnv(task=HalfCheetahTask(), num_envs=1, dtype="float64", seed=0)
    obs, _ = env.reset(seed=4)
    reference = gym.make("HalfCheetah-v5").unwrapped
    reference.reset(seed=0)
    state = env.state_dict()["state"][0].numpy()
    reference.set_state(state[:9], state[9:18])  # type: ignore[attr-defined]
    np.testing.assert_allclose(
        obs["obs"][0].numpy(),
        reference._get_obs(),  # type: ignore[attr-defined]
        rtol=0,
        atol=1e-12,
    )
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        action = torch.rand(1, 6, generator=generator, dtype=torch.float64) * 2 - 1
        result = env.step(action)
        expected_obs, expected_reward, terminated, _, _ = reference.step(action[0].numpy())
        np.testing.assert_allclose(result.obs["obs"][0].numpy(), expected_obs, atol=1e-9)
        assert float(result.reward[0]) == pytest.approx(float(expected_reward), abs=1e-9)
        assert bool(result.terminated[0]) is bool(terminated) is False
    reference.close()


def test_spec_follows_gymnasium() -> None:
    """Frame skip 5 on Gymnasium's model, 17 features, 1000-step limit, dt 0.05 s."""
    env = MujocoVecEnv(task=HalfCheetahTask(), num_envs=2)
    assert env.control_dt == pytest.approx(0.05)
    assert env.max_episode_steps == 1000
    assert env.single_observation_space.shape == (17,)
    assert env.single_action_space.shape == (6,)
    assert half_cheetah_xml().name == "half_cheetah.xml"


def test_reset_noise_scale_zero_starts_at_rest() -> None:
    """With no reset noise every row starts at qpos0 with zero velocity."""
    env = MujocoVecEnv(task=HalfCheetahTask(reset_noise_scale=0.0), num_envs=2)
    obs, _ = env.reset(seed=0)
    assert torch.count_nonzero(obs["obs"]) == 0


def test_negative_weights_are_rejected() -> None:
    """A negative reward weight or noise scale raises ConfigError naming it."""
    with pytest.raises(ConfigError, match="ctrl_cost_weight"):
        HalfCheetahTask(ctrl_cost_weight=-1.0)
    with pytest.raises(ConfigError, match="reset_noise_scale"):
        HalfCheetahTask(reset_noise_scale=-0.1)


@pytest.mark.slow
def test_gradient_matches_central_differences_through_contacts() -> None:
    """The 10-step return's gradient agrees with central differences in float64."""
    env = MujocoVecEnv(task=HalfCheetahTask(), num_envs=1, dtype="float64")
    generator = torch.Generator().manual_seed(1)
    base = torch.rand(10, 1, 6, generator=generator, dtype=torch.float64) * 1.6 - 0.8

    def total(actions: torch.Tensor) -> torch.Tensor:
        env.reset(seed=2)
        return sum((env.step(actions[t]).reward.sum() for t in range(10)), torch.zeros(()))

    actions = base.clone().requires_grad_()
    (gradient,) = torch.autograd.grad(total(actions), actions)
    eps = 1e-6
    for index in [(0, 0, 0), (4, 0, 3), (8, 0, 5)]:
        plus, minus = base.clone(), base.clone()
        plus[index] += eps
        minus[index] -= eps
        with torch.no_grad():
            finite = (total(plus) - total(minus)) / (2 * eps)
        torch.testing.assert_close(gradient[index], finite, rtol=1e-5, atol=1e-8)

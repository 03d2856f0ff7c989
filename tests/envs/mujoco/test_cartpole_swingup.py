"""CartPoleSwingUpTask: the task hooks on hand-made states."""

import math

import pytest
import torch

from typedrl.envs import CartPoleSwingUp
from typedrl.envs.mujoco import CARTPOLE_XML, CartPoleSwingUpTask, MujocoState, MujocoVecEnv
from typedrl.errors import ConfigError


def _state(x: float, theta: float) -> MujocoState:
    qpos = torch.tensor([[x, theta]], dtype=torch.float64)
    return MujocoState(qpos=qpos, qvel=torch.zeros(1, 2, dtype=torch.float64), act=qpos[:, :0])


def test_reward_is_one_upright_and_centred_and_zero_hanging() -> None:
    """r = 1 upright at x = 0, 0 hanging; the control cost is 0.01 a^2."""
    task = CartPoleSwingUpTask()
    action = torch.zeros(1, 1, dtype=torch.float64)
    upright = task.reward(_state(0, 0), action, _state(0.0, 0.0), dt=0.01)
    hanging = task.reward(_state(0, 0), action, _state(0.0, math.pi), dt=0.01)
    costly = task.reward(_state(0, 0), action + 1.0, _state(0.0, 0.0), dt=0.01)
    assert float(upright[0]) == pytest.approx(1.0)
    assert float(hanging[0]) == pytest.approx(0.0, abs=1e-12)
    assert float(costly[0]) == pytest.approx(0.99)


def test_initial_states_hang_down_within_the_noise() -> None:
    """Uniform draws map to theta within 0.05 of pi and |x| <= 0.05."""
    task = CartPoleSwingUpTask()
    uniform = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1e-9, 1e-9, 0.5, 0.5]], dtype=torch.float64)
    state = task.initial_state(uniform, qpos0=torch.zeros(2, dtype=torch.float64), na=0)
    assert state.qpos[:, 1].sub(math.pi).abs().max() <= 0.05 + 1e-12
    assert state.qpos[:, 0].abs().max() <= 0.05 + 1e-12
    assert state.act.shape == (2, 0)
    obs = task.observe(state)
    assert obs.shape == (2, 5)
    assert bool((obs[:, 2] < -0.99).all())


def test_terminates_off_the_rail_and_validates_the_limit() -> None:
    """|x| > x_limit terminates; a non-positive limit is a ConfigError."""
    task = CartPoleSwingUpTask(x_limit=1.0)
    assert task.terminated(_state(1.01, 0.0)).tolist() == [True]
    assert task.terminated(_state(-0.99, 0.0)).tolist() == [False]
    assert task.spec.model_path == CARTPOLE_XML
    with pytest.raises(ConfigError, match="x_limit"):
        CartPoleSwingUpTask(x_limit=0.0)


def test_follows_the_builtin_torch_cartpole() -> None:
    """From the same state and forces, MuJoCo's cart-pole stays within 0.04 of the built-in."""
    builtin = CartPoleSwingUp(num_envs=2, dtype="float64")
    mujoco = MujocoVecEnv(task=CartPoleSwingUpTask(), num_envs=2, dtype="float64")
    builtin.reset(seed=0)
    mujoco.reset(seed=0)
    saved = builtin.state_dict()
    x, theta, x_dot, theta_dot = mujoco.state_dict()["state"][:, :4].unbind(-1)
    saved["state"] = torch.stack((x, x_dot, theta, theta_dot), dim=-1)
    builtin.load_state_dict(saved)
    generator = torch.Generator().manual_seed(0)
    # Measured: at most 0.022 apart (the pole's angular velocity); MuJoCo's pole is a
    # capsule, whose rounded ends make its inertia a few percent larger than a rod's.
    for _ in range(20):
        action = torch.rand(2, 1, generator=generator, dtype=torch.float64) * 2 - 1
        expected, result = builtin.step(action), mujoco.step(action)
        torch.testing.assert_close(result.obs["obs"], expected.obs["obs"], rtol=0, atol=4e-2)
        torch.testing.assert_close(result.reward, expected.reward, rtol=0, atol=1e-3)

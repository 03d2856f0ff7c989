"""The one-row gymnasium.Env that gymnasium.make builds for a built-in id."""

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from tensordict import TensorDict

from typedrl.envs.builtin import GymnasiumEnvView, Pendulum, PointMass
from typedrl.errors import ConfigError, EnvContractError, SpecError

_LIGHT_IDS = (
    "typedrl/Pendulum-v0",
    "typedrl/CartPole-v0",
    "typedrl/CartPoleContinuous-v0",
    "typedrl/CartPoleSwingUp-v0",
    "typedrl/PointMass-v0",
    "typedrl/Reacher-v0",
)

# check_env's advice that is not a defect: unbounded velocities are Box(-inf, inf), as in
# Gymnasium's own MuJoCo envs, and Pendulum's torque range is [-2, 2], as in Pendulum-v1.
_ADVICE = ("infinity. This is probably too", "recommend using a symmetric and normalized space")


def _env_checker_complaints(env: gym.Env[Any, Any]) -> list[str]:
    """What Gymnasium's check_env warns about, less the advice in _ADVICE."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    messages = [str(warning.message) for warning in caught]
    return [m for m in messages if not any(advice in m for advice in _ADVICE)]


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
@pytest.mark.parametrize("env_id", _LIGHT_IDS)
def test_passes_gymnasiums_env_checker(env_id: str, render_mode: str | None) -> None:
    """check_env passes every light built-in env, rendering or not, with advice alone."""
    env = gym.make(env_id, render_mode=render_mode)
    assert _env_checker_complaints(env) == []
    env.close()


@pytest.mark.slow  # building and stepping a MuJoCo model takes seconds
@pytest.mark.parametrize(
    "env_id", ["typedrl/MujocoCartPoleSwingUp-v0", "typedrl/MujocoHalfCheetah-v0"]
)
def test_mujoco_envs_pass_gymnasiums_env_checker(env_id: str) -> None:
    """check_env passes the MuJoCo built-ins (which do not render) with advice alone."""
    env = gym.make(env_id)
    assert _env_checker_complaints(env) == []
    env.close()


def test_numpy_values_and_python_scalars() -> None:
    """float32 observations in the space, a float reward, bool flags, an empty info."""
    env = gym.make("typedrl/Pendulum-v0")
    obs, info = env.reset(seed=0)
    assert isinstance(obs, np.ndarray)
    assert obs.dtype == np.float32
    assert obs in env.observation_space
    assert info == {}
    obs, reward, terminated, truncated, info = env.step(np.array([0.5], dtype=np.float32))
    assert obs.dtype == np.float32
    assert obs.flags.c_contiguous
    assert type(reward) is float
    assert type(terminated) is bool
    assert type(truncated) is bool
    assert info == {}


def test_same_seed_same_episode_and_the_torch_envs_physics() -> None:
    """A seeded reset replays the torch env's own row-0 episode, step for step."""
    env = gym.make("typedrl/PointMass-v0")
    torch_env = PointMass(num_envs=1)
    obs, _ = env.reset(seed=7)
    expected, _ = torch_env.reset(seed=7)
    np.testing.assert_array_equal(obs, expected["obs"][0].numpy())
    action = np.array([0.3, -0.2], dtype=np.float32)
    for _ in range(3):
        obs, reward, *_ = env.step(action)
        result = torch_env.step(torch.from_numpy(action).unsqueeze(0))
        np.testing.assert_array_equal(obs, result.obs["obs"][0].numpy())
        assert reward == float(result.reward[0])
    again, _ = env.reset(seed=7)
    np.testing.assert_array_equal(again, expected["obs"][0].numpy())


def test_the_registered_time_limit_truncates_and_make_overrides_it() -> None:
    """Gymnasium's TimeLimit ends episodes: 200 steps by default, make's own limit beyond it."""
    env = gym.make("typedrl/Pendulum-v0")
    env.reset(seed=0)
    flags = [env.step(np.zeros(1, dtype=np.float32))[3] for _ in range(200)]
    assert flags == [False] * 199 + [True]
    longer = gym.make("typedrl/Pendulum-v0", max_episode_steps=250)
    longer.reset(seed=0)
    flags = [longer.step(np.zeros(1, dtype=np.float32))[3] for _ in range(250)]
    assert flags == [False] * 249 + [True]


def test_termination_returns_the_terminal_observation_then_needs_a_reset() -> None:
    """The last step shows the terminal state (final_obs), not the torch env's next episode."""
    env = gym.make("typedrl/CartPole-v0")
    view = env.unwrapped
    assert isinstance(view, GymnasiumEnvView)
    env.reset(seed=0)
    terminated = False
    obs = np.zeros(4, dtype=np.float32)
    while not terminated:
        obs, _, terminated, truncated, _ = env.step(1)
        assert not truncated
    # Pushed right until the pole falls past 12 degrees: the terminal angle is outside.
    assert abs(float(obs[2])) > 0.2094
    restarted = view.torch_env.detach_state()["obs"][0].numpy()
    assert abs(float(restarted[2])) <= 0.05
    with pytest.raises(EnvContractError, match=r"call reset\(\) before stepping again"):
        view.step(1)
    obs, _ = env.reset()
    assert abs(float(obs[2])) <= 0.05
    env.step(0)


def test_render_shows_the_terminal_state_and_rgb_array_list_works() -> None:
    """Frames are the torch env's own; Gymnasium's RenderCollection serves rgb_array_list."""
    env = gym.make("typedrl/CartPole-v0", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    terminated = False
    while not terminated:
        obs, _, terminated, _, _ = env.step(1)
    frame = env.render()
    assert isinstance(frame, np.ndarray)
    view = env.unwrapped
    assert isinstance(view, GymnasiumEnvView)
    terminal = torch.from_numpy(obs).unsqueeze(0)
    expected = view.torch_env.render(0, obs=TensorDict({"obs": terminal}, batch_size=[1]))
    np.testing.assert_array_equal(frame, expected)
    assert env.metadata["render_fps"] == view.torch_env.render_fps
    frames = gym.make("typedrl/Pendulum-v0", render_mode="rgb_array_list")
    frames.reset(seed=0)
    frames.step(np.zeros(1, dtype=np.float32))
    rendered = frames.render()
    assert isinstance(rendered, list)
    assert len(rendered) == 2


def test_user_errors_are_one_line() -> None:
    """Wrong actions, render modes and row counts raise typedrl errors that say what is expected."""
    env = gym.make("typedrl/CartPole-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(SpecError, match=r"int action in \[0, 2\)"):
        env.step(2)
    with pytest.raises(SpecError, match="int action"):
        env.step(np.float32(1.0))
    pendulum = gym.make("typedrl/Pendulum-v0").unwrapped
    pendulum.reset(seed=0)
    with pytest.raises(SpecError, match=r"shape \(1,\)"):
        pendulum.step(np.zeros(2, dtype=np.float32))
    with pytest.raises(ConfigError, match="render_mode must be None or one of"):
        GymnasiumEnvView(Pendulum(num_envs=1), render_mode="human_video")
    with pytest.raises(ConfigError, match="num_envs=1"):
        GymnasiumEnvView(Pendulum(num_envs=2))
    with pytest.raises(ConfigError, match="array_type applies to the vector entry point"):
        gym.make("typedrl/Pendulum-v0", array_type="torch")


def test_the_torch_envs_own_time_limit_ends_the_episode_too() -> None:
    """A view of a torch env with its own limit reports that truncation and needs a reset."""
    view = GymnasiumEnvView(Pendulum(num_envs=1, max_episode_steps=2))
    view.reset(seed=0)
    assert view.step(np.zeros(1, dtype=np.float32))[3] is False
    obs, _, terminated, truncated, _ = view.step(np.zeros(1, dtype=np.float32))
    assert (terminated, truncated) == (False, True)
    assert obs in view.observation_space
    with pytest.raises(EnvContractError):
        view.step(np.zeros(1, dtype=np.float32))
    view.close()

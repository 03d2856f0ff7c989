"""The built-in ids in other libraries' loops, unmodified: CleanRL's pattern and SB3."""

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import typedrl  # noqa: F401 - what a user adds: importing typedrl registers the typedrl/ ids


@pytest.fixture(autouse=True)
def _sb3_logs_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3's learn() makes a log folder in the system's temp folder unless SB3_LOGDIR names one."""
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3"))


def _make_env(env_id: str, seed: int) -> Callable[[], gym.Env[Any, Any]]:
    # CleanRL's make_env: a thunk per env, each recording its own episode statistics.
    def thunk() -> gym.Env[Any, Any]:
        env = gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))
        env.action_space.seed(seed)
        return env

    return thunk


def test_cleanrl_style_sync_vector_env_reports_episodes() -> None:
    """SyncVectorEnv of gym.make thunks with RecordEpisodeStatistics reports exact returns."""
    envs = gym.vector.SyncVectorEnv([_make_env("typedrl/CartPole-v0", i) for i in range(2)])
    assert isinstance(envs.single_action_space, gym.spaces.Discrete)
    obs, _ = envs.reset(seed=1)
    returns: list[float] = []
    for _ in range(100):
        # Always push right: every episode ends by termination within a few dozen steps.
        obs, _, terminated, truncated, info = envs.step(np.ones(2, dtype=np.int64))
        if "episode" in info:
            ended = info["_episode"]
            assert (ended == (terminated | truncated)).all()
            # CartPole pays 1 per step: the return is the length.
            episode = info["episode"]
            assert (episode["r"][ended] == episode["l"][ended]).all()
            returns.extend(episode["r"][ended].tolist())
    assert len(returns) >= 4
    assert obs.shape == (2, 4)
    envs.close()


def _clip_observation(obs: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.clip(obs, -10.0, 10.0)


def _clip_reward(reward: SupportsFloat) -> float:
    return min(max(float(reward), -10.0), 10.0)


def _make_continuous_env(env_id: str, gamma: float) -> Callable[[], gym.Env[Any, Any]]:
    # CleanRL's ppo_continuous_action make_env: its stack of single-env wrappers.
    def thunk() -> gym.Env[Any, Any]:
        env: gym.Env[Any, Any] = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, _clip_observation, env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        return gym.wrappers.TransformReward(env, _clip_reward)

    return thunk


def test_cleanrl_continuous_wrapper_stack() -> None:
    """CleanRL's continuous-control wrappers run on Pendulum; episodes last the 200-step limit."""
    envs = gym.vector.SyncVectorEnv([_make_continuous_env("typedrl/Pendulum-v0", 0.99)] * 2)
    obs, _ = envs.reset(seed=0)
    lengths = []
    for _ in range(200):
        obs, _, _, truncated, info = envs.step(envs.action_space.sample())
        if "episode" in info:
            assert truncated.all()
            lengths.append(info["episode"]["l"].tolist())
    assert lengths == [[200, 200]]
    assert obs.dtype == np.float32
    assert np.abs(obs).max() <= 10
    envs.close()


@pytest.mark.parametrize("env_id", ["typedrl/CartPole-v0", "typedrl/Pendulum-v0"])
def test_stable_baselines3_env_checker(env_id: str) -> None:
    """SB3's own check_env passes; Pendulum gets only its torque-range advice."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id))
    messages = [str(warning.message) for warning in caught]
    assert [m for m in messages if "symmetric and normalized Box action space" not in m] == []


@pytest.mark.parametrize("env_id", ["typedrl/CartPole-v0", "typedrl/Pendulum-v0"])
def test_stable_baselines3_ppo_trains_on_the_id(env_id: str) -> None:
    """PPO("MlpPolicy", id) builds the env itself and trains a short budget."""
    model = PPO("MlpPolicy", env_id, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    model.learn(total_timesteps=128)
    assert model.num_timesteps == 128


def test_stable_baselines3_make_vec_env() -> None:
    """make_vec_env builds a DummyVecEnv of two seeded single envs."""
    envs = make_vec_env("typedrl/Pendulum-v0", n_envs=2, seed=0)
    obs = envs.reset()
    assert isinstance(obs, np.ndarray)
    assert obs.shape == (2, 3)
    obs, reward, done, _ = envs.step(np.zeros((2, 1), dtype=np.float32))
    assert reward.shape == (2,)
    assert not done.any()
    envs.close()


def _random_policy_return(env_id: str, *, episodes: int, seed: int) -> float:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    total = 0.0
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
    return total / episodes


@pytest.mark.slow
def test_stable_baselines3_ppo_learns_cartpole() -> None:
    """8k steps of PPO triple a random policy's CartPole return on the same starts."""
    env = make_vec_env("typedrl/CartPole-v0", n_envs=4, seed=0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, seed=0)
    model.learn(total_timesteps=8_000)
    eval_env = make_vec_env("typedrl/CartPole-v0", n_envs=1, seed=100)
    trained, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    random = _random_policy_return("typedrl/CartPole-v0", episodes=10, seed=100)
    assert isinstance(trained, float)
    assert trained > 3 * random

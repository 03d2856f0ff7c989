"""End-to-end: PPO actually learns, with small budgets and fixed seeds."""

import pytest
import torch

from typedrl.envs import make
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

# Stable-Baselines3 zoo's CartPole-v1 hyper-parameters (8 envs).
CARTPOLE = PPOConfig(
    total_timesteps=100_000,
    num_steps=32,
    batch_size=256,
    num_mini_epochs=20,
    learning_rate=1e-3,
    learning_rate_schedule="linear",
    gamma=0.98,
    gae_lambda=0.8,
)


def _train_cartpole(env_id: str, seed: int, num_envs: int, config: PPOConfig) -> float:
    torch.set_num_threads(1)
    env = make(env_id, num_envs=num_envs, seed=seed)
    eval_env = make(env_id, num_envs=8, seed=seed + 100)
    agent = PPOAgent(
        env=env,
        config=PPOConfig.from_dict({**config.to_dict(), "seed": seed}),
        eval_env=eval_env,
        options=RunOptions(eval_episodes=16, progress=False),
    )
    result = agent.fit()
    env.close()
    eval_env.close()
    assert result.env_steps <= config.total_timesteps + config.num_steps * num_envs
    score: float = result.metrics["eval/score"]
    return score


@pytest.mark.slow
def test_cartpole_v1_reaches_475_within_100k_steps() -> None:
    """Gymnasium CartPole-v1, 8 envs, seed 0: deterministic eval return >= 475 in 100k steps."""
    assert _train_cartpole("CartPole-v1", 0, 8, CARTPOLE) >= 475.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_cartpole_v1_other_seeds(seed: int) -> None:
    """The same budget suffices on two more fixed seeds."""
    assert _train_cartpole("CartPole-v1", seed, 8, CARTPOLE) >= 475.0


def test_builtin_cartpole_reaches_475() -> None:
    """The built-in torch CartPole (32 envs, the `typedrl train` preset) learns too."""
    config = PPOConfig.from_dict({**CARTPOLE.to_dict(), "num_mini_epochs": 10})
    assert _train_cartpole("typedrl/CartPole-v0", 0, 32, config) >= 475.0


@pytest.mark.slow
def test_pendulum_reaches_minus_250_within_200k_steps() -> None:
    """Gymnasium Pendulum-v1, 8 envs: deterministic eval return >= -250 within 200k steps."""
    torch.set_num_threads(1)
    env = make("Pendulum-v1", num_envs=8, seed=0)
    eval_env = make("Pendulum-v1", num_envs=8, seed=100)
    config = PPOConfig(
        total_timesteps=200_000,
        num_steps=256,
        batch_size=256,
        num_mini_epochs=10,
        learning_rate=1e-3,
        gamma=0.9,
        gae_lambda=0.95,
        normalize_observations=True,
        normalize_rewards=True,
        log_std_init=-0.5,
    )
    agent = PPOAgent(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=16, progress=False),
    )
    result = agent.fit()
    env.close()
    eval_env.close()
    assert result.metrics["eval/score"] >= -250.0


@pytest.mark.slow
def test_builtin_cartpole_4096_envs_reaches_475_in_2m_steps() -> None:
    """The built-in CartPole with 4096 envs: eval return >= 475 at the end of 2M env steps."""
    torch.set_num_threads(2)
    env = make("typedrl/CartPole-v0", num_envs=4096, seed=0)
    eval_env = make("typedrl/CartPole-v0", num_envs=64, seed=1)
    config = PPOConfig(
        total_timesteps=2_000_000,
        num_steps=16,
        batch_size=2048,
        num_mini_epochs=10,
        learning_rate=3e-3,
        gamma=0.98,
        gae_lambda=0.8,
    )
    agent = PPOAgent(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=64, progress=False),
    )
    result = agent.fit()
    assert result.env_steps <= 2_000_000 + 16 * 4096
    assert result.metrics["eval/score"] >= 475.0


def test_frozen_lake_index_observations_reach_the_goal() -> None:
    """FrozenLake-v1 (not slippery): a Discrete observation, one-hot coded, solved in 16k steps."""
    torch.set_num_threads(1)
    kwargs = {"is_slippery": False}
    env = make("FrozenLake-v1", num_envs=8, seed=0, env_kwargs=kwargs)
    eval_env = make("FrozenLake-v1", num_envs=8, seed=100, env_kwargs=kwargs)
    config = PPOConfig(total_timesteps=16_384, num_steps=128, batch_size=256, seed=0)
    agent = PPOAgent(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=8, progress=False),
    )
    result = agent.fit()
    env.close()
    eval_env.close()
    # Every deterministic episode reaches the goal: the return of each is 1.
    assert result.metrics["eval/score"] == 1.0

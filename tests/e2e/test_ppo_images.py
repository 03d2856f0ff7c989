"""End-to-end: PPO's default policy reads images (a tiny image task).

MiniGrid and Atari Pong, whose packages the default suite does not install, are
in ``tests/thirdparty/test_images.py`` (``nox -s thirdparty``).
"""

from pathlib import Path

import torch

from typedrl.envs import make
from typedrl.policies import MLPActorCritic, RecurrentActorCritic
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

ROOT = Path(__file__).resolve().parents[2]


def test_ppo_reads_the_quadrant_from_the_image() -> None:
    """QuadrantImageEnv (chance 0.25): the small CNN reaches >= 0.9 in 8192 steps, seed 0."""
    torch.set_num_threads(1)
    env = make("typedrl.testing:QuadrantImageEnv", num_envs=8, seed=0)
    eval_env = make("typedrl.testing:QuadrantImageEnv", num_envs=8, seed=100)
    config = PPOConfig(
        total_timesteps=8192,
        num_steps=32,
        batch_size=64,
        num_mini_epochs=4,
        learning_rate=1e-3,
        entropy_coef=0.01,
        actor_hidden=(64,),
        critic_hidden=(64,),
        image_features=64,
    )
    agent = PPOAgent(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=64, progress=False),
    )
    result = agent.fit()
    env.close()
    eval_env.close()
    assert isinstance(agent.policy, MLPActorCritic)
    assert agent.policy.actor_encoding.images[0].kind == "small"
    # The rollout stores the image as the env gives it: bytes, not floats.
    assert agent.collector.buffer.specs["obs", "obs"].dtype == torch.uint8
    assert result.metrics["eval/score"] >= 0.9


def test_a_recurrent_policy_reads_the_quadrant_through_its_cnn() -> None:
    """``core="gru"``: the CNN feeds a GRU and the rollout carries its state; >= 0.9, seed 0."""
    torch.set_num_threads(1)
    env = make("typedrl.testing:QuadrantImageEnv", num_envs=8, seed=0)
    eval_env = make("typedrl.testing:QuadrantImageEnv", num_envs=8, seed=100)
    config = PPOConfig(
        total_timesteps=8192,
        num_steps=32,
        batch_size=64,
        num_mini_epochs=4,
        learning_rate=1e-3,
        entropy_coef=0.01,
        actor_hidden=(64,),
        critic_hidden=(64,),
        image_features=64,
        core="gru",
    )
    agent = PPOAgent(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=64, progress=False),
    )
    result = agent.fit()
    env.close()
    eval_env.close()
    assert isinstance(agent.policy, RecurrentActorCritic)
    assert agent.policy.encoding.images[0].kind == "small"
    assert agent.collector.buffer.specs["obs", "obs"].dtype == torch.uint8
    assert result.metrics["eval/score"] >= 0.9

"""End-to-end: the shipped tuned PPO files train to the returns their ``source`` states."""

import importlib.resources
from typing import Any

import pytest
import torch
import yaml

from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

EVAL_SEED_OFFSET = 1000


def _tuned(file_name: str) -> dict[str, Any]:
    path = importlib.resources.files("typedrl") / "configs" / "ppo" / file_name
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def _train(file_name: str, seed: int, *, clip_actions: bool = False) -> float:
    """Train with the file's settings; the final policy's deterministic mean return."""
    torch.set_num_threads(1)
    tuned = _tuned(file_name)
    env_id = tuned["env_id"]
    config = PPOConfig.from_dict({**tuned["config"], "seed": seed})
    env = make(env_id, num_envs=tuned["num_envs"], seed=seed, clip_actions=clip_actions)
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))
    result = agent.fit()
    env.close()
    assert result.env_steps >= config.total_timesteps
    eval_env = make(env_id, num_envs=1, seed=seed + EVAL_SEED_OFFSET, clip_actions=clip_actions)
    evaluation = EpisodeEvaluator(eval_env, num_episodes=10, seed=seed + EVAL_SEED_OFFSET).evaluate(
        agent.policy
    )
    eval_env.close()
    return evaluation.score


@pytest.mark.slow
def test_acrobot_file_reaches_minus_120() -> None:
    """Acrobot-v1's file, seed 0: mean return >= -120 over 10 deterministic episodes."""
    assert _train("Acrobot-v1.yaml", 0) >= -120.0


@pytest.mark.slow
def test_half_cheetah_file_reaches_its_stated_return() -> None:
    """HalfCheetah-v5's file at 300k steps, seed 0: mean return >= 3,000 over 10 episodes."""
    tuned = _tuned("HalfCheetah-v5.yaml")
    assert tuned["config"]["total_timesteps"] == 300_000
    assert _train("HalfCheetah-v5.yaml", 0, clip_actions=True) >= 3_000.0

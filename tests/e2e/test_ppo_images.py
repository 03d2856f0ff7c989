"""End-to-end: PPO's default policy reads images (a tiny image task).

MiniGrid and Atari Pong, whose packages the default suite does not install, are
in ``tests/thirdparty/test_images.py`` (``nox -s thirdparty``).
"""

from pathlib import Path
from typing import Literal

import pytest
import torch

from typedrl.envs import make
from typedrl.policies import MLPActorCritic, RecurrentActorCritic
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("core", ["mlp", pytest.param("gru", marks=pytest.mark.slow)])
def test_ppo_reads_the_quadrant_from_the_image(core: Literal["mlp", "gru"]) -> None:
    """QuadrantImageEnv (chance 0.25): the small CNN reaches >= 0.9 in 8192 steps, seed 0.

    With ``core="gru"`` (slow: a minute on a loaded 2-core CPU) the CNN feeds a GRU and the
    rollout carries its state; the default suite checks that path's mechanics in
    ``tests/policies/test_recurrent.py`` and ``tests/test_export_recurrent.py``.
    """
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
        core=core,
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
    policy = agent.policy
    if core == "mlp":
        assert isinstance(policy, MLPActorCritic)
        encoders = policy.actor_encoding.images
    else:
        assert isinstance(policy, RecurrentActorCritic)
        encoders = policy.encoding.images
    assert [encoder.kind for encoder in encoders] == ["small"]
    # The rollout stores the image as the env gives it: bytes, not floats.
    assert agent.collector.buffer.specs["obs", "obs"].dtype == torch.uint8
    assert result.metrics["eval/score"] >= 0.9

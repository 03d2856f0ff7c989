"""End-to-end: a GRU learns CartPole without velocities, where the MLP cannot, fixed seed."""

import pytest
import torch

from typedrl.envs import make
from typedrl.policies import PolicyFactory
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

HIDE_VELOCITIES = "typedrl.envs:KeepObservationIndices(indices=[0, 2])"
CONFIG = PPOConfig(
    total_timesteps=60_000,
    num_steps=32,
    batch_size=128,
    num_mini_epochs=10,
    learning_rate=1e-3,
    learning_rate_schedule="linear",
    gamma=0.98,
    gae_lambda=0.8,
    entropy_coef=0.0,
    normalize_observations=True,
    seed=0,
)
GRU = PolicyFactory(
    "typedrl.policies:RecurrentActorCritic",
    kwargs={"hidden_size": 64, "normalize_observations": True},
)


def _train(factory: PolicyFactory | None) -> float:
    """The deterministic evaluation score after CONFIG's budget on masked CartPole."""
    torch.set_num_threads(1)
    env = make("CartPole-v1", num_envs=8, seed=0, wrappers=[HIDE_VELOCITIES])
    eval_env = make("CartPole-v1", num_envs=8, seed=100, wrappers=[HIDE_VELOCITIES])
    agent = PPOAgent(
        env=env,
        config=CONFIG,
        policy_factory=factory,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=16, progress=False, loggers=[]),
    )
    score: float = agent.fit().metrics["eval/score"]
    env.close()
    eval_env.close()
    return score


@pytest.mark.slow
def test_a_gru_learns_cartpole_without_velocities_where_the_mlp_does_not() -> None:
    """Same budget and seed: the GRU policy scores far above the feed-forward one."""
    mlp = _train(None)
    gru = _train(GRU)
    assert mlp < 150.0, f"the MLP scored {mlp}"
    assert gru > mlp + 100.0, f"the GRU scored {gru}, the MLP {mlp}"

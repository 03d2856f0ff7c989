"""Short fixed-seed PPO, APG and SHAC runs whose results are pinned.

A refactor must not change what the algorithms compute: ``tests/test_pinned_results.py``
compares these runs' final weights with sums recorded before a move, and
``benchmarks/pinned_weights.py`` prints exact digests to compare two checkouts.
When a change is meant to alter the results, re-record the numbers in a commit
of its own.
"""

from collections.abc import Callable
from typing import Any

from torch import nn

from typedrl.apg import APGConfig, DifferentiableTrainer, DifferentiableTrainerConfig, SHACConfig
from typedrl.envs import make
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import AbstractTrainer, RunOptions


def trained_modules(trainer: AbstractTrainer) -> dict[str, nn.Module]:
    """The policy and, for SHAC, the critic and target critic of a trained run."""
    policy = trainer.policy
    found: dict[str, nn.Module] = {"policy": policy} if isinstance(policy, nn.Module) else {}
    algorithm = getattr(trainer, "algorithm", None)
    for name in ("critic", "target_critic"):
        module = getattr(algorithm, name, None)
        if isinstance(module, nn.Module):
            found[name] = module
    return found


def ppo_pendulum() -> AbstractTrainer:
    env = make(
        "typedrl/Pendulum-v0",
        num_envs=4,
        seed=3,
        clip_actions=False,
        env_kwargs={"max_episode_steps": 20},
    )
    config = PPOConfig(
        total_timesteps=4 * 32 * 3,
        num_steps=32,
        batch_size=32,
        num_mini_epochs=2,
        learning_rate=1e-3,
        learning_rate_schedule="linear",
        normalize_observations=True,
        normalize_rewards=True,
        actor_hidden=(16,),
        critic_hidden=(16,),
        seed=5,
    )
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False))
    agent.fit()
    return agent


def _fitted(trainer: AbstractTrainer) -> AbstractTrainer:
    trainer.fit()
    return trainer


def _ppo_cartpole(**changes: Any) -> AbstractTrainer:
    """Built-in discrete CartPole, 3 epochs; ``changes`` override config fields."""
    fields: dict[str, Any] = {
        "total_timesteps": 8 * 16 * 3,
        "num_steps": 16,
        "batch_size": 64,
        "num_mini_epochs": 2,
        "learning_rate": 3e-3,
        "actor_hidden": (16,),
        "critic_hidden": (16,),
        "seed": 2,
        **changes,
    }
    env = make("typedrl/CartPole-v0", num_envs=8, seed=1)
    return _fitted(
        PPOAgent(env=env, config=PPOConfig(**fields), options=RunOptions(progress=False))
    )


def ppo_cartpole_adaptive() -> AbstractTrainer:
    return _ppo_cartpole(learning_rate_schedule="adaptive", target_kl=0.05)


def ppo_cartpole() -> AbstractTrainer:
    return _ppo_cartpole()


def apg_segmented() -> AbstractTrainer:
    env = make("typedrl/Pendulum-v0", num_envs=8, seed=4, env_kwargs={"max_episode_steps": 24})
    config = DifferentiableTrainerConfig(
        total_updates=4,
        segment_length=8,
        update_horizon=16,
        hidden=(16,),
        algorithm=APGConfig(learning_rate=1e-2, max_grad_norm=0.5, entropy_coef=1e-3),
        seed=6,
    )
    trainer = DifferentiableTrainer(env=env, config=config, options=RunOptions(progress=False))
    trainer.train()
    return trainer


def apg_complete() -> AbstractTrainer:
    env = make("typedrl/PointMass-v0", num_envs=8, seed=2)
    config = DifferentiableTrainerConfig(
        total_updates=3,
        rollout_mode="complete",
        segment_length=16,
        gradient_accumulation_steps=2,
        hidden=(16,),
        algorithm=APGConfig(learning_rate=5e-3, learning_rate_schedule="linear"),
        seed=7,
    )
    trainer = DifferentiableTrainer(env=env, config=config, options=RunOptions(progress=False))
    trainer.train()
    return trainer


def shac_swingup() -> AbstractTrainer:
    env = make("typedrl/CartPoleSwingUp-v0", num_envs=8, seed=5)
    config = DifferentiableTrainerConfig(
        total_updates=4,
        segment_length=8,
        hidden=(16,),
        algorithm=SHACConfig(
            critic_hidden=(16,),
            critic_iterations=2,
            critic_minibatches=2,
            normalize_returns=True,
        ),
        seed=8,
    )
    trainer = DifferentiableTrainer(env=env, config=config, options=RunOptions(progress=False))
    trainer.train()
    return trainer


RUNS: dict[str, Callable[[], AbstractTrainer]] = {
    "ppo_pendulum": ppo_pendulum,
    "ppo_cartpole": ppo_cartpole,
    "ppo_cartpole_adaptive": ppo_cartpole_adaptive,
    "apg_segmented": apg_segmented,
    "apg_complete": apg_complete,
    "shac_swingup": shac_swingup,
}

"""End-to-end: SHAC learns the built-in cart-pole swing-up, with small budgets and fixed seeds.

The reward of ``typedrl/CartPoleSwingUp-v0`` is at most 1 per step (upright and centred)
over 500-step episodes; the pole starts hanging down, where the untrained policy's
deterministic actions score about 0.
"""

import dataclasses
from collections.abc import Iterator

import pytest
import torch

from typedrl import configs
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig, SHACConfig
from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.training import RunOptions

ENV_ID = "typedrl/CartPoleSwingUp-v0"


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Train on one thread (the scores below were measured so), then restore the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _swing_up(*, seed: int, num_envs: int, total_updates: int) -> tuple[float, float]:
    """The deterministic eval score before and after SHAC with the paper's settings."""
    env = make(ENV_ID, num_envs=num_envs, seed=seed)
    eval_env = make(ENV_ID, num_envs=8, seed=1000 + seed)
    # Xu et al. (2022): windows of 32 steps, [64, 64] ELU networks with LayerNorm,
    # observation normalisation; SHACConfig's defaults are the paper's but for the
    # actor's learning rate, set back to the paper's 1e-2 here (faster, less reliable).
    paper = SHACConfig()
    config = DifferentiableTrainerConfig(
        total_updates=total_updates,
        segment_length=32,
        normalize_observations=True,
        layer_norm=True,
        algorithm=dataclasses.replace(
            paper, actor=dataclasses.replace(paper.actor, learning_rate=1e-2)
        ),
        seed=seed,
    )
    trainer = DifferentiableTrainer(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=8, progress=False, loggers=[]),
    )
    before = trainer.evaluate()["eval/score"]
    result = trainer.train()
    env.close()
    eval_env.close()
    assert result.iterations == total_updates
    assert result.metrics["train/applied_updates"] == float(total_updates)
    after: float = result.metrics["eval/score"]
    return before, after


@pytest.mark.slow
def test_swing_up_improves_clearly_in_100_updates() -> None:
    """32 envs, 100 windows of 32 steps (about 10 s), seed 0: eval score 0 -> above 100."""
    before, after = _swing_up(seed=0, num_envs=32, total_updates=100)
    # Measured 0.05 before training.
    assert before < 10.0
    # Measured 195.7 (seeds 1-4: 125.2, 62.6, 156.3, 46.1).
    assert after >= 100.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 2])
def test_swing_up_balances_in_400_updates(seed: int) -> None:
    """The paper's 64 envs, 400 windows of 32 steps (about a minute): eval score above 400."""
    _before, after = _swing_up(seed=seed, num_envs=64, total_updates=400)
    # Measured 446.6 (seed 0) and 441.4 (seed 2); the maximum is 500.
    assert after >= 400.0


_EVAL_SEED = 12_345


def _shipped_settings(env_id: str, seed: int) -> dict[str, float]:
    """Train with the shipped tuned file; evaluate 100 episodes from fixed, seeded starts."""
    tuned = configs.load("shac", env_id)
    config = configs.build_config("shac", {**tuned.config, "seed": seed})
    assert isinstance(config, DifferentiableTrainerConfig)
    env = make(env_id, num_envs=tuned.num_envs, seed=seed)
    trainer = DifferentiableTrainer(
        env=env, config=config, options=RunOptions(progress=False, loggers=[])
    )
    trainer.fit()
    eval_env = make(env_id, num_envs=100, seed=_EVAL_SEED)
    result = EpisodeEvaluator(eval_env, num_episodes=100, seed=_EVAL_SEED).evaluate(trainer.policy)
    env.close()
    eval_env.close()
    return dict(result.metrics)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shipped_settings_hold_the_pole_upright(seed: int) -> None:
    """>= 90% of 100 deterministic episodes keep the pole within 12 degrees for their last half."""
    metrics = _shipped_settings("typedrl/CartPoleSwingUp-v0", seed)
    assert metrics["success_rate"] >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shipped_settings_swing_the_pendulum_up(seed: int) -> None:
    """Mean deterministic return over 100 episodes from fixed starts >= -200."""
    metrics = _shipped_settings("typedrl/Pendulum-v0", seed)
    assert metrics["return_mean"] >= -200.0

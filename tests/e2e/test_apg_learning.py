"""End-to-end: APG learns the built-in differentiable tasks with its default settings.

Every run uses :class:`~typedrl.apg.DifferentiableTrainerConfig`'s defaults (32-step
segments, Adam at 3e-3, normalised observations, tanh-squashed actions, gradient-norm
clipping at 1.0) with 64 envs; only the budget and the seed change. Goal tasks are
scored by how close the deterministic policy gets: the distance to the goal at the
end of an episode over the distance at its start, averaged over 100 episodes from
fixed, seeded starts (the same starts for every seed and every evaluation).
"""

from typing import final

import pytest
import torch

from typedrl import EvaluationResult
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.protocols import Evaluator, Policy, VecEnv
from typedrl.testing import ConstantPolicy
from typedrl.training import RunOptions

NUM_ENVS = 64
EVAL_EPISODES = 100
EVAL_SEED = 12_345
# Where each goal task's observation holds the offset to its goal: PointMass
# observes (p, v, g - p), Reacher (..., fingertip - target) in its last two features.
GOAL_OFFSET_COLUMNS = {
    "typedrl/PointMass-v0": slice(4, 6),
    "typedrl/Reacher-v0": slice(8, 10),
}


@final
class GoalDistanceEvaluator:
    """Scores a policy by its final over its initial distance to the goal.

    Every row of the env plays exactly one episode from a reset with a fixed
    seed, with deterministic actions. The initial distance is read from the
    reset observation and the final one from the terminal observation
    (``final_obs``) of the step that ends the row's episode.

    Metrics: ``distance_ratio`` (the mean over episodes of final / initial
    distance), ``final_distance``, ``initial_distance`` and ``return_mean``.
    The score is ``-distance_ratio``, so that a larger score is better.
    """

    def __init__(self, env: VecEnv, *, offset_columns: slice, seed: int) -> None:
        self.env = env
        self.offset_columns = offset_columns
        self.seed = seed

    def evaluate(self, policy: Policy) -> EvaluationResult:
        """Play one episode per row and summarise the distances and returns."""
        was_training = policy.training
        policy.train(mode=False)
        try:
            with torch.no_grad():
                initial, final, returns = self._run(policy)
        finally:
            policy.train(mode=was_training)
        ratio = final / initial
        metrics = {
            "distance_ratio": float(ratio.mean()),
            "final_distance": float(final.mean()),
            "initial_distance": float(initial.mean()),
            "return_mean": float(returns.mean()),
        }
        return EvaluationResult(
            metrics=metrics, score=-metrics["distance_ratio"], num_items=ratio.numel()
        )

    def _run(self, policy: Policy) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        env, columns = self.env, self.offset_columns
        obs, _ = env.reset(seed=self.seed)
        initial = obs["obs"][:, columns].double().norm(dim=-1)
        final = torch.zeros_like(initial)
        returns = torch.zeros_like(initial)
        ended = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        while not bool(ended.all()):
            result = env.step(policy.act(obs, deterministic=True)["action"])
            returns += torch.where(ended, 0.0, result.reward.double())
            first_end = result.done & ~ended
            assert result.final_obs is not None, "the env must provide terminal observations"
            offset = result.final_obs["obs"][:, columns].double().norm(dim=-1)
            final = torch.where(first_end, offset, final)
            ended |= result.done
            obs = result.obs
        return initial, final, returns


def _train(env_id: str, seed: int, total_updates: int, evaluator: Evaluator) -> dict[str, float]:
    """Train APG with the default settings; return the final evaluation's metrics."""
    torch.set_num_threads(1)
    env = make(env_id, num_envs=NUM_ENVS, seed=seed)
    config = DifferentiableTrainerConfig(total_updates=total_updates, seed=seed)
    trainer = DifferentiableTrainer(
        env=env, config=config, evaluator=evaluator, options=RunOptions(progress=False)
    )
    result = trainer.fit()
    env.close()
    assert result.iterations == total_updates
    assert result.env_steps == total_updates * config.segment_length * NUM_ENVS
    return result.metrics


def _distance_ratio(env_id: str, seed: int, total_updates: int) -> float:
    eval_env = make(env_id, num_envs=EVAL_EPISODES, seed=EVAL_SEED)
    evaluator = GoalDistanceEvaluator(
        eval_env, offset_columns=GOAL_OFFSET_COLUMNS[env_id], seed=EVAL_SEED
    )
    metrics = _train(env_id, seed, total_updates, evaluator)
    eval_env.close()
    return metrics["eval/distance_ratio"]


def _pendulum_return(seed: int, total_updates: int) -> float:
    eval_env = make("typedrl/Pendulum-v0", num_envs=EVAL_EPISODES, seed=EVAL_SEED)
    evaluator = EpisodeEvaluator(eval_env, num_episodes=EVAL_EPISODES, seed=EVAL_SEED)
    metrics = _train("typedrl/Pendulum-v0", seed, total_updates, evaluator)
    eval_env.close()
    return metrics["eval/return_mean"]


def test_goal_distance_evaluator_scores_a_still_policy_at_one() -> None:
    """A policy that never pushes ends where it started: a distance ratio of 1."""
    env = make("typedrl/PointMass-v0", num_envs=8, seed=0)
    evaluator = GoalDistanceEvaluator(env, offset_columns=slice(4, 6), seed=0)
    result = evaluator.evaluate(ConstantPolicy(torch.zeros(2)))
    assert result.num_items == 8
    assert result.metrics["distance_ratio"] == pytest.approx(1.0)
    assert result.metrics["return_mean"] < 0.0


def test_point_mass_reaches_the_goal_in_30_updates() -> None:
    """PointMass, seed 0: the final distance is < 10% of the initial one after 30 updates."""
    ratio = _distance_ratio("typedrl/PointMass-v0", 0, 30)
    assert ratio < 0.1, ratio


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_mass_reaches_the_goal_on_three_seeds(seed: int) -> None:
    """PointMass: distance ratio < 0.1 within 40 updates (81,920 env steps) on every seed."""
    ratio = _distance_ratio("typedrl/PointMass-v0", seed, 40)
    assert ratio < 0.1, ratio


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reacher_reaches_the_goal_on_three_seeds(seed: int) -> None:
    """Reacher: distance ratio < 0.1 within 600 updates (1,228,800 env steps) on every seed."""
    ratio = _distance_ratio("typedrl/Reacher-v0", seed, 600)
    assert ratio < 0.1, ratio


@pytest.mark.slow
def test_pendulum_swings_up_on_two_of_three_seeds() -> None:
    """Pendulum: deterministic return >= -200 after 600 updates on at least 2 of 3 seeds."""
    returns = [_pendulum_return(seed, 600) for seed in (0, 1, 2)]
    assert sum(value >= -200.0 for value in returns) >= 2, returns

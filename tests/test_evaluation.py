"""Tests for typedrl.evaluation: EpisodeEvaluator and pool_evaluations."""

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl import EvaluationResult
from typedrl.envs import GymnasiumVecEnv, make
from typedrl.errors import ConfigError, EnvContractError, NonFiniteError
from typedrl.evaluation import EpisodeEvaluator, pool_evaluations
from typedrl.policies import RecurrentActorCritic
from typedrl.protocols import Evaluator, StepResult
from typedrl.testing import (
    ConstantPolicy,
    CountingVecEnv,
    LinearActorCritic,
    RandomEndsVectorEnv,
    VecEnvWrapper,
)


def test_counts_exactly_n_episodes_without_favouring_rows() -> None:
    """Short-episode rows cannot crowd out long ones: each row has a fixed quota."""
    env = CountingVecEnv(num_envs=2, terminate_after=[1, 5])
    evaluator = EpisodeEvaluator(env, num_episodes=4)
    assert isinstance(evaluator, Evaluator)
    result = evaluator.evaluate(ConstantPolicy(torch.zeros(1)))
    assert result.num_items == 4
    # Row 0 episodes return 1, row 1 episodes return 1+2+3+4+5 = 15; two of each.
    assert result.score == pytest.approx(8.0)
    assert result.metrics["return_min"] == 1.0
    assert result.metrics["return_max"] == 15.0
    assert result.metrics["length_mean"] == pytest.approx(3.0)


def test_remainder_rows_are_seeded_and_fixed() -> None:
    """With N not divisible by num_envs, the extra episodes go to a fixed seeded set of rows."""
    env = CountingVecEnv(num_envs=4, terminate_after=[1, 2, 3, 4])
    evaluator = EpisodeEvaluator(env, num_episodes=6, seed=3)
    first = evaluator.evaluate(ConstantPolicy(torch.zeros(1)))
    again = evaluator.evaluate(ConstantPolicy(torch.zeros(1)))
    assert first.num_items == 6
    assert first.metrics == again.metrics


def test_same_starts_every_evaluation_and_mode_restored() -> None:
    """Evaluations of the same policy give identical scores; train mode is restored."""
    env = make("Pendulum-v1", num_envs=2)
    evaluator = EpisodeEvaluator(env, num_episodes=2, seed=11)
    torch.manual_seed(0)
    policy = LinearActorCritic(obs_dim=3, act_dim=1).train()
    first = evaluator.evaluate(policy)
    second = evaluator.evaluate(policy)
    assert first.score == second.score
    assert policy.training
    env.close()


def test_ghost_steps_count_for_nothing() -> None:
    """Ghost transitions of next-step envs add neither reward nor length."""
    raw = RandomEndsVectorEnv(num_envs=2, terminate_prob=0.0, max_steps=3)
    evaluator = EpisodeEvaluator(GymnasiumVecEnv(raw), num_episodes=4)
    result = evaluator.evaluate(ConstantPolicy(torch.tensor(0)))
    # Each episode: rewards 1 + 2 + 3 = 6 over 3 steps; ghost steps excluded.
    assert result.score == pytest.approx(6.0)
    assert result.metrics["length_mean"] == pytest.approx(3.0)


class _SuccessEnv(gym.Env[object, object]):
    """Episodes of one step that succeed on even episode indices."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1, 1, (1,))
        self.action_space = gym.spaces.Discrete(2)
        self._episode = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[object, dict[str, object]]:
        super().reset(seed=seed)
        if seed is not None:
            self._episode = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: object) -> tuple[object, float, bool, bool, dict[str, object]]:
        success = self._episode % 2 == 0
        self._episode += 1
        return np.zeros(1, np.float32), 1.0, True, False, {"is_success": success}


def test_success_rate_from_final_info() -> None:
    """Envs that report is_success get a success_rate metric."""
    raw = gym.vector.SyncVectorEnv([_SuccessEnv], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    evaluator = EpisodeEvaluator(GymnasiumVecEnv(raw), num_episodes=4)
    result = evaluator.evaluate(ConstantPolicy(torch.tensor(0)))
    assert result.metrics["success_rate"] == pytest.approx(0.5)


def test_errors() -> None:
    """Bad configs and never-ending envs raise typedrl errors."""
    with pytest.raises(ConfigError, match="num_episodes"):
        EpisodeEvaluator(CountingVecEnv(num_envs=1), num_episodes=0)
    evaluator = EpisodeEvaluator(CountingVecEnv(num_envs=1), num_episodes=1, max_steps=16)
    with pytest.raises(EnvContractError, match="only 0 of 1 episodes"):
        evaluator.evaluate(ConstantPolicy(torch.zeros(1)))


def test_completion_is_checked_before_giving_up() -> None:
    """Episodes that all end just before max_steps are not reported as missing."""
    env = CountingVecEnv(num_envs=1, truncate_after=3)
    result = EpisodeEvaluator(env, num_episodes=1, max_steps=5).evaluate(
        ConstantPolicy(torch.zeros(1))
    )
    assert result.num_items == 1


class _NaNRewards(VecEnvWrapper):
    """Every reward NaN (a torch env, which checks no values of its own)."""

    def step(self, action: torch.Tensor) -> StepResult:
        result = self.env.step(action)
        return StepResult(
            result.obs,
            torch.full_like(result.reward, math.nan),
            result.terminated,
            result.truncated,
            result.info,
            final_obs=result.final_obs,
            valid=result.valid,
        )


def test_non_finite_returns_raise_non_finite_error() -> None:
    """An eval env with NaN rewards raises NonFiniteError naming the metric."""
    env = _NaNRewards(CountingVecEnv(num_envs=1, terminate_after=2))
    evaluator = EpisodeEvaluator(env, num_episodes=1)
    with pytest.raises(NonFiniteError, match="return_mean"):
        evaluator.evaluate(ConstantPolicy(torch.zeros(1)))


def test_a_gymnasium_env_s_nan_reward_stops_evaluation_at_its_step() -> None:
    """Through the Gymnasium adapter, a NaN reward raises at the step that returned it."""

    class _NaNEnv(gym.Env[np.ndarray, np.int64]):
        def __init__(self) -> None:
            self.observation_space = gym.spaces.Box(-1, 1, (1,))
            self.action_space = gym.spaces.Discrete(2)

        def reset(
            self, *, seed: int | None = None, options: dict[str, object] | None = None
        ) -> tuple[np.ndarray, dict[str, object]]:
            super().reset(seed=seed)
            return np.zeros(1, np.float32), {}

        def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, object]]:
            return np.zeros(1, np.float32), float("nan"), True, False, {}

    raw = gym.vector.SyncVectorEnv([_NaNEnv], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    evaluator = EpisodeEvaluator(GymnasiumVecEnv(raw), num_episodes=1)
    with pytest.raises(NonFiniteError, match=r"\(step 1\): reward of row 0 is nan"):
        evaluator.evaluate(ConstantPolicy(torch.tensor(0)))


# ---------------------------------------------------------------- pool_evaluations


def _episodes(returns: Sequence[float]) -> EvaluationResult:
    """The result EpisodeEvaluator reports for these episode returns (lengths = returns)."""
    values = torch.tensor(returns, dtype=torch.float64)
    metrics = {
        "return_mean": float(values.mean()),
        "return_std": float(values.std(unbiased=False)),
        "return_min": float(values.min()),
        "return_max": float(values.max()),
        "length_mean": float(values.mean()),
    }
    return EvaluationResult(metrics=metrics, score=metrics["return_mean"], num_items=len(returns))


def test_pool_of_one_result_is_that_result() -> None:
    """A single result (one rank) is returned unchanged."""
    result = _episodes([1.0, 4.0])
    assert pool_evaluations([result]) is result
    assert pool_evaluations((result,)) is result


def test_pooled_statistics_equal_those_of_all_episodes() -> None:
    """Returns [1, 3] and [5]: mean 3, std sqrt(8/3) (ddof 0), min 1, max 5, 3 episodes."""
    pooled = pool_evaluations([_episodes([1.0, 3.0]), _episodes([5.0])])
    assert pooled.num_items == 3
    assert pooled.score == pytest.approx(3.0)
    assert dict(pooled.metrics) == pytest.approx(
        {
            "return_mean": 3.0,
            "return_std": math.sqrt(8.0 / 3.0),
            "return_min": 1.0,
            "return_max": 5.0,
            "length_mean": 3.0,
        }
    )
    assert list(pooled.metrics) == list(_episodes([1.0]).metrics)


def test_means_and_scores_are_weighted_by_num_items() -> None:
    """One episode scoring 1 and three scoring 4 pool to 3.25, not to 2.5."""
    one = EvaluationResult(metrics={"success_rate": 1.0}, score=1.0, num_items=1)
    three = EvaluationResult(metrics={"success_rate": 0.0}, score=4.0, num_items=3)
    pooled = pool_evaluations([one, three])
    assert pooled.score == 3.25
    assert pooled.metrics["success_rate"] == 0.25
    assert pooled.num_items == 4
    assert pool_evaluations([three, one]).score == 3.25


def test_extremes_come_from_any_result() -> None:
    """*_min is the minimum and *_max the maximum over the results, whatever their weights."""
    small = EvaluationResult(metrics={"x_min": -7.0, "x_max": 1.0}, score=0.0, num_items=1)
    large = EvaluationResult(metrics={"x_min": 0.0, "x_max": 9.0}, score=0.0, num_items=100)
    pooled = pool_evaluations([large, small, large])
    assert dict(pooled.metrics) == {"x_min": -7.0, "x_max": 9.0}
    assert pooled.num_items == 201


def test_a_std_without_its_mean_is_averaged() -> None:
    """A *_std metric without its *_mean sibling is pooled as a weighted mean."""
    a = EvaluationResult(metrics={"noise_std": 1.0}, score=0.0, num_items=1)
    b = EvaluationResult(metrics={"noise_std": 3.0}, score=0.0, num_items=3)
    assert pool_evaluations([a, b]).metrics["noise_std"] == 2.5


def test_identical_results_pool_to_the_same_statistics() -> None:
    """Pooling a result with itself keeps every statistic (the std does not grow)."""
    result = _episodes([2.0, 4.0, 9.0])
    pooled = pool_evaluations([result, result, result])
    assert dict(pooled.metrics) == pytest.approx(dict(result.metrics))
    assert pooled.num_items == 9


def test_metrics_missing_from_a_result_are_left_out() -> None:
    """Only the metrics every result reports are pooled."""
    with_success = EvaluationResult(
        metrics={"return_mean": 1.0, "success_rate": 1.0}, score=1.0, num_items=1
    )
    without = EvaluationResult(metrics={"return_mean": 3.0, "extra": 5.0}, score=3.0, num_items=1)
    pooled = pool_evaluations([with_success, without])
    assert dict(pooled.metrics) == {"return_mean": 2.0}


def test_pooled_episode_evaluators_equal_the_statistics_of_all_their_episodes() -> None:
    """Two EpisodeEvaluators (two ranks) pool to the statistics of their 7 episodes together."""
    policy = ConstantPolicy(torch.zeros(1))
    # Rank 0: rows ending at t = 1 and 3, two episodes each: returns 1, 1, 6, 6.
    first = EpisodeEvaluator(CountingVecEnv(num_envs=2, terminate_after=[1, 3]), num_episodes=4)
    # Rank 1: one row ending at t = 4, three episodes: returns 10, 10, 10.
    second = EpisodeEvaluator(CountingVecEnv(num_envs=1, terminate_after=4), num_episodes=3)
    pooled = pool_evaluations([first.evaluate(policy), second.evaluate(policy)])
    returns = torch.tensor([1.0, 1.0, 6.0, 6.0, 10.0, 10.0, 10.0], dtype=torch.float64)
    lengths = torch.tensor([1.0, 1.0, 3.0, 3.0, 4.0, 4.0, 4.0], dtype=torch.float64)
    assert pooled.num_items == 7
    assert pooled.score == pytest.approx(float(returns.mean()))
    assert dict(pooled.metrics) == pytest.approx(
        {
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std(unbiased=False)),
            "return_min": 1.0,
            "return_max": 10.0,
            "length_mean": float(lengths.mean()),
        },
        rel=1e-12,
    )


def test_a_recurrent_policy_carries_its_state() -> None:
    """The evaluator steps a recurrent policy with its state, restarted when a row ends."""
    torch.manual_seed(0)
    env = make("typedrl/CartPole-v0", num_envs=2, seed=0)
    policy = RecurrentActorCritic(env.single_observation_space, env.single_action_space)
    result = EpisodeEvaluator(env, num_episodes=2, seed=7).evaluate(policy)
    # The same episodes by hand: the state carried, zeroed after a row's episode ends.
    obs, _ = env.reset(seed=7)
    state = policy.initial_state(2, device=torch.device("cpu"))
    running, first = torch.zeros(2, dtype=torch.float64), [0.0, 0.0]
    ended = [False, False]
    with torch.no_grad():
        while not all(ended):
            out = policy.act_step(obs, state, deterministic=True)
            step = env.step(out["action"])
            running += step.reward.double()
            for row in range(2):
                if bool(step.done[row]) and not ended[row]:
                    ended[row], first[row] = True, float(running[row])
            running = torch.where(step.done, 0.0, running)
            state = out["state"].apply(lambda x, d=step.done: x * (~d).view(-1, 1, 1))
            obs = step.obs
    assert result.metrics["return_mean"] == pytest.approx(sum(first) / 2)

"""Tests for typedrl.evaluation.EpisodeEvaluator."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.envs import GymnasiumVecEnv, make
from typedrl.errors import ConfigError, EnvContractError, NonFiniteError
from typedrl.evaluation import EpisodeEvaluator
from typedrl.protocols import Evaluator
from typedrl.testing import ConstantPolicy, CountingVecEnv, LinearActorCritic, RandomEndsVectorEnv


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
    with pytest.raises(ConfigError, match="VecEnv"):
        EpisodeEvaluator(object(), num_episodes=1)  # type: ignore[arg-type]
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


def test_non_finite_returns_raise_non_finite_error() -> None:
    """An eval env with NaN rewards raises NonFiniteError naming the metric."""

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
    with pytest.raises(NonFiniteError, match="return_mean"):
        evaluator.evaluate(ConstantPolicy(torch.tensor(0)))

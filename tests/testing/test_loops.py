"""Tests for typedrl.testing.TransitionCollector and EpisodeReturnEvaluator."""

import pytest
import torch

from typedrl.errors import ConfigError
from typedrl.testing import (
    ConstantPolicy,
    CountingVecEnv,
    EpisodeReturnEvaluator,
    TransitionCollector,
)


def test_collector_continues_episodes_across_calls() -> None:
    """A second collect call continues from where the first stopped."""
    collector = TransitionCollector(CountingVecEnv(num_envs=1, truncate_after=3))
    policy = ConstantPolicy(torch.zeros(1))
    first = collector.collect(policy, num_steps=2)
    second = collector.collect(policy, num_steps=2)
    counters = [int(t.obs["obs"][0, 0]) for t in first + second]
    assert counters == [0, 1, 2, 0]
    assert second[0].result.truncated.tolist() == [True]
    with pytest.raises(ConfigError, match="num_steps"):
        collector.collect(policy, num_steps=0)


def test_evaluator_counts_rows_equally_and_restores_mode() -> None:
    """Each row contributes the same number of episodes; the policy's mode is restored."""
    env = CountingVecEnv(num_envs=2, terminate_after=[2, 4])
    evaluator = EpisodeReturnEvaluator(env, num_episodes=4)
    policy = ConstantPolicy(torch.zeros(1)).train()
    result = evaluator.evaluate(policy)
    assert policy.training
    # Row 0 episodes return 1+2 = 3, row 1 episodes return 1+2+3+4 = 10.
    assert result.num_items == 4
    assert result.score == pytest.approx(6.5)
    assert result.metrics["length_mean"] == pytest.approx(3.0)
    assert evaluator.evaluate(policy.eval()).score == result.score
    assert not policy.training


def test_evaluator_rejects_bad_config_and_endless_envs() -> None:
    """Episode counts must divide evenly; an env that never ends is reported."""
    with pytest.raises(ConfigError, match="multiple of num_envs"):
        EpisodeReturnEvaluator(CountingVecEnv(num_envs=2), num_episodes=3)
    evaluator = EpisodeReturnEvaluator(CountingVecEnv(num_envs=1), num_episodes=1, max_steps=5)
    with pytest.raises(ConfigError, match="only 0 of 1 episodes finished within max_steps=5"):
        evaluator.evaluate(ConstantPolicy(torch.zeros(1)))

"""Property tests: pooling per-rank evaluations equals evaluating all their episodes together."""

import math
import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from typedrl import EvaluationResult
from typedrl.evaluation import pool_evaluations

_returns = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)
_rank_returns = st.lists(st.lists(_returns, min_size=1, max_size=12), min_size=1, max_size=6)
"""Episode returns per rank: one to six ranks, each with one to twelve episodes."""


def _summary(returns: list[float], successes: list[bool]) -> EvaluationResult:
    """What EpisodeEvaluator reports for these episodes (float64, std with ddof 0)."""
    values = torch.tensor(returns, dtype=torch.float64)
    metrics = {
        "return_mean": float(values.mean()),
        "return_std": float(values.std(unbiased=False)),
        "return_min": float(values.min()),
        "return_max": float(values.max()),
        "length_mean": float(values.abs().mean()),
        "success_rate": float(torch.tensor(successes, dtype=torch.float64).mean()),
    }
    return EvaluationResult(metrics=metrics, score=metrics["return_mean"], num_items=len(returns))


def _successes(returns: list[float]) -> list[bool]:
    return [value > 0.0 for value in returns]


def _close(actual: float, expected: float) -> bool:
    return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-9)


@given(per_rank=_rank_returns)
def test_pooled_results_equal_the_statistics_of_all_episodes(per_rank: list[list[float]]) -> None:
    """Mean, std (ddof 0), min, max, means and rates of the pool match all episodes at once."""
    pooled = pool_evaluations([_summary(returns, _successes(returns)) for returns in per_rank])
    every = [value for returns in per_rank for value in returns]
    together = _summary(every, _successes(every))
    assert pooled.num_items == together.num_items == len(every)
    assert list(pooled.metrics) == list(together.metrics)
    for name, value in together.metrics.items():
        assert _close(pooled.metrics[name], value), (name, pooled.metrics[name], value)
    assert _close(pooled.score, together.score)
    # Extremes are taken, never averaged: exactly one of the episodes.
    assert pooled.metrics["return_min"] == min(every)
    assert pooled.metrics["return_max"] == max(every)


@given(per_rank=_rank_returns, seed=st.integers(0, 2**32 - 1))
def test_pooling_ignores_the_order_of_the_ranks(per_rank: list[list[float]], seed: int) -> None:
    """Any order of the per-rank results pools to the same statistics."""
    results = [_summary(returns, _successes(returns)) for returns in per_rank]
    shuffled = list(results)
    random.Random(seed).shuffle(shuffled)
    first, second = pool_evaluations(results), pool_evaluations(shuffled)
    assert first.num_items == second.num_items
    assert dict(second.metrics) == pytest.approx(dict(first.metrics), rel=1e-9, abs=1e-9)


@given(per_rank=_rank_returns)
def test_pooling_pools_of_ranks_equals_pooling_every_rank(per_rank: list[list[float]]) -> None:
    """Pooling two pools (two nodes) gives the pool of all ranks (within rounding)."""
    results = [_summary(returns, _successes(returns)) for returns in per_rank]
    half = max(1, len(results) // 2)
    nested = [pool_evaluations(results[:half])]
    if results[half:]:
        nested.append(pool_evaluations(results[half:]))
    flat = pool_evaluations(results)
    assert pool_evaluations(nested).num_items == flat.num_items
    assert dict(pool_evaluations(nested).metrics) == pytest.approx(
        dict(flat.metrics), rel=1e-9, abs=1e-9
    )


@given(returns=st.lists(_returns, min_size=1, max_size=12), copies=st.integers(2, 5))
def test_a_rank_weighs_by_its_episodes(returns: list[float], copies: int) -> None:
    """A rank with k times the episodes counts k times: pooled with a peer, it pulls the mean."""
    result = _summary(returns, _successes(returns))
    repeated = _summary(returns * copies, _successes(returns * copies))
    peer = _summary([0.0], [False])
    pooled = pool_evaluations([repeated, peer])
    expected = (copies * math.fsum(returns)) / (copies * len(returns) + 1)
    assert _close(pooled.metrics["return_mean"], expected)
    assert pooled.num_items == copies * result.num_items + 1

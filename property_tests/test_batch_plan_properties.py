"""Property tests: the DDP minibatch-count check agrees or fails on every rank, never hangs."""

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from property_tests.rank_pair import RankPair
from typedrl.buffers import validate_batch_plan
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError
from typedrl.ppo._batch_plan import agree_on_batch_plan


@dataclass(frozen=True)
class _PlanJob:
    """Per-rank (num_envs, num_steps, num_mini_epochs, batch_size)."""

    plans: tuple[tuple[int, int, int, int], tuple[int, int, int, int]]

    def run(self, rank: int, dist: Distributed) -> Any:
        num_envs, num_steps, num_mini_epochs, batch_size = self.plans[rank]
        return agree_on_batch_plan(
            num_envs=num_envs,
            num_steps=num_steps,
            num_mini_epochs=num_mini_epochs,
            batch_size=batch_size,
            dist=dist,
        )


def _local_count(plan: tuple[int, int, int, int]) -> int | None:
    num_envs, num_steps, num_mini_epochs, batch_size = plan
    try:
        return validate_batch_plan(
            num_envs=num_envs,
            num_steps=num_steps,
            num_mini_epochs=num_mini_epochs,
            batch_size=batch_size,
        )
    except ConfigError:
        return None


_plan = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 3), st.integers(1, 40))


@pytest.mark.distributed
@settings(max_examples=25, deadline=None)
@given(plans=st.tuples(_plan, _plan))
def test_every_rank_agrees_or_every_rank_fails(
    rank_pair: RankPair, plans: tuple[tuple[int, int, int, int], tuple[int, int, int, int]]
) -> None:
    """Equal valid counts return that count on both ranks; anything else raises on both."""
    replies = rank_pair.run(_PlanJob(plans=plans))
    counts = [_local_count(plan) for plan in plans]
    if counts[0] is not None and counts[0] == counts[1]:
        assert replies == [counts[0], counts[0]]
        return
    assert all(isinstance(reply, str) and reply.startswith("error:") for reply in replies), replies
    for rank, reply in enumerate(replies):
        expected = "ConfigError" if counts[rank] is None else "DistributedError"
        assert expected in reply, (rank, reply)

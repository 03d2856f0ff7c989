"""Property tests: normaliser statistics do not depend on how the data is split or sharded."""

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from property_tests.rank_pair import RankPair
from typedrl.distributed import SingleProcess
from typedrl.normalization import RewardNormalizer, RunningMeanStd

DIST = SingleProcess()


def _assert_matches(rms: RunningMeanStd, data: torch.Tensor) -> None:
    """Statistics equal those of ``data`` [batch, *shape] within float64 rounding."""
    scale = 1.0 + float(data.abs().max()) if data.numel() else 1.0
    assert rms.count.item() == data.shape[0]
    torch.testing.assert_close(rms.mean, data.mean(dim=0), rtol=1e-9, atol=1e-12 * scale)
    torch.testing.assert_close(
        rms.var, data.var(dim=0, correction=0), rtol=1e-9, atol=1e-12 * scale**2
    )


# ---------------------------------------------------------------- strategies

_values = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def data_and_cuts(draw: st.DrawFn) -> tuple[torch.Tensor, list[int]]:
    """A float64 batch [rows, width] and sorted cut points splitting it into chunks."""
    rows = draw(st.integers(1, 40))
    width = draw(st.integers(1, 3))
    values = draw(st.lists(_values, min_size=rows * width, max_size=rows * width))
    data = torch.tensor(values, dtype=torch.float64).reshape(rows, width)
    cuts = sorted(draw(st.lists(st.integers(0, rows), max_size=6)))
    return data, cuts


def _chunks(data: torch.Tensor, cuts: list[int]) -> list[torch.Tensor]:
    bounds = [0, *cuts, data.shape[0]]
    return [data[start:stop] for start, stop in itertools.pairwise(bounds)]


# ---------------------------------------------------------------- single process


@given(case=data_and_cuts(), order=st.randoms(use_true_random=False))
def test_any_split_in_any_order_equals_concatenated(
    case: tuple[torch.Tensor, list[int]], order: Any
) -> None:
    """Updating chunk by chunk, in any order, gives the statistics of all the data."""
    data, cuts = case
    chunks = _chunks(data, cuts)
    order.shuffle(chunks)
    rms = RunningMeanStd(data.shape[1:])
    for chunk in chunks:
        rms.update(chunk, dist=DIST)
    _assert_matches(rms, data)


@given(case=data_and_cuts(), keep=st.lists(st.booleans(), min_size=40, max_size=40))
def test_masked_update_equals_update_of_kept_rows(
    case: tuple[torch.Tensor, list[int]], keep: list[bool]
) -> None:
    """A mask gives exactly the statistics of the rows it keeps, whatever the masked rows hold."""
    data, _ = case
    mask = torch.tensor(keep[: data.shape[0]])
    poisoned = torch.where(mask[:, None], data, torch.nan)
    rms = RunningMeanStd(data.shape[1:])
    rms.update(poisoned, dist=DIST, mask=mask)
    kept = data[mask]
    if kept.shape[0] == 0:
        assert rms.count.item() == 0
    else:
        _assert_matches(rms, kept)


@given(case=data_and_cuts())
def test_normalize_then_denormalize_is_identity(case: tuple[torch.Tensor, list[int]]) -> None:
    """Without clamping, denormalize inverts normalize."""
    data, _ = case
    rms = RunningMeanStd(data.shape[1:])
    rms.update(data, dist=DIST)
    torch.testing.assert_close(rms.denormalize(rms.normalize(data)), data, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- two gloo ranks


@dataclass(frozen=True)
class _Job:
    """One example for the rank pair: per-rank batches for a fresh normaliser."""

    kind: str  # "rms" or "reward"
    width: int  # feature width of "rms" jobs
    batches: list[list[list[list[float]]]]  # [rank][update] -> rows (or steps) of values
    masks: list[list[list[bool]]]  # [rank][update] -> per-row (or per-step-env) flags
    dones: list[list[list[bool]]]  # reward jobs: [rank][update] -> flattened flags

    def run(self, rank: int, dist: Any) -> dict[str, Any]:
        """Run this example's updates on ``rank`` and return the normaliser's state."""
        return _run_rms(self, rank, dist) if self.kind == "rms" else _run_reward(self, rank, dist)


def _run_rms(job: _Job, rank: int, dist: Any) -> dict[str, Any]:
    rms = RunningMeanStd((job.width,))
    for batch, mask in zip(job.batches[rank], job.masks[rank], strict=True):
        data = torch.tensor(batch, dtype=torch.float64).reshape(-1, job.width)
        rms.update(data, dist=dist, mask=torch.tensor(mask, dtype=torch.bool))
    return {key: value.tolist() for key, value in rms.state_dict().items()}


def _run_reward(job: _Job, rank: int, dist: Any) -> dict[str, Any]:
    norm = RewardNormalizer(gamma=0.9)
    for batch, mask, done in zip(job.batches[rank], job.masks[rank], job.dones[rank], strict=True):
        reward = torch.tensor(batch, dtype=torch.float64)
        flags = torch.tensor(done).reshape(reward.shape)
        norm.update(
            reward,
            flags,
            torch.zeros_like(flags),
            dist=dist,
            mask=torch.tensor(mask, dtype=torch.bool).reshape(flags.shape),
        )
    return {key: value.tolist() for key, value in norm.state_dict().items()}


@st.composite
def sharded_jobs(draw: st.DrawFn) -> _Job:
    """Per-rank sequences of batches (rows may differ per rank, some masked out)."""
    kind = draw(st.sampled_from(["rms", "rms", "reward"]))
    width = draw(st.integers(1, 3))
    num_updates = draw(st.integers(1, 3))
    num_envs = draw(st.integers(1, 3))
    batches: list[list[Any]] = [[], []]
    masks: list[list[Any]] = [[], []]
    dones: list[list[Any]] = [[], []]
    for rank in (0, 1):
        for _ in range(num_updates):
            if kind == "rms":
                rows = draw(st.integers(0, 6))
                cells = rows * width
                values = draw(st.lists(_values, min_size=cells, max_size=cells))
                batches[rank].append([values[i * width : (i + 1) * width] for i in range(rows)])
                size = rows
            else:
                steps = draw(st.integers(1, 4))
                size = steps * num_envs
                values = draw(st.lists(_values, min_size=size, max_size=size))
                batches[rank].append(
                    [values[i * num_envs : (i + 1) * num_envs] for i in range(steps)]
                )
            masks[rank].append(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
            dones[rank].append(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    return _Job(kind=kind, width=width, batches=batches, masks=masks, dones=dones)


def _hand_returns(job: _Job, rank: int) -> tuple[list[float], list[float]]:
    """Returns seen by one rank (kept rows, in order) and its final running returns."""
    running: list[float] = []
    seen: list[float] = []
    for batch, mask, done in zip(job.batches[rank], job.masks[rank], job.dones[rank], strict=True):
        running = running or [0.0] * len(batch[0])
        for step, rewards in enumerate(batch):
            for env, reward in enumerate(rewards):
                flat = step * len(rewards) + env
                if not mask[flat]:
                    continue
                # G_t = gamma * G_{t-1} + r_t, restarted after a done.
                running[env] = 0.9 * running[env] + reward
                seen.append(running[env])
                if done[flat]:
                    running[env] = 0.0
    return seen, running


def _pooled_rms(job: _Job) -> RunningMeanStd:
    """One process, each update pooling both ranks' batches in rank order."""
    rms = RunningMeanStd((job.width,))
    for update in range(len(job.batches[0])):
        parts = [
            torch.tensor(job.batches[rank][update], dtype=torch.float64).reshape(-1, job.width)
            for rank in (0, 1)
        ]
        keeps = [torch.tensor(job.masks[rank][update], dtype=torch.bool) for rank in (0, 1)]
        rms.update(torch.cat(parts), dist=DIST, mask=torch.cat(keeps))
    return rms


def _close(got: Any, expected: torch.Tensor) -> None:
    torch.testing.assert_close(
        torch.tensor(got, dtype=torch.float64), expected, rtol=1e-9, atol=1e-6
    )


@pytest.mark.distributed
@settings(max_examples=12, deadline=None)
@given(job=sharded_jobs())
def test_two_gloo_ranks_equal_one_process_on_pooled_data(rank_pair: RankPair, job: _Job) -> None:
    """Both ranks end with identical statistics, equal to one process updating on pooled data."""
    replies = rank_pair.run(job)
    for reply in replies:
        if isinstance(reply, str):
            pytest.fail(reply)
    if job.kind == "rms":
        # Bit-identical on both ranks: the same merge, in the same order, on the same numbers.
        assert replies[0] == replies[1]
        state = _pooled_rms(job).state_dict()
        assert replies[0]["running_count"] == state["running_count"].item()
        _close(replies[0]["running_mean"], state["running_mean"])
        _close(replies[0]["running_var"], state["running_var"])
        return
    # Reward normaliser: shared statistics are identical; running returns stay per rank.
    stats_keys = [key for key in replies[0] if key.startswith("return_stats.")]
    assert [replies[0][key] for key in stats_keys] == [replies[1][key] for key in stats_keys]
    seen: list[float] = []
    for rank in (0, 1):
        rank_seen, running = _hand_returns(job, rank)
        seen += rank_seen
        _close(replies[rank]["running_return"], torch.tensor(running, dtype=torch.float64))
    assert replies[0]["return_stats.running_count"] == len(seen)
    if seen:
        pooled = torch.tensor(seen, dtype=torch.float64)
        _close(replies[0]["return_stats.running_mean"], pooled.mean())
        _close(replies[0]["return_stats.running_var"], pooled.var(correction=0))

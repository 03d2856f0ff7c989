"""Tests for typedrl.episodes: episode statistics per rollout and the running tracker."""

import pytest
import torch

from typedrl.episodes import EpisodeTracker, epoch_episodes
from typedrl.errors import CheckpointError

CPU = torch.device("cpu")


def test_an_empty_rollout_ends_no_episode() -> None:
    """Zero steps: nothing ended, the running episodes carry on unchanged."""
    running = torch.tensor([2.0, 3.0], dtype=torch.float64)
    lengths = torch.tensor([4, 5])
    empty = torch.zeros(0, 2)
    flags = torch.zeros(0, 2, dtype=torch.bool)
    episodes = epoch_episodes(empty, flags, flags, running, lengths)
    assert episodes.returns.shape == episodes.ended.shape == (0, 2)
    assert torch.equal(episodes.return_so_far, running)
    assert torch.equal(episodes.length_so_far, lengths)


def test_tracker_carries_episodes_across_rollouts_and_restarts() -> None:
    """An episode spanning two rollouts is counted whole; restart() zeroes the running ones."""
    tracker = EpisodeTracker(num_envs=1, device=CPU)
    ones = torch.ones(2, 1)
    valid = torch.ones(2, 1, dtype=torch.bool)
    tracker.update(ones, torch.zeros(2, 1, dtype=torch.bool), valid)
    episodes = tracker.update(ones, torch.tensor([[False], [True]]), valid)
    assert episodes.returns[1, 0].item() == 4.0
    assert episodes.lengths[1, 0].item() == 4
    tracker.update(ones, torch.zeros(2, 1, dtype=torch.bool), valid)
    tracker.restart()
    assert tracker.return_so_far.item() == 0.0


def test_tracker_state_round_trip_and_shape_check() -> None:
    """state_dict round-trips; another num_envs is refused by key and shape."""
    tracker = EpisodeTracker(num_envs=2, device=CPU)
    tracker.update(
        torch.ones(3, 2), torch.zeros(3, 2, dtype=torch.bool), torch.ones(3, 2, dtype=torch.bool)
    )
    restored = EpisodeTracker(num_envs=2, device=CPU)
    restored.load_state_dict(tracker.state_dict())
    assert torch.equal(restored.return_so_far, tracker.return_so_far)
    with pytest.raises(CheckpointError, match=r"'episode_return' must be a tensor of shape \[5\]"):
        EpisodeTracker(num_envs=5, device=CPU).load_state_dict(tracker.state_dict())

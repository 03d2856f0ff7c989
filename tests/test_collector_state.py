"""Tests for typedrl._collector_state: a collector's checkpointable state."""

import pytest
import torch

from typedrl._collector_state import collector_state_dict, load_collector_state
from typedrl.envs.builtin import PointMass
from typedrl.episodes import EpisodeTracker
from typedrl.errors import CheckpointError
from typedrl.testing import VecEnvWrapper

_CPU = torch.device("cpu")


def test_round_trip_restores_env_observation_and_episodes() -> None:
    """The env's state, a graph-free observation and the running episodes come back."""
    env = PointMass(num_envs=2, seed=0)
    obs, _ = env.reset()
    tracker = EpisodeTracker(num_envs=2, device=_CPU)
    tracker.update(torch.ones(3, 2), torch.zeros(3, 2, dtype=torch.bool), torch.ones(3, 2).bool())
    state = collector_state_dict(env, obs, tracker)
    other_env = PointMass(num_envs=2, seed=5)
    other = EpisodeTracker(num_envs=2, device=_CPU)
    restored = load_collector_state(other_env, state, other)
    assert restored is not None
    assert torch.equal(restored["obs"], obs["obs"])
    assert other.length_so_far.tolist() == [3, 3]
    assert torch.equal(other_env.detach_state()["obs"], obs["obs"])


def test_no_observation_or_an_empty_state_asks_for_a_reset() -> None:
    """Without an observation, or from an empty state, the collector must reset."""
    env = PointMass(num_envs=2, seed=0)
    env.reset()
    tracker = EpisodeTracker(num_envs=2, device=_CPU)
    state = collector_state_dict(env, None, tracker)
    assert "obs" not in state
    assert load_collector_state(env, state, tracker) is None
    assert load_collector_state(env, {}, tracker) is None


def test_an_observation_of_another_num_envs_is_refused() -> None:
    """An observation with the wrong number of rows raises CheckpointError."""
    env = PointMass(num_envs=2, seed=0)
    obs, _ = env.reset()
    tracker = EpisodeTracker(num_envs=2, device=_CPU)
    state = collector_state_dict(env, obs, tracker)
    state["obs"] = {"obs": torch.zeros(3, 6)}
    with pytest.raises(CheckpointError, match="'obs' must hold tensors with 2 rows"):
        load_collector_state(env, state, tracker)


def test_a_wrapped_env_saves_and_restores_its_state() -> None:
    """Through a wrapper the env's state is saved, not silently dropped (a resume continues it)."""
    env = VecEnvWrapper(PointMass(num_envs=2, seed=0))
    obs, _ = env.reset()
    tracker = EpisodeTracker(num_envs=2, device=_CPU)
    state = collector_state_dict(env, obs, tracker)
    assert state["env"].keys() == PointMass(num_envs=2).state_dict().keys()
    other_env = VecEnvWrapper(PointMass(num_envs=2, seed=5))
    restored = load_collector_state(other_env, state, EpisodeTracker(num_envs=2, device=_CPU))
    assert restored is not None
    action = torch.full((2, 2), 0.3)
    assert torch.equal(other_env.step(action).reward, env.step(action).reward)

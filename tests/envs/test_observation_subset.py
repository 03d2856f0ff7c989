"""Tests for typedrl.envs._observation_subset.KeepObservationIndices."""

import gymnasium as gym
import numpy as np
import pytest

from typedrl.envs import KeepObservationIndices, make
from typedrl.errors import ConfigError


def test_keeps_the_named_entries_in_order() -> None:
    """CartPole with indices [2, 0] observes the pole angle, then the cart position."""
    full = gym.make("CartPole-v1")
    masked = KeepObservationIndices(gym.make("CartPole-v1"), indices=[2, 0])
    obs_full, _ = full.reset(seed=3)
    obs, _ = masked.reset(seed=3)
    assert masked.observation_space.shape == (2,)
    np.testing.assert_array_equal(obs, obs_full[[2, 0]])
    assert masked.observation_space.contains(obs)


def test_through_make_as_a_wrapper_spec() -> None:
    """The CLI's --wrapper spelling hides CartPole's velocities."""
    env = make(
        "CartPole-v1",
        num_envs=2,
        seed=0,
        wrappers=["typedrl.envs:KeepObservationIndices(indices=[0, 2])"],
    )
    obs, _ = env.reset(seed=0)
    assert obs["obs"].shape == (2, 2)
    env.close()


@pytest.mark.parametrize(
    ("indices", "message"),
    [([0, 0], r"distinct entries of \[0, 4\), got \[0, 0\]"), ([4], r"got \[4\]"), ([], "got")],
)
def test_bad_indices_are_one_line(indices: list[int], message: str) -> None:
    """Repeated, out-of-range or no indices are refused."""
    with pytest.raises(ConfigError, match=message):
        KeepObservationIndices(gym.make("CartPole-v1"), indices=indices)


def test_needs_a_flat_box() -> None:
    """A Discrete observation space has no entries to keep."""
    with pytest.raises(ConfigError, match="needs a 1-D Box observation space, got Discrete"):
        KeepObservationIndices(gym.make("FrozenLake-v1"), indices=[0])

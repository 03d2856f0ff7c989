"""gymnasium.make_vec on the built-in ids: every vectorization mode, Gymnasium's vector wrappers."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import (
    ClipAction,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
)

from typedrl.envs.builtin import (
    BUILTIN_ENV_IDS,
    GymnasiumVectorView,
    NumpyVectorView,
    _gymnasium_entry_points,
)
from typedrl.envs.builtin._registration import NEWTON_ENV_IDS
from typedrl.errors import ConfigError


@pytest.mark.parametrize("env_id", BUILTIN_ENV_IDS + NEWTON_ENV_IDS)
def test_every_registered_entry_point_resolves(env_id: str) -> None:
    """Both string entry points of every id name a creator in the entry-points module."""
    spec = gym.spec(env_id)
    assert isinstance(spec.entry_point, str)
    assert isinstance(spec.vector_entry_point, str)
    single = load_env_creator(spec.entry_point)
    vector = load_env_creator(spec.vector_entry_point)
    assert isinstance(single, _gymnasium_entry_points.EnvCreator)
    assert isinstance(vector, _gymnasium_entry_points.VectorEnvCreator)
    assert spec.to_json()


def test_make_vec_defaults_to_numpy_through_the_vector_entry_point() -> None:
    """The default mode is the batched view with NumPy arrays and the registered time limit."""
    envs = gym.make_vec("typedrl/CartPole-v0", num_envs=4, seed=0)
    assert isinstance(envs, NumpyVectorView)
    assert envs.torch_env.max_episode_steps == 500
    obs, info = envs.reset(seed=0)
    assert isinstance(obs, np.ndarray)
    assert obs.shape == (4, 4)
    assert obs.dtype == np.float32
    assert info == {}
    obs, reward, terminated, truncated, info = envs.step(np.array([0, 1, 0, 1]))
    assert reward.tolist() == [1.0, 1.0, 1.0, 1.0]
    assert terminated.dtype == np.bool_
    assert truncated.dtype == np.bool_
    assert info == {}
    envs.close()


def test_torch_tensors_on_request() -> None:
    """array_type="torch" gives the zero-copy tensor view; an unknown array type is refused."""
    envs = gym.make_vec("typedrl/PointMass-v0", num_envs=2, array_type="torch")
    assert isinstance(envs, GymnasiumVectorView)
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, torch.Tensor)
    with pytest.raises(ConfigError, match="array_type must be 'numpy' or 'torch'"):
        gym.make_vec("typedrl/PointMass-v0", num_envs=2, array_type="jax")


def test_final_obs_follows_gymnasiums_same_step_convention() -> None:
    """Rows that end: an object array of terminal observations (None elsewhere) and its mask."""
    envs = gym.make_vec("typedrl/CartPole-v0", num_envs=2, seed=0)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    envs.reset(seed=0)
    # Row 0 pushes right until its pole falls; row 1 alternates and stays up meanwhile.
    step = 0
    obs, _, terminated, _, info = envs.step(np.array([1, 0]))
    while not terminated.any():
        step += 1
        obs, _, terminated, _, info = envs.step(np.array([1, step % 2]))
    assert terminated.tolist() == [True, False]
    assert info["_final_obs"].tolist() == [True, False]
    final_obs = info["final_obs"]
    assert final_obs.dtype == object
    assert final_obs[1] is None
    assert abs(float(final_obs[0][2])) > 0.2094
    assert abs(float(obs[0, 2])) <= 0.05
    envs.close()


@pytest.mark.parametrize("mode", ["vector_entry_point", "sync", "async"])
def test_gymnasiums_vector_wrappers_take_every_mode(mode: str) -> None:
    """RecordEpisodeStatistics, NormalizeReward and ClipAction record exact episode lengths."""
    envs = gym.make_vec(
        "typedrl/Pendulum-v0", num_envs=2, vectorization_mode=mode, max_episode_steps=5
    )
    wrapped = RecordEpisodeStatistics(NormalizeReward(ClipAction(envs)))
    obs, _ = wrapped.reset(seed=0)
    assert isinstance(obs, np.ndarray)
    lengths = []
    # Two episodes in 12 steps either way (next-step autoreset spends a step on the reset).
    for _ in range(12):
        # Out-of-range torques: ClipAction clips them to [-2, 2].
        obs, reward, _, truncated, info = wrapped.step(np.full((2, 1), 5.0, dtype=np.float32))
        assert isinstance(reward, np.ndarray)
        if "episode" in info:
            assert truncated.all()
            lengths.append(info["episode"]["l"].tolist())
    assert lengths == [[5, 5], [5, 5]]
    assert obs in wrapped.observation_space
    wrapped.close()


def test_normalize_observation_takes_the_sync_mode() -> None:
    """Gymnasium's vector NormalizeObservation needs next-step autoreset: sync mode gives it."""
    envs = NormalizeObservation(
        gym.make_vec("typedrl/PointMass-v0", num_envs=2, vectorization_mode="sync")
    )
    envs.reset(seed=0)
    obs, *_ = envs.step(envs.action_space.sample())
    assert obs.dtype == np.float32
    envs.close()
    with pytest.raises(ValueError, match="NEXT_STEP"):
        NormalizeObservation(gym.make_vec("typedrl/PointMass-v0", num_envs=2))


def test_sync_rows_match_the_single_env() -> None:
    """make_vec(..., "sync") row i is gymnasium.make's env reset with seed + i."""
    envs = gym.make_vec("typedrl/Reacher-v0", num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=3)
    single = gym.make("typedrl/Reacher-v0")
    np.testing.assert_array_equal(obs[1], single.reset(seed=4)[0])
    envs.close()

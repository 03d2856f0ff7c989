"""Gymnasium registration of the built-in envs and make_builtin."""

import warnings

import gymnasium as gym
import pytest
import torch

from typedrl.envs.builtin import (
    BUILTIN_ENV_IDS,
    CartPole,
    GymnasiumVectorView,
    _registration,
    make_builtin,
    register_builtin_envs,
)
from typedrl.errors import ConfigError


@pytest.mark.parametrize("env_id", BUILTIN_ENV_IDS)
def test_make_vec_builds_every_builtin(env_id: str) -> None:
    """make_vec with array_type="torch" returns a torch view with the spec's time limit."""
    envs = gym.make_vec(
        env_id, num_envs=3, vectorization_mode="vector_entry_point", seed=1, array_type="torch"
    )
    assert isinstance(envs, GymnasiumVectorView)
    assert envs.spec is not None
    assert envs.spec.id == env_id
    assert envs.torch_env.max_episode_steps == gym.spec(env_id).max_episode_steps
    obs, _ = envs.reset()
    assert isinstance(obs, torch.Tensor)
    assert obs.shape[0] == 3
    envs.step(envs.action_space.sample())
    envs.close()


def test_registration_is_idempotent() -> None:
    """Registering again neither warns nor replaces the specs."""
    before = {env_id: gym.spec(env_id) for env_id in BUILTIN_ENV_IDS}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register_builtin_envs()
    assert all(gym.spec(env_id) is before[env_id] for env_id in BUILTIN_ENV_IDS)


def test_make_builtin_by_id_or_name() -> None:
    """Ids and bare names resolve to the native torch env with the requested options."""
    env = make_builtin("typedrl/CartPoleContinuous-v0", num_envs=2, dtype="float64", seed=0)
    assert isinstance(env, CartPole)
    assert env.action_mode == "continuous"
    assert env.dtype == torch.float64
    plain = make_builtin("CartPole", num_envs=2, max_episode_steps=10)
    assert isinstance(plain, CartPole)
    assert plain.max_episode_steps == 10
    assert set(_registration.BUILTIN_ENV_IDS) == set(BUILTIN_ENV_IDS)


def test_make_builtin_errors_list_the_valid_ids() -> None:
    """Unknown names and keywords raise ConfigError."""
    with pytest.raises(ConfigError, match="typedrl/CartPole-v0"):
        make_builtin("typedrl/Nope-v0", num_envs=1)
    with pytest.raises(ConfigError, match="unexpected"):
        make_builtin("Pendulum", num_envs=1, gravity=3.0)

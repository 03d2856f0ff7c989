"""Env factories and a wrapper that the `typedrl train ENV=module:callable` tests name."""

from typing import Any, Literal

import gymnasium as gym
import torch

from typedrl.envs import make
from typedrl.protocols import VecEnv

SMALL_RUN = [
    "--num-envs",
    "2",
    "--no-progress",
    "--eval-episodes",
    "2",
    "--set",
    "num_steps=8",
    "--set",
    "batch_size=16",
    "--set",
    "num_mini_epochs=1",
]
"""Flags of the smallest PPO run the command-line tests train (two rows, tiny updates)."""

NOT_CALLABLE = 3
"""Named by the test of a spec whose attribute cannot be called."""


def cartpole(max_episode_steps: int = 500) -> gym.Env[Any, Any]:
    """One Gymnasium CartPole with its own episode limit."""
    return gym.make("CartPole-v1", max_episode_steps=max_episode_steps)


def builtin_cartpole(*, num_envs: int, seed: int | None, device: torch.device | str) -> VecEnv:
    """A vector factory: the built-in torch CartPole."""
    return make("typedrl/CartPole-v0", num_envs=num_envs, seed=seed, device=device)


def builtin_pendulum(*, num_envs: int, float_dtype: Literal["float32", "float64"]) -> VecEnv:
    """A vector factory that takes float_dtype: the built-in torch Pendulum in that dtype."""
    return make("typedrl/Pendulum-v0", num_envs=num_envs, float_dtype=float_dtype)


def gymnasium_vector(*, num_envs: int) -> gym.vector.VectorEnv[Any, Any, Any]:
    """A vector factory returning a Gymnasium vector env (same-step autoreset)."""
    return gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def not_an_env() -> int:
    """Returns something else than an env."""
    return 7


def wrong_rows(*, num_envs: int) -> VecEnv:
    """A vector factory that ignores num_envs."""
    return make("typedrl/CartPole-v0", num_envs=num_envs + 1)


class HalveReward(gym.RewardWrapper[Any, Any]):
    """A single-env wrapper, named as module:Class."""

    def reward(self, reward: Any) -> Any:
        """Half the reward."""
        return 0.5 * float(reward)


class NeedsAbsentDependency(gym.Wrapper[Any, Any, Any, Any]):
    """A wrapper whose constructor fails as Gymnasium's do without their extra package."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        missing = ModuleNotFoundError("No module named 'fancy_vision'", name="fancy_vision")
        raise gym.error.DependencyNotInstalled(
            'fancy-vision is not installed, run `pip install "fancy-vision[gpu]"`'
        ) from missing


class ImportsAbsentModule(gym.Wrapper[Any, Any, Any, Any]):
    """A wrapper whose constructor imports a package that is not installed."""

    def __init__(self, env: gym.Env[Any, Any], *, scale: float = 1.0) -> None:
        raise ModuleNotFoundError("No module named 'absent_pkg.core'", name="absent_pkg.core")


class _PoolOfOne(gym.vector.SyncVectorEnv, gym.Env[Any, Any]):  # type: ignore[misc]
    """A vector env that also claims to be a single env, as EnvPool's envs do."""


def pool_without_num_envs(size: int = 1) -> gym.vector.VectorEnv[Any, Any, Any]:
    """A vector factory that takes no num_envs (EnvPool's make_gymnasium's signature)."""
    return _PoolOfOne([lambda: gym.make("CartPole-v1")] * size)

"""Shared factories and helpers for the built-in env tests."""

from collections.abc import Callable
from typing import Any

import torch

from typedrl.envs.builtin import (
    BaseTorchVecEnv,
    CartPole,
    CartPoleSwingUp,
    EnvLayout,
    Pendulum,
    PointMass,
    Reacher,
)

EnvFactory = Callable[..., BaseTorchVecEnv]

DRIFT_LAYOUT = EnvLayout(
    observation_high=(1.0,),
    observation_normalize_mask=(True,),
    action_space=(1.0,),
    num_initial_draws=1,
    max_episode_steps=5,
)
"""The layout of the tests' one-dimensional drift envs."""


def continuous_cartpole(**kwargs: Any) -> CartPole:
    return CartPole(action_mode="continuous", **kwargs)


FACTORIES: dict[str, EnvFactory] = {
    "Pendulum": Pendulum,
    "CartPole": CartPole,
    "CartPoleContinuous": continuous_cartpole,
    "CartPoleSwingUp": CartPoleSwingUp,
    "PointMass": PointMass,
    "Reacher": Reacher,
}
DIFFERENTIABLE = [name for name in FACTORIES if name != "CartPole"]


def random_actions(
    env: BaseTorchVecEnv, generator: torch.Generator, scale: float = 0.8
) -> torch.Tensor:
    """Random valid actions (inside the Box bounds, away from the clipping edges)."""
    space = env.single_action_space
    if space.shape == ():
        return torch.randint(0, 2, (env.num_envs,), generator=generator)
    high = torch.as_tensor(space.high, dtype=env.dtype)  # type: ignore[attr-defined]
    unit = torch.rand(env.num_envs, *(space.shape or ()), generator=generator, dtype=env.dtype)
    return (2 * unit - 1) * high * scale

"""The built-in envs by name or Gymnasium id: :func:`make_builtin`.

Their Gymnasium registration (``typedrl/<Name>-v0``, done by ``import typedrl``)
lives in :mod:`typedrl._gymnasium_registration`, which imports no torch; this
module re-exports its ids and :func:`register_builtin_envs`. It imports the env
classes from their own modules, never from the package, whose ``__init__``
imports this module.
"""

from collections.abc import Callable, Mapping
from typing import Any, Literal

import torch

from typedrl._gymnasium_registration import (
    BUILTIN_ENV_IDS,
    NEWTON_ENV_IDS,
    builtin_name,
    register_builtin_envs,
)
from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.envs.builtin._cartpole import CartPole
from typedrl.envs.builtin._cartpole_swingup import CartPoleSwingUp
from typedrl.envs.builtin._pendulum import Pendulum
from typedrl.envs.builtin._point_mass import PointMass
from typedrl.envs.builtin._reacher import Reacher
from typedrl.errors import ConfigError

__all__ = ["BUILTIN_ENV_IDS", "NEWTON_ENV_IDS", "make_builtin", "register_builtin_envs"]


def _continuous_cartpole(**kwargs: Any) -> CartPole:
    return CartPole(action_mode="continuous", **kwargs)


def _mujoco_env(task: str) -> Callable[..., BaseTorchVecEnv]:
    # typedrl.envs.mujoco (and mujoco-torch, an optional dependency) is imported
    # only when a MuJoCo env is built.
    def build(**kwargs: Any) -> BaseTorchVecEnv:
        from typedrl.envs import mujoco  # noqa: PLC0415

        return mujoco.MujocoVecEnv(task=getattr(mujoco, task)(), **kwargs)

    return build


def _newton_env(task: str) -> Callable[..., BaseTorchVecEnv]:
    # typedrl.envs.newton (and newton, an optional dependency) is imported only when
    # a Newton env is built.
    def build(**kwargs: Any) -> BaseTorchVecEnv:
        from typedrl.envs import newton  # noqa: PLC0415

        return newton.NewtonVecEnv(task=getattr(newton, task)(), **kwargs)

    return build


_CONSTRUCTORS: Mapping[str, Callable[..., BaseTorchVecEnv]] = {
    "Pendulum": Pendulum,
    "CartPole": CartPole,
    "CartPoleContinuous": _continuous_cartpole,
    "CartPoleSwingUp": CartPoleSwingUp,
    "PointMass": PointMass,
    "Reacher": Reacher,
    "MujocoCartPoleSwingUp": _mujoco_env("CartPoleSwingUpTask"),
    "MujocoHalfCheetah": _mujoco_env("HalfCheetahTask"),
    "NewtonAnt": _newton_env("AntTask"),
    "NewtonHalfCheetah": _newton_env("HalfCheetahTask"),
    "NewtonHopper": _newton_env("HopperTask"),
}


def make_builtin(
    name_or_id: str,
    *,
    num_envs: int,
    seed: int | None = None,
    device: torch.device | str = "cpu",
    dtype: Literal["float32", "float64"] = "float32",
    **kwargs: Any,
) -> BaseTorchVecEnv:
    """Create a built-in torch env by Gymnasium id or by name.

    Args:
        name_or_id: ``"typedrl/CartPole-v0"`` or ``"CartPole"``; see
            :data:`BUILTIN_ENV_IDS`.
        num_envs: Number of rows.
        seed: Seed of the first unseeded ``reset``.
        device: Device of every tensor.
        dtype: ``"float32"`` or ``"float64"``.
        **kwargs: Further constructor arguments (``max_episode_steps``,
            ``clip_actions``).

    Returns:
        The native torch env (a :class:`~typedrl.protocols.DifferentiableVecEnv`).

    Raises:
        ConfigError: For an unknown name or an invalid argument.

    Example:
        >>> env = make_builtin("typedrl/PointMass-v0", num_envs=8, seed=0)
        >>> type(env).__name__, env.num_envs
        ('PointMass', 8)
    """
    constructor = _CONSTRUCTORS[builtin_name(name_or_id)]
    try:
        return constructor(num_envs=num_envs, seed=seed, device=device, dtype=dtype, **kwargs)
    except TypeError as err:
        raise ConfigError(f"make_builtin({name_or_id!r}): {err}") from err

"""Gymnasium registration of the built-in torch envs, and lookup by name or id.

Every built-in env is registered as ``typedrl/<Name>-v0`` with a
``vector_entry_point`` only, so it is created with::

    gymnasium.make_vec("typedrl/CartPole-v0", num_envs=N, vectorization_mode="vector_entry_point")

which returns a :class:`~typedrl.envs.builtin.GymnasiumVectorView` (torch
tensors, same-step autoreset). Keyword arguments of ``make_vec`` go to the env's
constructor (``seed``, ``device``, ``dtype``, ``max_episode_steps``,
``clip_actions``). ``gymnasium.make`` (single env) is not supported: the
built-ins are batched by design.

Importing :mod:`typedrl.envs.builtin` registers them; registering again is a no-op.
This module imports the env classes from their own modules, never from the
package, whose ``__init__`` imports this module.
"""

from collections.abc import Callable, Mapping
from typing import Any, Literal, final

import gymnasium as gym
import torch

from typedrl._validation import describe
from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.envs.builtin._cartpole import CartPole
from typedrl.envs.builtin._cartpole_swingup import CartPoleSwingUp
from typedrl.envs.builtin._gymnasium_view import GymnasiumVectorView
from typedrl.envs.builtin._pendulum import Pendulum
from typedrl.envs.builtin._point_mass import PointMass
from typedrl.envs.builtin._reacher import Reacher
from typedrl.errors import ConfigError

__all__ = ["BUILTIN_ENV_IDS", "NEWTON_ENV_IDS", "make_builtin", "register_builtin_envs"]

_NAMESPACE = "typedrl"
_VERSION = 0

BUILTIN_ENV_IDS: tuple[str, ...] = tuple(
    f"{_NAMESPACE}/{name}-v{_VERSION}"
    for name in (
        "Pendulum",
        "CartPole",
        "CartPoleContinuous",
        "CartPoleSwingUp",
        "PointMass",
        "Reacher",
        "MujocoCartPoleSwingUp",
        "MujocoHalfCheetah",
    )
)
"""Gymnasium ids of the built-in envs."""

NEWTON_ENV_IDS: tuple[str, ...] = tuple(
    f"{_NAMESPACE}/{name}-v{_VERSION}"
    for name in ("NewtonAnt", "NewtonHalfCheetah", "NewtonHopper")
)
"""Gymnasium ids of the :mod:`typedrl.envs.newton` envs (they need the ``newton`` extra)."""

_MAX_EPISODE_STEPS: Mapping[str, int] = {
    "Pendulum": 200,
    "CartPole": 500,
    "CartPoleContinuous": 500,
    "CartPoleSwingUp": 500,
    "PointMass": 200,
    "Reacher": 100,
    "MujocoCartPoleSwingUp": 500,
    "MujocoHalfCheetah": 1000,
    "NewtonAnt": 1000,
    "NewtonHalfCheetah": 1000,
    "NewtonHopper": 1000,
}


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


def _resolve_name(name_or_id: str) -> str:
    prefix = f"{_NAMESPACE}/"
    suffix = f"-v{_VERSION}"
    name = name_or_id
    if name.startswith(prefix) and name.endswith(suffix):
        name = name[len(prefix) : -len(suffix)]
    if name not in _MAX_EPISODE_STEPS:
        raise ConfigError(
            f"unknown built-in env {describe(name_or_id)}; expected one of "
            f"{list(BUILTIN_ENV_IDS)} (or the bare names {list(_MAX_EPISODE_STEPS)})"
        )
    return name


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
    constructor = _CONSTRUCTORS[_resolve_name(name_or_id)]
    try:
        return constructor(num_envs=num_envs, seed=seed, device=device, dtype=dtype, **kwargs)
    except TypeError as err:
        raise ConfigError(f"make_builtin({name_or_id!r}): {err}") from err


@final
class _VectorEntryPoint:
    """Gymnasium ``vector_entry_point`` of one built-in env."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, **kwargs: Any) -> GymnasiumVectorView:
        num_envs = kwargs.pop("num_envs", 1)
        return GymnasiumVectorView(make_builtin(self._name, num_envs=num_envs, **kwargs))

    def __repr__(self) -> str:
        return f"_VectorEntryPoint({self._name!r})"


def register_builtin_envs() -> None:
    """Register every built-in env with Gymnasium as ``typedrl/<Name>-v0``.

    Idempotent: ids already in :data:`gymnasium.registry` are left as they are.
    """
    for env_id in BUILTIN_ENV_IDS + NEWTON_ENV_IDS:
        if env_id in gym.registry:
            continue
        name = _resolve_name(env_id)
        gym.register(
            id=env_id,
            vector_entry_point=_VectorEntryPoint(name),
            max_episode_steps=_MAX_EPISODE_STEPS[name],
        )

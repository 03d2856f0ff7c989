"""Gymnasium registration of the built-in envs, run by ``import typedrl``.

Every built-in env is registered as ``typedrl/<Name>-v0`` with two string entry
points into :mod:`typedrl.envs.builtin`, imported only when an env is built:

- ``entry_point``: a one-row :class:`gymnasium.Env` with NumPy arrays, for
  ``gymnasium.make`` (and so for ``make_vec``'s ``"sync"`` and ``"async"``
  modes, Stable-Baselines3 and CleanRL);
- ``vector_entry_point``: the whole batch as one :class:`gymnasium.vector.VectorEnv`,
  for ``gymnasium.make_vec`` (NumPy arrays, or torch tensors with
  ``array_type="torch"``).

Registering imports Gymnasium (not torch); registering again is a no-op.
"""

from collections.abc import Mapping
from typing import Final

import gymnasium as gym

from typedrl._validation import describe
from typedrl.errors import ConfigError

__all__ = [
    "BUILTIN_ENV_IDS",
    "ENTRY_POINTS_MODULE",
    "MAX_EPISODE_STEPS",
    "NEWTON_ENV_IDS",
    "builtin_name",
    "register_builtin_envs",
]

_NAMESPACE: Final = "typedrl"
_VERSION: Final = 0

ENTRY_POINTS_MODULE: Final = "typedrl.envs.builtin._gymnasium_entry_points"
"""Module of the creators the registered entry points name (``<Name>`` and ``<Name>Vector``)."""

MAX_EPISODE_STEPS: Mapping[str, int] = {
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
"""Registered time limit of every built-in env, by name."""

_NEWTON_NAMES: Final = ("NewtonAnt", "NewtonHalfCheetah", "NewtonHopper")


def _env_id(name: str) -> str:
    return f"{_NAMESPACE}/{name}-v{_VERSION}"


BUILTIN_ENV_IDS: tuple[str, ...] = tuple(
    _env_id(name) for name in MAX_EPISODE_STEPS if name not in _NEWTON_NAMES
)
"""Gymnasium ids of the built-in envs."""

NEWTON_ENV_IDS: tuple[str, ...] = tuple(_env_id(name) for name in _NEWTON_NAMES)
"""Gymnasium ids of the :mod:`typedrl.envs.newton` envs (they need the ``newton`` extra)."""


def builtin_name(name_or_id: str) -> str:
    """The name of a built-in env given by Gymnasium id or by name.

    Raises:
        ConfigError: For an unknown name, listing the valid ids.

    Example:
        >>> builtin_name("typedrl/CartPole-v0"), builtin_name("Reacher")
        ('CartPole', 'Reacher')
    """
    prefix = f"{_NAMESPACE}/"
    suffix = f"-v{_VERSION}"
    name = name_or_id
    if name.startswith(prefix) and name.endswith(suffix):
        name = name[len(prefix) : -len(suffix)]
    if name not in MAX_EPISODE_STEPS:
        raise ConfigError(
            f"unknown built-in env {describe(name_or_id)}; expected one of "
            f"{list(BUILTIN_ENV_IDS)} (or the bare names {list(MAX_EPISODE_STEPS)})"
        )
    return name


def register_builtin_envs() -> None:
    """Register every built-in env with Gymnasium as ``typedrl/<Name>-v0``.

    Idempotent: ids already in :data:`gymnasium.registry` are left as they are.
    ``import typedrl`` calls it; call it yourself only after replacing
    Gymnasium's registry.

    Example:
        >>> import gymnasium as gym
        >>> register_builtin_envs()
        >>> spec = gym.spec("typedrl/Pendulum-v0")
        >>> spec.entry_point, spec.max_episode_steps
        ('typedrl.envs.builtin._gymnasium_entry_points:Pendulum', 200)
    """
    for name, max_episode_steps in MAX_EPISODE_STEPS.items():
        env_id = _env_id(name)
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=f"{ENTRY_POINTS_MODULE}:{name}",
            vector_entry_point=f"{ENTRY_POINTS_MODULE}:{name}Vector",
            max_episode_steps=max_episode_steps,
        )

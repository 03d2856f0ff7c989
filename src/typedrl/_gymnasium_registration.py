"""Gymnasium registration of the built-in envs, light enough to run on ``import typedrl``.

Every built-in env is registered as ``typedrl/<Name>-v0`` with two string entry
points into :mod:`typedrl.envs.builtin`, imported only when an env is built:

- ``entry_point``: a one-row :class:`gymnasium.Env` with NumPy arrays, for
  ``gymnasium.make`` (and so for ``make_vec``'s ``"sync"`` and ``"async"``
  modes, Stable-Baselines3 and CleanRL);
- ``vector_entry_point``: the whole batch as one :class:`gymnasium.vector.VectorEnv`,
  for ``gymnasium.make_vec`` (NumPy arrays, or torch tensors with
  ``array_type="torch"``).

``import typedrl`` registers the ids at once when Gymnasium is already imported,
and otherwise right after Gymnasium's own import finishes (a finder on
:data:`sys.meta_path` that removes itself on first use), so that ``import typedrl``
imports neither Gymnasium nor torch. Registering again is a no-op. This module
imports only the standard library and :mod:`typedrl.errors` at import time.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Final, final

from typedrl._validation import describe
from typedrl.errors import ConfigError

__all__ = [
    "BUILTIN_ENV_IDS",
    "ENTRY_POINTS_MODULE",
    "MAX_EPISODE_STEPS",
    "NEWTON_ENV_IDS",
    "builtin_name",
    "register_builtin_envs",
    "register_when_gymnasium_loads",
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
    ``import typedrl`` calls it (see the module docstring); call it yourself only
    after replacing Gymnasium's registry.

    Example:
        >>> import gymnasium as gym
        >>> register_builtin_envs()
        >>> spec = gym.spec("typedrl/Pendulum-v0")
        >>> spec.entry_point, spec.max_episode_steps
        ('typedrl.envs.builtin._gymnasium_entry_points:Pendulum', 200)
    """
    import gymnasium as gym  # noqa: PLC0415 - only once Gymnasium is wanted

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


def register_when_gymnasium_loads() -> None:
    """Register the built-in envs now if Gymnasium is imported, else right after it is.

    Called by ``import typedrl``. Calling it again installs no second finder.
    """
    if "gymnasium" in sys.modules:
        register_builtin_envs()
    elif not any(isinstance(finder, _RegisterAfterGymnasium) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterGymnasium())


@final
class _RegisterAfterGymnasium(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands Gymnasium's import to a loader that registers afterwards."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if fullname != "gymnasium":
            return None
        # One use only: the other finders locate Gymnasium as they would without this one.
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


@final
class _RegisteringLoader(importlib.abc.Loader):
    """Gymnasium's own loader, followed by :func:`register_builtin_envs`."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        register_builtin_envs()

    def __getattr__(self, name: str) -> object:
        # Resource readers and source lookups of the package go to its own loader.
        return getattr(self._loader, name)

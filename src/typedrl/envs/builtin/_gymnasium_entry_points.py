"""The creators that Gymnasium's registry names for the built-in envs.

Each registered id ``typedrl/<Name>-v0`` has two string entry points into
this module: ``<Name>`` (``gymnasium.make``: a one-row
:class:`~typedrl.envs.builtin.GymnasiumEnvView`) and ``<Name>Vector``
(``gymnasium.make_vec``: a :class:`~typedrl.envs.builtin.NumpyVectorView`, or
with ``array_type="torch"`` a :class:`~typedrl.envs.builtin.GymnasiumVectorView`).
Keyword arguments of ``make`` and ``make_vec`` go to the torch env's
constructor (``seed``, ``device``, ``dtype``, ``clip_actions``; ``make_vec``
also passes the registered ``max_episode_steps``).
"""

from collections.abc import Mapping
from typing import Any, Literal, final

from typedrl._validation import describe, no_type_check
from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.envs.builtin._cartpole import CartPole as _CartPole
from typedrl.envs.builtin._cartpole_swingup import CartPoleSwingUp as _CartPoleSwingUp
from typedrl.envs.builtin._gymnasium_env import NO_TIME_LIMIT, GymnasiumEnvView
from typedrl.envs.builtin._gymnasium_view import GymnasiumVectorView, NumpyVectorView
from typedrl.envs.builtin._pendulum import Pendulum as _Pendulum
from typedrl.envs.builtin._point_mass import PointMass as _PointMass
from typedrl.envs.builtin._reacher import Reacher as _Reacher
from typedrl.envs.builtin._registration import make_builtin
from typedrl.errors import ConfigError

__all__ = [
    "CartPole",
    "CartPoleContinuous",
    "CartPoleContinuousVector",
    "CartPoleSwingUp",
    "CartPoleSwingUpVector",
    "CartPoleVector",
    "EnvCreator",
    "MujocoCartPoleSwingUp",
    "MujocoCartPoleSwingUpVector",
    "MujocoHalfCheetah",
    "MujocoHalfCheetahVector",
    "NewtonAnt",
    "NewtonAntVector",
    "NewtonHalfCheetah",
    "NewtonHalfCheetahVector",
    "NewtonHopper",
    "NewtonHopperVector",
    "Pendulum",
    "PendulumVector",
    "PointMass",
    "PointMassVector",
    "Reacher",
    "ReacherVector",
    "VectorEnvCreator",
]

# The env class of each name that renders (the MuJoCo and Newton envs do not).
_RENDERING: Mapping[str, type[BaseTorchVecEnv]] = {
    "Pendulum": _Pendulum,
    "CartPole": _CartPole,
    "CartPoleContinuous": _CartPole,
    "CartPoleSwingUp": _CartPoleSwingUp,
    "PointMass": _PointMass,
    "Reacher": _Reacher,
}


@final
class EnvCreator:
    """``entry_point`` of one built-in env: a one-row :class:`GymnasiumEnvView`.

    The torch env gets a time limit no episode reaches, so that the
    ``TimeLimit`` that ``gymnasium.make`` adds (the registered
    ``max_episode_steps``, or ``make``'s own) alone truncates episodes.

    Args:
        name: The built-in env's name (``"CartPole"``).
    """

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def metadata(self) -> dict[str, Any]:
        """Render modes and frame rate, which ``gymnasium.make`` reads before building."""
        env_class = _RENDERING.get(self._name)
        view = None if env_class is None else env_class._render_view
        if view is None:
            return {"render_modes": []}
        return {"render_modes": ["rgb_array"], "render_fps": view.fps}

    @no_type_check  # the keywords of gymnasium.make come from the user: checked here, in words
    def __call__(self, *, render_mode: str | None = None, **kwargs: Any) -> GymnasiumEnvView:
        if "array_type" in kwargs:
            raise ConfigError(
                f"gymnasium.make('typedrl/{self._name}-v0'): array_type applies to the vector "
                f"entry point of gymnasium.make_vec only, got array_type="
                f"{describe(kwargs['array_type'])}; single envs return NumPy arrays"
            )
        kwargs.setdefault("max_episode_steps", NO_TIME_LIMIT)
        return GymnasiumEnvView(
            make_builtin(self._name, num_envs=1, **kwargs), render_mode=render_mode
        )

    def __repr__(self) -> str:
        return f"EnvCreator({self._name!r})"


@final
class VectorEnvCreator:
    """``vector_entry_point`` of one built-in env: the batch as one Gymnasium vector env.

    Args:
        name: The built-in env's name (``"CartPole"``).
    """

    def __init__(self, name: str) -> None:
        self._name = name

    @no_type_check  # the keywords of gymnasium.make_vec come from the user: checked here, in words
    def __call__(
        self,
        *,
        num_envs: int = 1,
        array_type: Literal["numpy", "torch"] = "numpy",
        **kwargs: Any,
    ) -> NumpyVectorView | GymnasiumVectorView:
        """Build the torch env and view it with NumPy arrays or torch tensors.

        Args:
            num_envs: Number of rows.
            array_type: ``"numpy"`` (a :class:`NumpyVectorView`, which
                Gymnasium's vector wrappers take) or ``"torch"`` (a
                :class:`GymnasiumVectorView`: tensors on the env's device, no copy).
            **kwargs: The torch env's constructor arguments.

        Raises:
            ConfigError: For an unknown ``array_type`` or constructor argument.
        """
        if array_type not in ("numpy", "torch"):
            raise ConfigError(
                f"gymnasium.make_vec('typedrl/{self._name}-v0'): array_type must be "
                f"'numpy' or 'torch', got {describe(array_type)}"
            )
        env = make_builtin(self._name, num_envs=num_envs, **kwargs)
        if array_type == "torch":
            return GymnasiumVectorView(env)
        return NumpyVectorView(env)

    def __repr__(self) -> str:
        return f"VectorEnvCreator({self._name!r})"


Pendulum = EnvCreator("Pendulum")
PendulumVector = VectorEnvCreator("Pendulum")
CartPole = EnvCreator("CartPole")
CartPoleVector = VectorEnvCreator("CartPole")
CartPoleContinuous = EnvCreator("CartPoleContinuous")
CartPoleContinuousVector = VectorEnvCreator("CartPoleContinuous")
CartPoleSwingUp = EnvCreator("CartPoleSwingUp")
CartPoleSwingUpVector = VectorEnvCreator("CartPoleSwingUp")
PointMass = EnvCreator("PointMass")
PointMassVector = VectorEnvCreator("PointMass")
Reacher = EnvCreator("Reacher")
ReacherVector = VectorEnvCreator("Reacher")
MujocoCartPoleSwingUp = EnvCreator("MujocoCartPoleSwingUp")
MujocoCartPoleSwingUpVector = VectorEnvCreator("MujocoCartPoleSwingUp")
MujocoHalfCheetah = EnvCreator("MujocoHalfCheetah")
MujocoHalfCheetahVector = VectorEnvCreator("MujocoHalfCheetah")
NewtonAnt = EnvCreator("NewtonAnt")
NewtonAntVector = VectorEnvCreator("NewtonAnt")
NewtonHalfCheetah = EnvCreator("NewtonHalfCheetah")
NewtonHalfCheetahVector = VectorEnvCreator("NewtonHalfCheetah")
NewtonHopper = EnvCreator("NewtonHopper")
NewtonHopperVector = VectorEnvCreator("NewtonHopper")

"""Built-in batched, differentiable vector envs written in plain torch.

Every env is a :class:`~typedrl.protocols.DifferentiableVecEnv` (observations
under the key ``"obs"``, same-step autoreset with exact ``final_obs``) built on
:class:`BaseTorchVecEnv`:

- :class:`Pendulum`: Gymnasium's ``Pendulum-v1``;
- :class:`CartPole`: Gymnasium's ``CartPole-v1``, discrete (exact) or with a
  continuous force and a smooth reward;
- :class:`CartPoleSwingUp`: swing the pole up from hanging down;
- :class:`PointMass`: a damped 2-D point mass driven to a random goal;
- :class:`Reacher`: a two-link planar arm reaching a random target.

``import typedrl`` registers them with Gymnasium as ``typedrl/<Name>-v0`` (see
:func:`register_builtin_envs`): ``gymnasium.make`` builds a one-row
:class:`GymnasiumEnvView` (NumPy arrays), ``gymnasium.make_vec`` a
:class:`NumpyVectorView`, or with ``array_type="torch"`` a
:class:`GymnasiumVectorView` (torch tensors).
"""

from typedrl.envs.builtin._base import BaseTorchVecEnv as BaseTorchVecEnv
from typedrl.envs.builtin._base import EnvLayout as EnvLayout
from typedrl.envs.builtin._base import EnvOptions as EnvOptions
from typedrl.envs.builtin._cartpole import CartPole as CartPole
from typedrl.envs.builtin._cartpole_swingup import CartPoleSwingUp as CartPoleSwingUp
from typedrl.envs.builtin._gymnasium_env import GymnasiumEnvView as GymnasiumEnvView
from typedrl.envs.builtin._gymnasium_view import GymnasiumVectorView as GymnasiumVectorView
from typedrl.envs.builtin._gymnasium_view import NumpyVectorView as NumpyVectorView
from typedrl.envs.builtin._pendulum import Pendulum as Pendulum
from typedrl.envs.builtin._point_mass import PointMass as PointMass
from typedrl.envs.builtin._reacher import Reacher as Reacher
from typedrl.envs.builtin._registration import BUILTIN_ENV_IDS as BUILTIN_ENV_IDS
from typedrl.envs.builtin._registration import make_builtin as make_builtin
from typedrl.envs.builtin._registration import register_builtin_envs as register_builtin_envs

__all__ = [
    "BUILTIN_ENV_IDS",
    "BaseTorchVecEnv",
    "CartPole",
    "CartPoleSwingUp",
    "EnvLayout",
    "EnvOptions",
    "GymnasiumEnvView",
    "GymnasiumVectorView",
    "NumpyVectorView",
    "Pendulum",
    "PointMass",
    "Reacher",
    "make_builtin",
    "register_builtin_envs",
]

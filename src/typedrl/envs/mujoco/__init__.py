"""Differentiable MuJoCo envs: any MJCF model stepped by ``mujoco-torch``.

Needs the ``mujoco-torch`` extra (``pip install 'typedrl[mujoco-torch]'``);
importing this package works without it, and building an env without it
raises :class:`~typedrl.errors.MissingDependencyError` naming the extra.

- :class:`MujocoVecEnv`: a :class:`~typedrl.protocols.DifferentiableVecEnv`
  over an MJCF model and a :class:`MujocoTask`;
- :class:`MujocoTask`, :class:`MujocoTaskSpec`, :class:`MujocoState`: the task
  hooks (reset distribution, observation, reward, termination);
- :class:`CartPoleSwingUpTask` (``typedrl/MujocoCartPoleSwingUp-v0``) and
  :class:`HalfCheetahTask` (``typedrl/MujocoHalfCheetah-v0``): the shipped tasks.
"""

from typedrl.envs.mujoco._cartpole_swingup import CARTPOLE_XML as CARTPOLE_XML
from typedrl.envs.mujoco._cartpole_swingup import CartPoleSwingUpTask as CartPoleSwingUpTask
from typedrl.envs.mujoco._dependency import EXTRA as EXTRA
from typedrl.envs.mujoco._env import MujocoVecEnv as MujocoVecEnv
from typedrl.envs.mujoco._half_cheetah import HalfCheetahTask as HalfCheetahTask
from typedrl.envs.mujoco._half_cheetah import half_cheetah_xml as half_cheetah_xml
from typedrl.envs.mujoco._task import MujocoState as MujocoState
from typedrl.envs.mujoco._task import MujocoTask as MujocoTask
from typedrl.envs.mujoco._task import MujocoTaskSpec as MujocoTaskSpec

__all__ = [
    "CARTPOLE_XML",
    "EXTRA",
    "CartPoleSwingUpTask",
    "HalfCheetahTask",
    "MujocoState",
    "MujocoTask",
    "MujocoTaskSpec",
    "MujocoVecEnv",
    "half_cheetah_xml",
]

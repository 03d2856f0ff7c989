"""Differentiable locomotion on Newton: an MJCF, URDF or USD model on Newton's Featherstone solver.

Needs the ``newton`` extra (``pip install 'typedrl[newton]'``); importing this
package works without it, and building an env without it raises
:class:`~typedrl.errors.MissingDependencyError` naming the extra.

- :class:`NewtonVecEnv`: a :class:`~typedrl.protocols.DifferentiableVecEnv`
  over a model file and a :class:`NewtonTask`, differentiated through
  Warp's tape;
- :class:`NewtonTask`, :class:`NewtonTaskSpec`, :class:`NewtonState`: the task
  hooks (physics settings, reset distribution, observation, reward, termination);
- :class:`AntTask` (``typedrl/NewtonAnt-v0``), :class:`HalfCheetahTask`
  (``typedrl/NewtonHalfCheetah-v0``) and :class:`HopperTask`
  (``typedrl/NewtonHopper-v0``): the shipped tasks, after the SHAC paper.
"""

from typedrl.envs.newton._ant import AntTask as AntTask
from typedrl.envs.newton._ant import ant_xml as ant_xml
from typedrl.envs.newton._dependency import EXTRA as EXTRA
from typedrl.envs.newton._dependency import USD_EXTRA as USD_EXTRA
from typedrl.envs.newton._env import NewtonVecEnv as NewtonVecEnv
from typedrl.envs.newton._half_cheetah import HalfCheetahTask as HalfCheetahTask
from typedrl.envs.newton._half_cheetah import half_cheetah_xml as half_cheetah_xml
from typedrl.envs.newton._hopper import HopperTask as HopperTask
from typedrl.envs.newton._hopper import hopper_xml as hopper_xml
from typedrl.envs.newton._task import MODEL_FORMATS as MODEL_FORMATS
from typedrl.envs.newton._task import ModelFormat as ModelFormat
from typedrl.envs.newton._task import NewtonState as NewtonState
from typedrl.envs.newton._task import NewtonTask as NewtonTask
from typedrl.envs.newton._task import NewtonTaskSpec as NewtonTaskSpec

__all__ = [
    "EXTRA",
    "MODEL_FORMATS",
    "USD_EXTRA",
    "AntTask",
    "HalfCheetahTask",
    "HopperTask",
    "ModelFormat",
    "NewtonState",
    "NewtonTask",
    "NewtonTaskSpec",
    "NewtonVecEnv",
    "ant_xml",
    "half_cheetah_xml",
    "hopper_xml",
]

"""Differentiable locomotion on Newton: any MJCF model on Newton's Featherstone solver.

Needs the ``newton`` extra (``pip install 'typedrl[newton]'``); importing this
package works without it, and building an env without it raises
:class:`~typedrl.errors.MissingDependencyError` naming the extra.

- :class:`NewtonVecEnv`: a :class:`~typedrl.protocols.DifferentiableVecEnv`
  over an MJCF model and a :class:`NewtonTask`, differentiated through
  Warp's tape;
- :class:`NewtonTask`, :class:`NewtonTaskSpec`, :class:`NewtonState`: the task
  hooks (physics settings, reset distribution, observation, reward, termination);
- :class:`AntTask` (``typedrl/NewtonAnt-v0``): the shipped task.
"""

from typedrl.envs.newton._ant import AntTask as AntTask
from typedrl.envs.newton._ant import ant_xml as ant_xml
from typedrl.envs.newton._dependency import EXTRA as EXTRA
from typedrl.envs.newton._env import NewtonVecEnv as NewtonVecEnv
from typedrl.envs.newton._task import NewtonState as NewtonState
from typedrl.envs.newton._task import NewtonTask as NewtonTask
from typedrl.envs.newton._task import NewtonTaskSpec as NewtonTaskSpec

__all__ = [
    "EXTRA",
    "AntTask",
    "NewtonState",
    "NewtonTask",
    "NewtonTaskSpec",
    "NewtonVecEnv",
    "ant_xml",
]

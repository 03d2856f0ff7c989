"""Vector environments: adapters, built-in differentiable envs and conformance checkers.

- :class:`GymnasiumVecEnv` and :func:`make`: any Gymnasium vector env, in any
  autoreset mode, under typedrl's same-step contract;
- :class:`IsaacLabVecEnv`: Isaac Lab's manager-based and direct RL envs;
- :class:`Pendulum`, :class:`CartPole`, :class:`CartPoleSwingUp`,
  :class:`PointMass`, :class:`Reacher`: built-in batched, differentiable torch
  envs (registered with Gymnasium as ``typedrl/<Name>-v0``);
- :func:`check_vec_env` and :func:`check_differentiable_vec_env`: the
  conformance checkers to run on your own envs before training;
- :func:`make_envpool`: EnvPool's batched envs (Atari, MuJoCo, ...) as an env
  spec, ``typedrl.envs:make_envpool``;
- :class:`KeepObservationIndices`: a Gymnasium wrapper that hides entries of
  an observation (CartPole without its velocities, for recurrent policies);
- :class:`VecEnvWrapper`: the delegating base of every env wrapper (override
  only what the wrapper changes; the env's attributes a policy reads pass
  through).
"""

from typedrl.envs._checker import CHECK_RULES as CHECK_RULES
from typedrl.envs._checker import CheckReport as CheckReport
from typedrl.envs._checker import Violation as Violation
from typedrl.envs._checker import check_differentiable_vec_env as check_differentiable_vec_env
from typedrl.envs._checker import check_vec_env as check_vec_env
from typedrl.envs._envpool import make_envpool as make_envpool
from typedrl.envs._gymnasium import GymnasiumVecEnv as GymnasiumVecEnv
from typedrl.envs._isaaclab import IsaacLabEnvCfgLike as IsaacLabEnvCfgLike
from typedrl.envs._isaaclab import IsaacLabEnvLike as IsaacLabEnvLike
from typedrl.envs._isaaclab import IsaacLabObs as IsaacLabObs
from typedrl.envs._isaaclab import IsaacLabVecEnv as IsaacLabVecEnv
from typedrl.envs._make import make as make
from typedrl.envs._observation_subset import KeepObservationIndices as KeepObservationIndices
from typedrl.envs._wrapper import DifferentiableVecEnvWrapper as DifferentiableVecEnvWrapper
from typedrl.envs._wrapper import VecEnvWrapper as VecEnvWrapper
from typedrl.envs._wrapper import observation_normalize_mask_of as observation_normalize_mask_of
from typedrl.envs.builtin import BUILTIN_ENV_IDS as BUILTIN_ENV_IDS
from typedrl.envs.builtin import BaseTorchVecEnv as BaseTorchVecEnv
from typedrl.envs.builtin import CartPole as CartPole
from typedrl.envs.builtin import CartPoleSwingUp as CartPoleSwingUp
from typedrl.envs.builtin import EnvLayout as EnvLayout
from typedrl.envs.builtin import EnvOptions as EnvOptions
from typedrl.envs.builtin import GymnasiumEnvView as GymnasiumEnvView
from typedrl.envs.builtin import GymnasiumVectorView as GymnasiumVectorView
from typedrl.envs.builtin import NumpyVectorView as NumpyVectorView
from typedrl.envs.builtin import Pendulum as Pendulum
from typedrl.envs.builtin import PointMass as PointMass
from typedrl.envs.builtin import Reacher as Reacher
from typedrl.envs.builtin import make_builtin as make_builtin
from typedrl.envs.builtin import register_builtin_envs as register_builtin_envs

__all__ = [
    "BUILTIN_ENV_IDS",
    "CHECK_RULES",
    "BaseTorchVecEnv",
    "CartPole",
    "CartPoleSwingUp",
    "CheckReport",
    "DifferentiableVecEnvWrapper",
    "EnvLayout",
    "EnvOptions",
    "GymnasiumEnvView",
    "GymnasiumVecEnv",
    "GymnasiumVectorView",
    "IsaacLabEnvCfgLike",
    "IsaacLabEnvLike",
    "IsaacLabObs",
    "IsaacLabVecEnv",
    "KeepObservationIndices",
    "NumpyVectorView",
    "Pendulum",
    "PointMass",
    "Reacher",
    "VecEnvWrapper",
    "Violation",
    "check_differentiable_vec_env",
    "check_vec_env",
    "make",
    "make_builtin",
    "make_envpool",
    "observation_normalize_mask_of",
    "register_builtin_envs",
]

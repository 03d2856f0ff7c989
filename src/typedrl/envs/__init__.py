"""Vector environments: adapters, built-in differentiable envs and conformance checkers.

- :class:`GymnasiumVecEnv` and :func:`make`: any Gymnasium vector env, in any
  autoreset mode, under typedrl's same-step contract;
- :class:`IsaacLabVecEnv`: Isaac Lab's manager-based and direct RL envs;
- :func:`check_vec_env` and :func:`check_differentiable_vec_env`: the
  conformance checkers to run on your own envs before training.
"""

from typedrl.envs._checker import CHECK_RULES as CHECK_RULES
from typedrl.envs._checker import CheckReport as CheckReport
from typedrl.envs._checker import Violation as Violation
from typedrl.envs._checker import check_differentiable_vec_env as check_differentiable_vec_env
from typedrl.envs._checker import check_vec_env as check_vec_env
from typedrl.envs._gymnasium import GymnasiumVecEnv as GymnasiumVecEnv
from typedrl.envs._isaaclab import IsaacLabEnvCfgLike as IsaacLabEnvCfgLike
from typedrl.envs._isaaclab import IsaacLabEnvLike as IsaacLabEnvLike
from typedrl.envs._isaaclab import IsaacLabObs as IsaacLabObs
from typedrl.envs._isaaclab import IsaacLabVecEnv as IsaacLabVecEnv
from typedrl.envs._make import make as make

__all__ = [
    "CHECK_RULES",
    "CheckReport",
    "GymnasiumVecEnv",
    "IsaacLabEnvCfgLike",
    "IsaacLabEnvLike",
    "IsaacLabObs",
    "IsaacLabVecEnv",
    "Violation",
    "check_differentiable_vec_env",
    "check_vec_env",
    "make",
]

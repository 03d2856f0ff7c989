"""Vector environments: adapters, built-in differentiable envs and conformance checkers."""

from typedrl.envs._gymnasium import GymnasiumVecEnv as GymnasiumVecEnv
from typedrl.envs._make import make as make

__all__ = ["GymnasiumVecEnv", "make"]

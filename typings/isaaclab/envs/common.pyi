# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/common.py. Upstream spells the aliases with
# ``typing.Dict`` and a bare ``dict`` for the extras; the stub uses the builtin generics and
# ``dict[str, Any]`` (the extras values are heterogeneous, see manager_based_rl_env.pyi).
from typing import Any, TypeAlias

import torch

VecEnvObs: TypeAlias = dict[str, torch.Tensor | dict[str, torch.Tensor]]
"""Observation group name -> concatenated tensor, or term name -> tensor when not concatenated."""

VecEnvStepReturn: TypeAlias = tuple[
    VecEnvObs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]
]
"""(observations, rewards, terminated, time_outs, extras), each batched over environments."""

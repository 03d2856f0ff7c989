# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/manager_based_rl_env.py.
#
# ``extras`` keys written upstream:
# - ``"log"``: dict[str, Any] of episode statistics, rebuilt (``self.extras["log"] = dict()``)
#   in ``_reset_idx`` from every manager's ``reset()`` (manager_based_rl_env.py; the base part
#   in manager_based_env.py). Only refreshed on steps that reset at least one env.
# - ``"final_obs"``: VecEnvObs for *all* envs, computed by the observation manager *before*
#   ``_reset_idx`` in ``step``; only when ``cfg.compute_final_obs`` is True (PR #6219) and
#   only on steps where some env terminated or timed out. Upstream does not delete it on later
#   steps (the same dict is reused), so trust only the rows flagged done in *this* step.
# - ``"time_outs"`` is NOT written by the env: time-outs are the 4th element of the step tuple.
#   ``extras["time_outs"] = truncated`` is added by the RSL-RL wrapper
#   (source/isaaclab_rl/isaaclab_rl/rsl_rl/vecenv_wrapper.py) when ``not cfg.is_finite_horizon``.
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from .common import VecEnvObs, VecEnvStepReturn
from .manager_based_env import ManagerBasedEnv
from .manager_based_rl_env_cfg import ManagerBasedRLEnvCfg

class ManagerBasedRLEnv(ManagerBasedEnv, gym.Env[VecEnvObs, torch.Tensor]):
    is_vector_env: ClassVar[bool]
    # Upstream: ``{"render_modes": [None, "human", "rgb_array"], "autoreset_mode":
    # gym.vector.AutoresetMode.SAME_STEP}`` (the latter since PR #6219), plus ``"render_fps"``
    # written at construction. Declared ``ClassVar`` upstream; gymnasium declares it per instance.
    metadata: ClassVar[dict[str, Any]]  # type: ignore[misc]
    cfg: ManagerBasedRLEnvCfg
    render_mode: str | None
    common_step_counter: int
    episode_length_buf: torch.Tensor
    reset_buf: torch.Tensor
    reset_terminated: torch.Tensor
    reset_time_outs: torch.Tensor
    reward_buf: torch.Tensor
    single_observation_space: gym.spaces.Dict
    single_action_space: gym.spaces.Box
    observation_space: gym.spaces.Space[Any]
    """``gym.vector.utils.batch_space(single_observation_space, num_envs)``."""
    action_space: gym.spaces.Space[Any]
    """``gym.vector.utils.batch_space(single_action_space, num_envs)``."""
    def __init__(
        self, cfg: ManagerBasedRLEnvCfg, render_mode: str | None = None, **kwargs: Any
    ) -> None: ...
    @property
    def max_episode_length_s(self) -> float: ...
    @property
    def max_episode_length(self) -> int: ...
    # Upstream overrides ManagerBasedEnv.step (2-tuple) with a 5-tuple: not substitutable.
    def step(self, action: torch.Tensor) -> VecEnvStepReturn: ...  # type: ignore[override]
    def render(self, recompute: bool = False) -> npt.NDArray[np.uint8] | None: ...
    def close(self) -> None: ...

# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/direct_rl_env.py at commit 3079fec2.
#
# ``extras`` keys written upstream:
# - ``"final_obs"``: VecEnvObs for *all* envs from ``_capture_terminal_obs()``
#   (``_get_observations()`` + policy observation noise), taken in ``step`` *before*
#   ``_reset_idx``; only when ``cfg.compute_final_obs`` is True (PR #6219) and only on steps
#   where some env terminated or timed out. It is not deleted on later steps (the same dict is
#   reused), so trust only the rows flagged done in *this* step.
# - ``"log"``: NOT written by the base class. Task subclasses conventionally fill
#   ``self.extras["log"]`` in their own ``_reset_idx`` overrides.
# - ``"time_outs"`` is NOT written by the env: time-outs are the 4th element of the step tuple
#   (``extras["time_outs"]`` is added by isaaclab_rl/rsl_rl/vecenv_wrapper.py).
# There is no public ``is_closed`` (upstream: private ``_is_closed``). ``close()`` sets the four
# space attributes and ``state_space`` to None; the annotations describe an open env.
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from _typeshed import Incomplete

from .common import VecEnvObs, VecEnvStepReturn
from .direct_rl_env_cfg import DirectRLEnvCfg

class DirectRLEnv(gym.Env[VecEnvObs, torch.Tensor]):
    is_vector_env: ClassVar[bool]
    # Upstream: ``{"render_modes": [None, "human", "rgb_array"], "autoreset_mode":
    # gym.vector.AutoresetMode.SAME_STEP}`` (the latter since PR #6219), plus ``"render_fps"``
    # written at construction. Declared ``ClassVar`` upstream; gymnasium declares it per instance.
    metadata: ClassVar[dict[str, Any]]  # type: ignore[misc]
    cfg: DirectRLEnvCfg
    render_mode: str | None
    sim: Incomplete
    """``isaaclab.sim.SimulationContext``."""
    scene: Incomplete
    """``isaaclab.scene.InteractiveScene``."""
    extras: dict[str, Any]
    """One dict object, mutated in place by every step/reset and returned by reference."""
    obs_buf: VecEnvObs
    render_enabled: bool
    has_rtx_sensors: bool
    common_step_counter: int
    episode_length_buf: torch.Tensor
    reset_buf: torch.Tensor
    reset_terminated: torch.Tensor
    reset_time_outs: torch.Tensor
    reward_buf: torch.Tensor
    single_observation_space: gym.spaces.Dict
    """Key ``"policy"`` always, ``"critic"`` when ``cfg.state_space`` is set."""
    single_action_space: gym.spaces.Space[Any]
    observation_space: gym.spaces.Space[Any]
    """Batched *policy* space only: ``batch_space(single_observation_space["policy"], n)``."""
    action_space: gym.spaces.Space[Any]
    state_space: gym.spaces.Space[Any] | None
    def __init__(
        self, cfg: DirectRLEnvCfg, render_mode: str | None = None, **kwargs: Any
    ) -> None: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def physics_dt(self) -> float: ...
    @property
    def step_dt(self) -> float: ...
    @property
    def device(self) -> str:
        """``self.sim.device``, e.g. ``"cuda:0"`` (unannotated upstream)."""

    @property
    def max_episode_length_s(self) -> float: ...
    @property
    def max_episode_length(self) -> int:
        """``math.ceil(episode_length_s / (sim.dt * decimation))`` (unannotated upstream)."""

    # Resets all envs; there is no ``env_ids`` parameter on DirectRLEnv.reset.
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[VecEnvObs, dict[str, Any]]: ...
    def step(self, action: torch.Tensor) -> VecEnvStepReturn: ...  # type: ignore[override]
    @staticmethod
    def seed(seed: int = -1) -> int: ...
    def render(self, recompute: bool = False) -> npt.NDArray[np.uint8] | None: ...
    def close(self) -> None: ...
    def set_debug_vis(self, debug_vis: bool) -> bool: ...

# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/manager_based_env.py (read at commit 017acff0).
# ``ManagerBasedEnv`` is *not* a ``gymnasium.Env``; ``ManagerBasedRLEnv`` adds that base.
# There is no public ``is_closed``: upstream keeps the flag private (``_is_closed``).
from typing import Any

import torch
from _typeshed import Incomplete

from .common import VecEnvObs
from .manager_based_env_cfg import ManagerBasedEnvCfg

class ManagerBasedEnv:
    cfg: ManagerBasedEnvCfg
    sim: Incomplete
    """``isaaclab.sim.SimulationContext``."""
    scene: Incomplete
    """``isaaclab.scene.InteractiveScene``."""
    extras: dict[str, Any]
    """One dict object, mutated in place by every step/reset and returned by reference."""
    obs_buf: VecEnvObs
    render_enabled: bool
    has_rtx_sensors: bool
    action_manager: Incomplete
    observation_manager: Incomplete
    event_manager: Incomplete
    recorder_manager: Incomplete
    def __init__(self, cfg: ManagerBasedEnvCfg) -> None: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def physics_dt(self) -> float: ...
    @property
    def step_dt(self) -> float: ...
    @property
    def device(self) -> str:
        """``self.sim.device``, e.g. ``"cuda:0"`` (unannotated upstream)."""

    # Isaac Lab 3.x signature: ``env_ids`` first (1-D int32/int64 tensor on the env device or a
    # positive-step slice; None means all), then keyword-only ``seed``/``options``.
    # Isaac Lab 2.x had ``reset(self, seed=None, env_ids: Sequence[int] | None = None,
    # options=None)``; keyword calls work with both.
    def reset(
        self,
        env_ids: torch.Tensor | slice | None = ...,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[VecEnvObs, dict[str, Any]]: ...
    def step(self, action: torch.Tensor) -> tuple[VecEnvObs, dict[str, Any]]: ...
    @staticmethod
    def seed(seed: int = -1) -> int: ...
    def close(self) -> None: ...

# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/manager_based_rl_env_cfg.py.
from _typeshed import Incomplete

from .manager_based_env_cfg import ManagerBasedEnvCfg

class ManagerBasedRLEnvCfg(ManagerBasedEnvCfg):
    ui_window_class_type: Incomplete
    is_finite_horizon: bool
    """Default False. Not read by the env itself; wrappers use it to decide on time-out signals."""
    compute_final_obs: bool
    """Default False. Upstream field, added by isaac-sim/IsaacLab#6219 (merged 2026-06-21).

    When True, ``ManagerBasedRLEnv.step`` computes the observations once more *before* the
    Same-Step autoreset and stores them under ``extras["final_obs"]``. Absent from releases
    that predate that PR, so readers should use ``getattr(cfg, "compute_final_obs", False)``.
    """
    episode_length_s: float
    rewards: object
    terminations: object
    curriculum: object | None
    commands: object | None

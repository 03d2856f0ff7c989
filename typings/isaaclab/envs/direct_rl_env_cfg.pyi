# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/direct_rl_env_cfg.py (a ``@configclass``). Fields
# typed ``Incomplete`` are Isaac Lab config classes that are not stubbed. The space fields
# accept a gymnasium space or the upstream ``SpaceType`` shorthands (int, list, set, dict, ...).
from typing import Any

from _typeshed import Incomplete

class DirectRLEnvCfg:
    viewer: Incomplete
    sim: Incomplete
    """``isaaclab.sim.SimulationCfg`` (``sim.dt``, ``sim.device``, ``sim.render_interval``)."""
    ui_window_class_type: Incomplete
    seed: int | None
    decimation: int
    is_finite_horizon: bool
    """Default False. Not read by the env itself; wrappers use it to decide on time-out signals."""
    compute_final_obs: bool
    """Default False. Upstream field, added by isaac-sim/IsaacLab#6219 (merged 2026-06-21).

    When True, ``DirectRLEnv.step`` calls ``_capture_terminal_obs()`` (``_get_observations()``
    plus the policy observation noise) *before* ``_reset_idx`` and stores the result under
    ``extras["final_obs"]``. Absent from releases that predate that PR, so readers should use
    ``getattr(cfg, "compute_final_obs", False)``.
    """
    episode_length_s: float
    scene: Incomplete
    """``isaaclab.scene.InteractiveSceneCfg`` (``scene.num_envs``, ``scene.env_spacing``)."""
    events: object | None
    observation_space: Incomplete
    num_observations: int | None
    state_space: Incomplete
    num_states: int | None
    observation_noise_model: Incomplete
    action_space: Incomplete
    num_actions: int | None
    action_noise_model: Incomplete
    rerender_on_reset: bool
    num_rerenders_on_reset: int
    wait_for_textures: bool
    xr: Incomplete
    log_dir: str | None
    def __init__(self, **kwargs: Any) -> None: ...

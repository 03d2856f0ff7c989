# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Mirrors source/isaaclab/isaaclab/envs/manager_based_env_cfg.py (a ``@configclass``, i.e. a
# dataclass whose fields are all keyword arguments). Fields typed ``Incomplete`` are Isaac
# Lab config classes that are not stubbed (SimulationCfg, InteractiveSceneCfg, ViewerCfg, ...).
from typing import Any

from _typeshed import Incomplete

class ManagerBasedEnvCfg:
    viewer: Incomplete
    sim: Incomplete
    """``isaaclab.sim.SimulationCfg`` (``sim.dt``, ``sim.device``, ``sim.render_interval``)."""
    ui_window_class_type: Incomplete
    seed: int | None
    decimation: int
    scene: Incomplete
    """``isaaclab.scene.InteractiveSceneCfg`` (``scene.num_envs``, ``scene.env_spacing``)."""
    recorders: object
    observations: object
    actions: object
    events: object
    rerender_on_reset: bool
    num_rerenders_on_reset: int
    wait_for_textures: bool
    xr: Incomplete
    export_io_descriptors: bool
    log_dir: str | None
    def __init__(self, **kwargs: Any) -> None: ...

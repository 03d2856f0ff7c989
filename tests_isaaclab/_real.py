"""Build Isaac Lab's real cartpole tasks kit-less, on Newton, on the CPU, from local files.

The tasks load their robot from NVIDIA's asset server; here it comes instead from the
flattened copy of the same cartpole USD that the ``newton`` package ships
(``examples/assets/cartpole_single_pendulum.usda``), copied into a cache folder with its
``defaultPrim`` set to the prim it holds (``cartpole``; the shipped file names
``cartPole``). The ground plane, also a remote asset, is dropped: the cart rides a rail
two metres above it and never touches it.
"""

import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from typedrl.envs._isaaclab import IsaacLabVecEnv, make_isaaclab

__all__ = [
    "DIRECT_TASK",
    "MANAGER_TASK",
    "ROBOT_ATTRIBUTE",
    "cartpole_usd",
    "kitless_overrides",
    "make_real",
    "overrides_flag",
]

MANAGER_TASK: Final = "Isaac-Cartpole"
DIRECT_TASK: Final = "Isaac-Cartpole-Direct"

ROBOT_ATTRIBUTE: Final = {MANAGER_TASK: "robot", DIRECT_TASK: "cartpole"}
"""Name of the cartpole articulation in each task's scene config."""

_SHIPPED_PRIM = 'defaultPrim = "cartPole"'
_FIXED_PRIM = 'defaultPrim = "cartpole"'


def cartpole_usd() -> Path:
    """The local cartpole USD (written once into the cache folder)."""
    spec = importlib.util.find_spec("newton")
    if spec is None or spec.origin is None:
        msg = "the newton package is not installed; nox -s isaaclab installs it"
        raise RuntimeError(msg)
    source = Path(spec.origin).parent / "examples" / "assets" / "cartpole_single_pendulum.usda"
    text = source.read_text(encoding="utf-8")
    if _SHIPPED_PRIM not in text:
        msg = f"{source} no longer declares {_SHIPPED_PRIM}; check the cartpole USD by hand"
        raise RuntimeError(msg)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "typedrl-isaaclab"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / "cartpole.usda"
    fixed = text.replace(_SHIPPED_PRIM, _FIXED_PRIM)
    if not target.exists() or target.read_text(encoding="utf-8") != fixed:
        partial = target.with_suffix(".tmp")
        partial.write_text(fixed, encoding="utf-8")
        partial.replace(target)
    return target


def kitless_overrides(env_id: str) -> list[str]:
    """Hydra overrides for a CPU run without the asset server."""
    robot = ROBOT_ATTRIBUTE[env_id]
    return [
        "physics=newton_mjwarp",
        "env.scene.ground=null",
        f"env.scene.{robot}.spawn.usd_path={cartpole_usd()}",
    ]


def overrides_flag(env_id: str) -> list[str]:
    """The overrides as ``typedrl train``'s ``--env-kwargs`` flag."""
    return ["--env-kwargs", json.dumps({"overrides": kitless_overrides(env_id)})]


def make_real(
    env_id: str,
    *,
    num_envs: int,
    seed: int = 0,
    compute_final_obs: bool = True,
    is_finite_horizon: bool | None = None,
    episode_length_s: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> IsaacLabVecEnv:
    """The real task on the CPU, wrapped; close it before building the next one.

    ``episode_length_s`` shortens the task's 5 s episodes (300 steps) so that
    short rollouts see time-outs.
    """
    overrides = kitless_overrides(env_id)
    if episode_length_s is not None:
        overrides.append(f"env.episode_length_s={episode_length_s}")
    env_kwargs: dict[str, Any] = {
        "overrides": overrides,
        "compute_final_obs": compute_final_obs,
        "is_finite_horizon": is_finite_horizon,
        **(extra or {}),
    }
    return make_isaaclab(env_id, num_envs=num_envs, device="cpu", seed=seed, env_kwargs=env_kwargs)

"""Refuse a run whose rollout cannot fit in memory, before its envs are built."""

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from typedrl.ahac import AHACConfig
from typedrl.apg import DifferentiableTrainerConfig
from typedrl.cli._config import ResolvedRun
from typedrl.envs import make
from typedrl.envs._isaaclab import holds_one_simulation
from typedrl.errors import ConfigError
from typedrl.ppo import PPOConfig

__all__ = ["available_memory", "check_rollout_memory", "space_nbytes", "transition_nbytes"]

_GIB = 1024**3

# Per transition besides the observation and action: reward, log-prob, value, terminal
# value, advantage and return (float32 each), terminated, truncated and valid (bool each).
_SCALARS_NBYTES = 6 * 4 + 3 * 1


def space_nbytes(space: gym.Space[Any]) -> int:
    """Bytes one row of ``space`` takes as tensors (integer leaves as int64).

    Example:
        >>> space_nbytes(gym.spaces.Box(-1.0, 1.0, (3,), np.float32)), space_nbytes(
        ...     gym.spaces.Discrete(2)
        ... )
        (12, 8)
    """
    if isinstance(space, gym.spaces.Dict):
        return sum(space_nbytes(sub) for sub in space.spaces.values())
    numel = int(np.prod(space.shape)) if space.shape else 1
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        return numel * np.dtype(space.dtype).itemsize
    return numel * 8


def transition_nbytes(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> int:
    """Bytes one env step of one row takes in a rollout: observation, action and scalars.

    Example:
        >>> box = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        >>> transition_nbytes(box, gym.spaces.Discrete(2))
        51
    """
    return space_nbytes(observation_space) + space_nbytes(action_space) + _SCALARS_NBYTES


def available_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors on ``device``; ``None`` where that cannot be read.

    A GPU's free memory (:func:`torch.cuda.mem_get_info`); on the CPU, what
    ``psutil`` reports as available when it is installed, else the kernel's
    ``MemAvailable`` (``/proc/meminfo``), else the free pages
    (:func:`os.sysconf`).
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    if importlib.util.find_spec("psutil") is not None:
        psutil: Any = importlib.import_module("psutil")
        return int(psutil.virtual_memory().available)
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            name, _, value = line.partition(":")
            if name == "MemAvailable":
                return int(value.split()[0]) * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def _rollout_steps(resolved: ResolvedRun) -> tuple[int, str] | None:
    """Steps of each row a rollout holds at once, and the setting that says so.

    ``None`` for the config of an algorithm of your own (its rollouts are not known here).
    """
    config = resolved.config
    if isinstance(config, PPOConfig):
        return config.num_steps, "num_steps"
    if isinstance(config, DifferentiableTrainerConfig):
        if isinstance(config.algorithm, AHACConfig):
            # AHAC's windows grow up to its longest horizon.
            return config.algorithm.horizon_max, "algorithm.horizon_max"
        return config.segment_length, "segment_length"
    return None


def check_rollout_memory(resolved: ResolvedRun, *, device: torch.device) -> None:
    """Raise :class:`~typedrl.errors.ConfigError` when the rollout cannot fit on ``device``.

    One row of the env is built to read its spaces; the rollout of
    ``num_envs`` rows then needs at least ``transition_nbytes * num_envs *
    steps`` bytes (PPO's ``num_steps``; APG's and SHAC's ``segment_length``,
    AHAC's ``horizon_max``, whose graph takes more). An Isaac Lab task, which
    holds the process's one simulation, is not probed.
    """
    rollout = _rollout_steps(resolved)
    if rollout is None or holds_one_simulation(resolved.env_id):
        return
    run = resolved.run
    probe = make(
        resolved.env_id,
        num_envs=1,
        device=device,
        wrappers=run.wrappers,
        clip_actions=run.clip_actions,
        env_kwargs=run.env_kwargs,
    )
    try:
        per_step = transition_nbytes(probe.single_observation_space, probe.single_action_space)
    finally:
        probe.close()
    steps, setting = rollout
    needed = per_step * resolved.num_envs * steps
    free = available_memory(device)
    if free is None or needed <= free:
        return
    where = "this machine" if device.type == "cpu" else str(device)
    raise ConfigError(
        f"--num-envs {resolved.num_envs:,}: the rollout needs at least {needed / _GIB:,.1f} GiB "
        f"({per_step:,} bytes per transition x {resolved.num_envs:,} envs x {steps:,} steps), "
        f"but {where} has {free / _GIB:,.1f} GiB available; lower --num-envs or "
        f"--set {setting}=N"
    )

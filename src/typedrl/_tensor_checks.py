"""Metadata-only tensor checks (shape, dtype, device) shared across typedrl.

None of these functions reads tensor values, so none synchronises with the
device: they are cheap enough for every step of a hot loop.
"""

from typing import Any

import gymnasium as gym
import torch
from torch import Tensor

from typedrl._validation import describe
from typedrl.errors import SpecError

__all__ = ["action_dtype_for", "check_action"]

_INTEGER_DTYPES = frozenset(
    {torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32}
)


def action_dtype_for(
    space: gym.Space[Any], float_dtype: torch.dtype = torch.float32
) -> torch.dtype:
    """The torch dtype actions of ``space`` travel in: floats for ``Box``, int64 otherwise.

    Example:
        >>> import gymnasium as gym
        >>> action_dtype_for(gym.spaces.Discrete(3))
        torch.int64
    """
    if isinstance(space, gym.spaces.Box):
        return float_dtype
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        return torch.int64
    raise SpecError(
        f"unsupported action space {space!r}; expected Box, Discrete, MultiDiscrete or MultiBinary"
    )


def check_action(
    action: object,
    *,
    num_envs: int,
    space: gym.Space[Any],
    device: torch.device,
    where: str,
) -> Tensor:
    """Check that ``action`` is a valid action batch for ``space``.

    Args:
        action: The candidate action batch.
        num_envs: Expected leading dimension.
        space: The single-row action space.
        device: Expected device.
        where: Who is checking, for the message (for example ``"CountingVecEnv.step"``).

    Returns:
        ``action``, unchanged.

    Raises:
        SpecError: If the type, shape, dtype or device is wrong.
    """
    if not isinstance(action, Tensor):
        raise SpecError(f"{where}: action must be a torch.Tensor, got {describe(action)}")
    expected = (num_envs, *(space.shape or ()))
    if tuple(action.shape) != expected:
        raise SpecError(
            f"{where}: action must have shape {list(expected)} "
            f"([num_envs, *action_shape]), got {list(action.shape)}"
        )
    if isinstance(space, gym.spaces.Box):
        if not action.is_floating_point():
            raise SpecError(f"{where}: Box actions must be floating point, got {action.dtype}")
    elif action.dtype not in _INTEGER_DTYPES and not (
        isinstance(space, gym.spaces.MultiBinary) and action.dtype == torch.bool
    ):
        raise SpecError(
            f"{where}: {type(space).__name__} actions must be an integer dtype, got {action.dtype}"
        )
    if action.device != device:
        raise SpecError(f"{where}: action is on {action.device}, but the env runs on {device}")
    return action

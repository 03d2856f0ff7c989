"""Metadata-only tensor checks (shape, dtype, device) shared across typedrl.

None of these functions reads tensor values, so none synchronises with the
device: they are cheap enough for every step of a hot loop.
"""

from typing import Any, final

import gymnasium as gym
import torch
from torch import Tensor

from typedrl._validation import describe
from typedrl.errors import SpecError

__all__ = ["ActionChecker", "action_dtype_for", "check_action", "same_device"]

_INTEGER_DTYPES = frozenset(
    {torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32}
)


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """Whether two devices are the same, ``"cuda"`` and ``"cuda:0"`` alike.

    A device without an index means the current device of its type (index 0
    unless the process chose another).

    Example:
        >>> same_device("cuda", "cuda:0"), same_device("cpu", "cuda:0")
        (True, False)
    """
    first, second = torch.device(a), torch.device(b)
    if first.type != second.type:
        return False
    if first.type == "cpu":
        return True
    default = (
        torch.cuda.current_device() if first.type == "cuda" and torch.cuda.is_available() else 0
    )
    return (first.index if first.index is not None else default) == (
        second.index if second.index is not None else default
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


@final
class ActionChecker:
    """:func:`check_action` bound to one env, for the hot path of its ``step``.

    The expected shape, accepted dtypes and device are worked out once, so a
    well-formed action costs a handful of attribute reads. Anything the fast
    test does not accept goes through :func:`check_action`, which raises the
    same :class:`~typedrl.errors.SpecError` (or accepts the action) exactly as
    a direct call would.

    Args:
        num_envs: Expected leading dimension.
        space: The single-row action space.
        device: Expected device.
        where: Who is checking, for the message.

    Example:
        >>> import gymnasium as gym, torch
        >>> check = ActionChecker(
        ...     num_envs=2, space=gym.spaces.Discrete(3), device=torch.device("cpu"), where="t"
        ... )
        >>> check(torch.zeros(2, dtype=torch.int64)).shape
        torch.Size([2])
    """

    def __init__(
        self, *, num_envs: int, space: gym.Space[Any], device: torch.device, where: str
    ) -> None:
        self._num_envs = num_envs
        self._space = space
        self._device = device
        self._where = where
        self._shape = torch.Size((num_envs, *(space.shape or ())))
        self._floating = isinstance(space, gym.spaces.Box)
        integer = _INTEGER_DTYPES
        if isinstance(space, gym.spaces.MultiBinary):
            integer = integer | {torch.bool}
        self._integer_dtypes = integer

    def __call__(self, action: object) -> Tensor:
        """Return ``action`` if it is a valid action batch; raise :class:`SpecError` if not."""
        if (
            isinstance(action, Tensor)
            and action.shape == self._shape
            and (
                action.is_floating_point()
                if self._floating
                else action.dtype in self._integer_dtypes
            )
            and action.device == self._device
        ):
            return action
        return check_action(
            action,
            num_envs=self._num_envs,
            space=self._space,
            device=self._device,
            where=self._where,
        )

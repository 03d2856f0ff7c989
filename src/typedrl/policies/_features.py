"""The observation keys a policy network reads, and the width of their flat features."""

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from typedrl._validation import describe
from typedrl.errors import ConfigError

__all__ = ["default_keys", "flat_size"]


def default_keys(space: gym.Space[Any], preferred: Sequence[str]) -> tuple[str, ...]:
    """The observation keys a network reads when the user names none.

    ``("obs",)`` for a single-array space; for a ``Dict`` space the first of
    ``preferred`` that it holds, else every key in order.

    Example:
        >>> space = gym.spaces.Dict({"policy": gym.spaces.Box(-1, 1, (3,))})
        >>> default_keys(space, ("obs", "policy"))
        ('policy',)
    """
    if not isinstance(space, gym.spaces.Dict):
        return ("obs",)
    for key in preferred:
        if key in space.spaces:
            return (key,)
    return tuple(space.spaces)


def _box_hint(space: gym.Space[Any], sub: gym.Space[Any] | None) -> str:
    """The ``--wrapper`` that gives a network the Box it reads, when Gymnasium has one."""
    flatten = "flatten every key into one Box with --wrapper FlattenObservation"
    if isinstance(space, gym.spaces.Dict):
        boxes = [key for key, leaf in space.spaces.items() if isinstance(leaf, gym.spaces.Box)]
        if not boxes:
            return f"; {flatten}"
        keys = ", ".join(f'"{key}"' for key in boxes)
        keep = f"keep the Box keys with --wrapper 'FilterObservation(filter_keys=[{keys}])'"
        return f"; {keep} or {flatten}"
    if isinstance(sub, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        return "; --wrapper FlattenObservation makes it a one-hot (or 0/1) Box"
    return ""


def flat_size(space: gym.Space[Any], keys: Sequence[str], where: str) -> int:
    """The width of ``keys``' observations, flattened and concatenated in order.

    Raises:
        ConfigError: A key is missing or not a ``Box`` space (``where`` names the owner).

    Example:
        >>> flat_size(gym.spaces.Box(-1, 1, (2, 3)), ("obs",), "MyPolicy")
        6
    """
    spaces = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {"obs": space}
    total = 0
    for key in keys:
        sub = spaces.get(key)
        if not isinstance(sub, gym.spaces.Box):
            raise ConfigError(
                f"{where}: observation key {key!r} must be a Box space, got {describe(sub)}; "
                f"available keys: {sorted(spaces)}{_box_hint(space, sub)}"
            )
        total += math.prod(sub.shape)
    return total

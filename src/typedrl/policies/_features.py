"""The observation keys a policy network reads, their flat layout, and its encoding.

A policy's observation keys, each flattened and concatenated in order, are its
*flat layout*: a ``Box`` gives its values, a ``Discrete`` its index (one
column), a ``MultiDiscrete`` its indices, a ``MultiBinary`` its 0/1 entries.
:class:`DiscreteOneHot` turns that layout into a network's input: the index
columns become one-hot codes, the rest passes through. The layout is also the
input of an exported policy (:class:`~typedrl.policies.FlatActor`), which
encodes it the same way.
"""

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, final

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from typedrl._validation import describe
from typedrl.errors import ConfigError

__all__ = [
    "ActionHead",
    "DiscreteOneHot",
    "action_head",
    "default_keys",
    "flat_keys",
    "flat_size",
    "key_spaces",
    "layout_width",
    "split_flat",
]

_LEAVES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


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


class ActionHead(NamedTuple):
    """What a policy's action head outputs for an action space."""

    shape: tuple[int, ...]
    """One row's action shape (``()`` for a Discrete action)."""
    num_outputs: int
    """The head's width: the action's entries (Box) or the choices' logits (Discrete)."""
    discrete: bool
    """Whether the head gives categorical logits instead of Gaussian means."""
    start: int
    """The first action code: ``Discrete(n, start=s)`` codes ``s .. s + n - 1``."""


def action_head(action_space: gym.Space[Any], where: str) -> ActionHead:
    """The head for a Box or Discrete ``action_space``; others are refused in one line."""
    if isinstance(action_space, gym.spaces.Box):
        shape = tuple(action_space.shape)
        return ActionHead(shape, math.prod(shape), discrete=False, start=0)
    if isinstance(action_space, gym.spaces.Discrete):
        # The head samples 0 .. n - 1; the env's codes start at ``start``.
        return ActionHead((), int(action_space.n), discrete=True, start=int(action_space.start))
    raise ConfigError(
        f"{where} supports Box and Discrete action spaces, got {describe(action_space)}"
    )


def key_spaces(space: gym.Space[Any]) -> dict[str, gym.Space[Any]]:
    """The observation space by key: a ``Dict``'s entries, else ``{"obs": space}``."""
    return dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {"obs": space}


def _leaf(space: gym.Space[Any], key: str, where: str) -> gym.Space[Any]:
    """The space of ``key``, one a network can read (Box, Discrete, MultiDiscrete, MultiBinary)."""
    spaces = key_spaces(space)
    sub = spaces.get(key)
    if not isinstance(sub, _LEAVES):
        raise ConfigError(
            f"{where}: observation key {key!r} must be a Box, Discrete, MultiDiscrete or "
            f"MultiBinary space, got {describe(sub)}; available keys: {sorted(spaces)}"
            f"{_box_hint(space, sub)}"
        )
    return sub


def flat_keys(space: gym.Space[Any]) -> list[tuple[str, tuple[int, ...], torch.dtype | None]]:
    """Each key of ``space`` in the flat layout: its shape and the dtype the adapters give it.

    Indices (``Discrete``, ``MultiDiscrete``) come as int64, ``MultiBinary`` as
    int8, anything else as a float (``None``: the flat tensor's own dtype).
    """
    spaces = key_spaces(space)
    return [
        (
            key,
            tuple(sub.shape or ()),
            torch.int64
            if isinstance(sub, gym.spaces.Discrete | gym.spaces.MultiDiscrete)
            else torch.int8
            if isinstance(sub, gym.spaces.MultiBinary)
            else None,
        )
        for key, sub in spaces.items()
    ]


def split_flat(
    obs: Tensor, keys: Sequence[tuple[str, tuple[int, ...], torch.dtype | None]]
) -> dict[str, Tensor]:
    """Cut a flat ``[batch, width]`` observation into its keys (:func:`flat_keys`' layout)."""
    batch = obs.shape[0]
    leaves: dict[str, Tensor] = {}
    start = 0
    for key, shape, dtype in keys:
        width = math.prod(shape)
        leaf = obs[:, start : start + width].reshape(batch, *shape)
        leaves[key] = leaf if dtype is None else leaf.round().to(dtype)
        start += width
    return leaves


def layout_width(space: gym.Space[Any], keys: Sequence[str], where: str) -> int:
    """The width of ``keys``' flat layout (an index is one column; see the module docstring).

    Raises:
        ConfigError: A key is missing or of a space a network cannot read.

    Example:
        >>> space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (3,)), "d": gym.spaces.Discrete(4)})
        >>> layout_width(space, ("x", "d"), "MyPolicy")
        4
    """
    return sum(math.prod(_leaf(space, key, where).shape or ()) for key in keys)


@final
class DiscreteOneHot(nn.Module):
    """A flat layout (see the module docstring) with its index columns as one-hot codes.

    ``Box`` and ``MultiBinary`` columns pass through; each ``Discrete`` and
    ``MultiDiscrete`` column ``c`` of a space with ``n`` values from ``start``
    becomes ``n`` columns, ``1`` at ``c - start``. Only tensor operations on
    fixed slices, so it traces and exports with a dynamic batch size.

    Args:
        space: The observation space.
        keys: The keys of the layout, in order.
        where: Who reads the keys (named in errors).

    Example:
        >>> space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (2,)), "d": gym.spaces.Discrete(3)})
        >>> encode = DiscreteOneHot(space, ("x", "d"), "MyPolicy")
        >>> encode.width, encode(torch.tensor([[0.5, -0.5, 2.0]])).tolist()
        (5, [[0.5, -0.5, 0.0, 0.0, 1.0]])
    """

    def __init__(self, space: gym.Space[Any], keys: Sequence[str], where: str) -> None:
        super().__init__()
        # (start, stop, first, count): a run of columns passed through when count is 0, else
        # the index column `start` of a space with `count` values from `first`.
        self._segments: list[tuple[int, int, int, int]] = []
        column = 0
        width = 0
        for key in keys:
            sub = _leaf(space, key, where)
            size = math.prod(sub.shape or ())
            if isinstance(sub, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
                counts, starts = _counts_and_starts(sub)
                for offset, (count, first) in enumerate(zip(counts, starts, strict=True)):
                    self._segments.append((column + offset, column + offset + 1, first, count))
                    width += count
            elif self._segments and self._segments[-1][3] == 0:
                # Consecutive columns that pass through are one slice.
                self._segments[-1] = (self._segments[-1][0], column + size, 0, 0)
                width += size
            else:
                self._segments.append((column, column + size, 0, 0))
                width += size
            column += size
        self.layout_width = column
        """Width of the flat layout this module reads."""
        self.width = width
        """Width of the encoding: the network's input."""
        self.encodes = any(count > 0 for *_, count in self._segments)
        """Whether some column is an index (else the module returns its input)."""

    def forward(self, flat: Tensor) -> Tensor:
        """``[batch, layout_width]`` features as ``[batch, width]``, in ``flat``'s dtype."""
        if not self.encodes:
            return flat
        pieces: list[Tensor] = []
        for start, stop, first, count in self._segments:
            if count == 0:
                pieces.append(flat[:, start:stop])
                continue
            codes = flat[:, start].round().to(torch.int64) - first
            values = torch.arange(count, device=flat.device)
            pieces.append((codes.unsqueeze(-1) == values).to(flat.dtype))
        return torch.cat(pieces, dim=-1)


def _counts_and_starts(
    space: gym.spaces.Discrete | gym.spaces.MultiDiscrete,
) -> tuple[list[int], list[int]]:
    """Each index column's number of values and first value, flattened in order."""
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.n)], [int(space.start)]
    counts = np.asarray(space.nvec).reshape(-1)
    starts = np.broadcast_to(np.asarray(space.start), np.asarray(space.nvec).shape).reshape(-1)
    return [int(count) for count in counts], [int(first) for first in starts]


def flat_size(space: gym.Space[Any], keys: Sequence[str], where: str) -> int:
    """The width of ``keys``' ``Box`` observations, flattened and concatenated in order.

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

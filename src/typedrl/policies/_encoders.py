"""Encoders chosen from the observation space, over the flat layout a policy network reads.

A policy's observation keys, each flattened and concatenated in order, are its
*flat layout*: a ``Box`` gives its values, a ``Discrete`` its index (one
column), a ``MultiDiscrete`` its indices, a ``MultiBinary`` its 0/1 entries.
:class:`DiscreteOneHot` turns that layout into a network's input: the index
columns become one-hot codes, the rest passes through. The layout is also the
input of an exported policy (:class:`~typedrl.policies.FlatActor`), which
encodes it the same way.

An observation key whose space is an *image* (see :func:`image_layout`) gets
a convolutional encoder that scales its bytes to ``[0, 1]``; every other key
is encoded as :class:`~typedrl.policies.DiscreteOneHot` encodes it (indices
one-hot, ``Box`` and ``MultiBinary`` values as they are). An image key's
columns of the flat layout are reshaped to the image inside its encoder, so
the exported :class:`~typedrl.policies.FlatActor` takes the same input with
or without images.
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeAlias, final, get_args

import gymnasium as gym
import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor, nn

from typedrl import _validation
from typedrl._validation import describe, positive_int
from typedrl.errors import ConfigError

__all__ = [
    "NATURE_MIN_SIDE",
    "ActionHead",
    "DiscreteOneHot",
    "ImageEncoder",
    "ImageEncoderKind",
    "ImageLayout",
    "ObservationEncoder",
    "action_head",
    "build_image_encoders",
    "default_keys",
    "flat_keys",
    "flat_size",
    "image_layout",
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


ImageEncoderKind: TypeAlias = Literal["auto", "nature", "small", "flatten"]
"""How image keys are encoded: ``"auto"`` picks ``"nature"`` for images whose sides are
both at least ``NATURE_MIN_SIDE`` (36), else ``"small"``; ``"nature"`` and ``"small"``
force one convolutional encoder; ``"flatten"`` reads the bytes as plain features (as
every other ``Box``)."""

ImageLayout: TypeAlias = Literal["hwc", "chw"]
"""Where an image's channels are: last (``"hwc"``, Gymnasium's render and MiniGrid) or
first (``"chw"``, ``FrameStackObservation`` over grayscale frames)."""

NATURE_MIN_SIDE = 36
"""The smallest side the Nature CNN reads (its three convolutions leave one pixel)."""

_MAX_CHANNELS = 4
_MIN_SIDE = 7
_DEFAULT_FEATURES: Mapping[str, int] = {"nature": 512, "small": 128}


def image_layout(space: gym.Space[Any]) -> ImageLayout | None:
    """Whether ``space`` is an image, and where its channels are.

    An image is a ``uint8`` ``Box`` of three dimensions, one of them the
    channels: the last if it has at most 4 entries and the other two are at
    least 7 (``"hwc"``), else the first under the same rule (``"chw"``). No
    shape satisfies both rules (a side of 7 or more is not a channel count of
    4 or less), so the choice is never ambiguous. Any other space is not an
    image (``None``) and is read as plain features.

    Example:
        >>> image_layout(gym.spaces.Box(0, 255, (7, 7, 3), np.uint8))
        'hwc'
        >>> image_layout(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))
        'chw'
        >>> image_layout(gym.spaces.Box(0, 255, (84, 84), np.uint8)) is None
        True
    """
    if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8 or len(space.shape) != 3:
        return None
    first, middle, last = space.shape
    if last <= _MAX_CHANNELS and min(first, middle) >= _MIN_SIDE:
        return "hwc"
    if first <= _MAX_CHANNELS and min(middle, last) >= _MIN_SIDE:
        return "chw"
    return None


def _conv(in_channels: int, out_channels: int, kernel: int, stride: int) -> nn.Conv2d:
    """A convolution with orthogonal weights (gain ``sqrt(2)``) and zero bias, as CleanRL's."""
    layer = nn.Conv2d(in_channels, out_channels, kernel, stride=stride)
    nn.init.orthogonal_(layer.weight, gain=math.sqrt(2.0))
    if layer.bias is not None:  # always: Conv2d's bias is typed optional
        nn.init.zeros_(layer.bias)
    return layer


@final
class ImageEncoder(nn.Module):
    """An image's flat bytes to features: reshape, scale by 1/255, convolve, project.

    ``"nature"`` is the network of Mnih et al. (2015), *Human-level control
    through deep reinforcement learning*: 32 8x8 filters of stride 4, 64 4x4
    of stride 2, 64 3x3 of stride 1, each followed by a ReLU, then a linear
    layer and a ReLU (sides of at least ``NATURE_MIN_SIDE``, 36). ``"small"``
    is three 2x2 convolutions of stride 1 (16, 32 and 64 filters) and the
    same projection, for images of a few cells such as MiniGrid's 7x7 view
    (sides of at least 4). The scaling is part of the module, so an exported
    policy takes the raw bytes.

    Args:
        shape: The image's shape in the observation space.
        layout: Where its channels are (:func:`image_layout`).
        kind: ``"nature"`` or ``"small"``.
        features: Width of the output.
        where: Who reads the image (named in errors).

    Raises:
        ConfigError: The image is too small for ``kind``.

    Example:
        >>> encoder = ImageEncoder((7, 7, 3), "hwc", "small", features=32, where="MyPolicy")
        >>> encoder(torch.full((2, 147), 255.0)).shape
        torch.Size([2, 32])
    """

    def __init__(
        self,
        shape: tuple[int, int, int],
        layout: ImageLayout,
        kind: Literal["nature", "small"],
        *,
        features: int,
        where: str,
    ) -> None:
        super().__init__()
        channels, height, width = (
            (shape[2], shape[0], shape[1]) if layout == "hwc" else (shape[0], shape[1], shape[2])
        )
        smallest = NATURE_MIN_SIDE if kind == "nature" else 4
        if min(height, width) < smallest:
            raise ConfigError(
                f"{where}: the {kind!r} image encoder needs sides of at least {smallest}, got an "
                f"image of {height}x{width} (shape {shape}); choose encoder 'small' or 'flatten'"
            )
        self.shape = shape
        self.layout: ImageLayout = layout
        self.kind = kind
        self.features = features
        if kind == "nature":
            convs = [_conv(channels, 32, 8, 4), _conv(32, 64, 4, 2), _conv(64, 64, 3, 1)]
        else:
            convs = [_conv(channels, 16, 2, 1), _conv(16, 32, 2, 1), _conv(32, 64, 2, 1)]
        layers: list[nn.Module] = []
        for conv in convs:
            layers += [conv, nn.ReLU()]
        self.convs = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, channels, height, width)).shape[-1])
        self.project = nn.Linear(flat, features)
        nn.init.orthogonal_(self.project.weight, gain=math.sqrt(2.0))
        nn.init.zeros_(self.project.bias)

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, flat: Float[Tensor, "batch pixels"]) -> Float[Tensor, "batch features"]:
        """``[batch, pixels]`` bytes (as floats, in the space's order) as ``[batch, features]``."""
        image = flat.reshape(flat.shape[0], *self.shape)
        if self.layout == "hwc":
            image = image.permute(0, 3, 1, 2)
        # Bytes to [0, 1], as the Atari agents of Mnih et al. (2015) and CleanRL do; channels
        # last in memory (as an HxWxC image is already): the CPU's convolutions run the Nature
        # CNN's update about 1.3x as fast as on CxHxW frames.
        image = (image / 255.0).contiguous(memory_format=torch.channels_last)
        hidden: Tensor = self.convs(image)
        out: Tensor = torch.relu(self.project(hidden))
        return out


@final
class ObservationEncoder(nn.Module):
    """A flat layout to a network's input: images through CNNs, the rest one-hot or as is.

    Each image key (:func:`image_layout`, unless ``kind`` is ``"flatten"``)
    is cut from the layout and encoded by its :class:`ImageEncoder`; the other
    keys are encoded by :class:`~typedrl.policies.DiscreteOneHot`. The output
    is the images' features in key order, then the other keys' encoding.
    Without image keys this is exactly :class:`~typedrl.policies.DiscreteOneHot`.

    Args:
        space: The observation space.
        keys: The keys of the layout, in order.
        images: The encoder of each image key (shared with other
            ``ObservationEncoder`` objects that read the key);
            :func:`build_image_encoders` builds them.
        where: Who reads the keys (named in errors).

    Example:
        >>> space = gym.spaces.Dict(
        ...     {"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "d": gym.spaces.Discrete(4)}
        ... )
        >>> images = build_image_encoders(space, ("image", "d"), "auto", None, "MyPolicy")
        >>> encoder = ObservationEncoder(space, ("image", "d"), images, "MyPolicy")
        >>> encoder.layout_width, encoder.width
        (148, 132)
    """

    def __init__(
        self,
        space: gym.Space[Any],
        keys: Sequence[str],
        images: Mapping[str, ImageEncoder],
        where: str,
    ) -> None:
        super().__init__()
        self._image_columns: list[tuple[int, int]] = []
        self.images = nn.ModuleList()
        self._vector_columns: list[tuple[int, int]] = []
        vector_keys: list[str] = []
        column = 0
        for key in keys:
            size = layout_width(space, (key,), where)
            if key in images:
                self._image_columns.append((column, column + size))
                self.images.append(images[key])
            else:
                vector_keys.append(key)
                self._vector_columns.append((column, column + size))
            column += size
        self.vectors = DiscreteOneHot(space, vector_keys, where)
        self.layout_width = column
        """Width of the flat layout this module reads."""
        self.width = self.vectors.width + sum(encoder.features for encoder in images.values())
        """Width of the encoding: the network's input."""
        self.has_images = bool(self._image_columns)
        """Whether some key is an image (else the module is a :class:`DiscreteOneHot`)."""

    def forward(self, flat: Tensor) -> Tensor:
        """``[batch, layout_width]`` features as ``[batch, width]``, in ``flat``'s dtype."""
        if not self.has_images:
            encoded: Tensor = self.vectors(flat)
            return encoded
        pieces = [
            encoder(flat[:, start:stop])
            for (start, stop), encoder in zip(self._image_columns, self.images, strict=True)
        ]
        if self._vector_columns:
            vectors = torch.cat([flat[:, start:stop] for start, stop in self._vector_columns], -1)
            pieces.append(self.vectors(vectors))
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=-1)


# A policy factory's keyword arguments come from YAML: checked here, in words.
@_validation.no_type_check
def build_image_encoders(
    space: gym.Space[Any],
    keys: Sequence[str],
    kind: ImageEncoderKind,
    features: int | None,
    where: str,
) -> dict[str, ImageEncoder]:
    """One :class:`ImageEncoder` per image key of ``keys`` (none for ``kind="flatten"``).

    Args:
        space: The observation space.
        keys: The keys the networks read (each image key once).
        kind: The encoder (:data:`ImageEncoderKind`).
        features: Output width of each encoder; ``None``: 512 for ``"nature"``,
            128 for ``"small"``.
        where: Who reads the keys (named in errors).

    Raises:
        ConfigError: ``kind`` or ``features`` is invalid, ``kind`` is
            ``"nature"`` or ``"small"`` and no key is an image, or an image is
            too small for it.

    Example:
        >>> space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        >>> {key: encoder.kind for key, encoder in build_image_encoders(
        ...     space, ("obs",), "auto", None, "MyPolicy").items()}
        {'obs': 'nature'}
    """
    if kind not in get_args(ImageEncoderKind):
        raise ConfigError(
            f"{where}: encoder must be one of {list(get_args(ImageEncoderKind))}, got {kind!r}"
        )
    if features is not None:
        positive_int(where, "image_features", features)
    if kind == "flatten":
        return {}
    spaces = key_spaces(space)
    encoders: dict[str, ImageEncoder] = {}
    for key in dict.fromkeys(keys):
        sub = spaces.get(key)
        layout = None if sub is None else image_layout(sub)
        if sub is None or layout is None:
            continue
        first, middle, last = sub.shape or (0, 0, 0)  # three sides: image_layout checked
        shape = (int(first), int(middle), int(last))
        sides = shape[:2] if layout == "hwc" else shape[1:]
        chosen: Literal["nature", "small"] = (
            kind if kind != "auto" else ("nature" if min(sides) >= NATURE_MIN_SIDE else "small")
        )
        width = features if features is not None else _DEFAULT_FEATURES[chosen]
        encoders[key] = ImageEncoder(shape, layout, chosen, features=width, where=where)
    if kind != "auto" and not encoders:
        raise ConfigError(
            f"{where}: encoder {kind!r} needs an image observation key (a uint8 Box of shape "
            f"HxWxC or CxHxW, C <= {_MAX_CHANNELS}, sides >= {_MIN_SIDE}), got keys "
            f"{list(keys)} of spaces {[key_spaces(space).get(key) for key in keys]}; choose "
            "encoder 'auto' or 'flatten'"
        )
    return encoders

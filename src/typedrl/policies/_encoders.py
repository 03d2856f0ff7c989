"""Encoders chosen from the observation space: convolutional for images, one-hot for indices.

An observation key whose space is an *image* (see :func:`image_layout`) gets
a convolutional encoder that scales its bytes to ``[0, 1]``; every other key
is encoded as :class:`~typedrl.policies.DiscreteOneHot` encodes it (indices
one-hot, ``Box`` and ``MultiBinary`` values as they are). The encoders read
the same flat layout as :class:`~typedrl.policies.DiscreteOneHot` (each key
flattened and concatenated in order; an image key's columns are reshaped to
the image inside its encoder), so the exported
:class:`~typedrl.policies.FlatActor` takes the same input with or without
images.
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias, final, get_args

import gymnasium as gym
import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor, nn

from typedrl import _validation
from typedrl._validation import positive_int
from typedrl.errors import ConfigError
from typedrl.policies._features import DiscreteOneHot, key_spaces, layout_width

__all__ = [
    "NATURE_MIN_SIDE",
    "ImageEncoder",
    "ImageEncoderKind",
    "ImageLayout",
    "ObservationEncoder",
    "build_image_encoders",
    "image_layout",
]

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

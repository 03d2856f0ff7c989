"""Tests for typedrl.policies._encoders: the flat layout and the encoders built over it."""

from typing import Literal

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch import nn

from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError
from typedrl.policies import (
    DiscreteOneHot,
    ImageEncoder,
    MLPActorCritic,
    ObservationEncoder,
    build_image_encoders,
    image_layout,
)
from typedrl.policies._encoders import default_keys, flat_size, layout_width

_BOX = gym.spaces.Box(-1.0, 1.0, (3,))


def test_default_keys_of_a_single_array_and_of_groups() -> None:
    """A single array is "obs"; groups give the first preferred key, else all of them."""
    assert default_keys(_BOX, ("obs", "policy")) == ("obs",)
    groups = gym.spaces.Dict({"critic": _BOX, "policy": _BOX})
    assert default_keys(groups, ("obs", "policy")) == ("policy",)
    assert default_keys(groups, ("obs",)) == ("critic", "policy")


def test_flat_size_sums_the_flattened_keys() -> None:
    """The widths of the named keys add up, each shape flattened."""
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1.0, 1.0, (2, 3)), "b": _BOX})
    assert flat_size(space, ("a", "b"), "P") == 9


def test_flat_size_names_the_key_that_is_not_a_box() -> None:
    """A missing or non-Box key is a ConfigError naming the owner and the keys there are."""
    space = gym.spaces.Dict({"a": _BOX, "d": gym.spaces.Discrete(2)})
    with pytest.raises(ConfigError, match=r"P: observation key 'd' must be a Box.*\['a', 'd'\]"):
        flat_size(space, ("d",), "P")
    with pytest.raises(ConfigError, match="observation key 'x'"):
        flat_size(space, ("x",), "P")


def test_layout_width_counts_an_index_as_one_column() -> None:
    """Box entries, one column per index, one per MultiBinary entry; a Text key is refused."""
    space = gym.spaces.Dict(
        {
            "a": gym.spaces.Box(-1.0, 1.0, (2, 3)),
            "d": gym.spaces.Discrete(5),
            "m": gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]])),
            "b": gym.spaces.MultiBinary(3),
            "t": gym.spaces.Text(4),
        }
    )
    assert layout_width(space, ("a", "d", "m", "b"), "P") == 6 + 1 + 4 + 3
    with pytest.raises(ConfigError, match=r"P: observation key 't' must be a Box, Discrete"):
        layout_width(space, ("t",), "P")


def test_one_hot_codes_each_index_from_its_start() -> None:
    """Each index column becomes its space's codes; the columns between pass through as given."""
    space = gym.spaces.Dict(
        {
            "x": gym.spaces.Box(-1.0, 1.0, (1,)),
            "m": gym.spaces.MultiDiscrete([2, 3], start=[1, -1]),
            "y": gym.spaces.Box(-1.0, 1.0, (2,)),
        }
    )
    encode = DiscreteOneHot(space, ("x", "m", "y"), "P")
    assert (encode.layout_width, encode.width, encode.encodes) == (5, 8, True)
    flat = torch.tensor([[0.5, 2.0, -1.0, 0.25, -0.25], [-0.5, 1.0, 1.0, 0.0, 1.0]])
    expected = torch.tensor(
        [[0.5, 0.0, 1.0, 1.0, 0.0, 0.0, 0.25, -0.25], [-0.5, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0]]
    )
    assert torch.equal(encode(flat), expected)


def test_a_layout_without_indices_is_returned_as_it_is() -> None:
    """Box and MultiBinary keys only: no copy, the same tensor (so MLP runs are unchanged)."""
    space = gym.spaces.Dict({"x": _BOX, "b": gym.spaces.MultiBinary(2)})
    encode = DiscreteOneHot(space, ("x", "b"), "P")
    flat = torch.randn(4, 5)
    assert not encode.encodes
    assert encode(flat) is flat


_MINIGRID = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
_ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


@pytest.mark.parametrize(
    ("space", "layout"),
    [
        (_MINIGRID, "hwc"),
        (gym.spaces.Box(0, 255, (96, 96, 3), np.uint8), "hwc"),
        (gym.spaces.Box(0, 255, (84, 84, 1), np.uint8), "hwc"),
        (_ATARI, "chw"),
        (gym.spaces.Box(0, 255, (1, 7, 9), np.uint8), "chw"),
        (gym.spaces.Box(0.0, 1.0, (7, 7, 3), np.float32), None),  # not bytes
        (gym.spaces.Box(0, 255, (84, 84), np.uint8), None),  # no channel axis
        (gym.spaces.Box(0, 255, (4, 84, 84, 3), np.uint8), None),  # stacked colour frames
        (gym.spaces.Box(0, 255, (6, 6, 3), np.uint8), None),  # sides below 7
        (gym.spaces.Box(0, 255, (7, 7, 5), np.uint8), None),  # five channels
        (gym.spaces.Discrete(4), None),
    ],
)
def test_image_layout_finds_the_channels(space: gym.Space[object], layout: str | None) -> None:
    """uint8, three dims, channels (<= 4) last or first, the other sides >= 7."""
    assert image_layout(space) == layout


def test_nature_and_small_shapes() -> None:
    """Nature: 32x8x8/4, 64x4x4/2, 64x3x3/1 then 512; small: three 2x2 convolutions."""
    nature = ImageEncoder((4, 84, 84), "chw", "nature", features=512, where="P")
    convs = [layer for layer in nature.convs if isinstance(layer, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (4, 32, (8, 8), (4, 4)),
        (32, 64, (4, 4), (2, 2)),
        (64, 64, (3, 3), (1, 1)),
    ]
    assert nature.project.in_features == 64 * 7 * 7
    assert nature(torch.zeros(3, 4 * 84 * 84)).shape == (3, 512)
    small = ImageEncoder((7, 7, 3), "hwc", "small", features=32, where="P")
    assert [c.kernel_size for c in small.convs if isinstance(c, nn.Conv2d)] == [(2, 2)] * 3
    assert small.project.in_features == 64 * 4 * 4
    assert small(torch.zeros(5, 147)).shape == (5, 32)


def test_images_too_small_for_their_encoder_are_refused() -> None:
    """The Nature CNN needs sides of 36: a 7x7 image is a ConfigError naming the fix."""
    with pytest.raises(ConfigError, match=r"P: the 'nature' .* at least 36, got .* 7x7.*'small'"):
        ImageEncoder((7, 7, 3), "hwc", "nature", features=8, where="P")


def test_bytes_are_scaled_and_hwc_is_read_as_chw() -> None:
    """The encoder reads bytes / 255 and permutes HxWxC to CxHxW before its convolutions."""
    torch.manual_seed(0)
    hwc = ImageEncoder((8, 9, 2), "hwc", "small", features=16, where="P")
    chw = ImageEncoder((2, 8, 9), "chw", "small", features=16, where="P")
    chw.load_state_dict(hwc.state_dict())
    image = torch.randint(0, 256, (3, 8, 9, 2)).float()
    expected = torch.relu(hwc.project(hwc.convs(image.permute(0, 3, 1, 2) / 255.0)))
    torch.testing.assert_close(hwc(image.reshape(3, -1)), expected)
    torch.testing.assert_close(chw(image.permute(0, 3, 1, 2).reshape(3, -1)), expected)


@pytest.mark.parametrize(("shape", "layout"), [((4, 84, 84), "chw"), ((84, 84, 4), "hwc")])
def test_the_convolutions_read_channels_last_memory(
    shape: tuple[int, int, int], layout: Literal["chw", "hwc"]
) -> None:
    """Either layout reaches the first convolution channels-last in memory (faster on the CPU)."""
    encoder = ImageEncoder(shape, layout, "nature", features=8, where="P")
    seen: list[torch.Tensor] = []
    encoder.convs[0].register_forward_hook(lambda _module, args, _out: seen.append(args[0]))
    encoder(torch.zeros(2, 4 * 84 * 84))
    assert seen[0].is_contiguous(memory_format=torch.channels_last)


def test_auto_picks_nature_for_large_images_and_small_for_small_ones() -> None:
    """auto: sides >= 36 get the Nature CNN (512 features), smaller ones the small CNN (128)."""
    space = gym.spaces.Dict({"frames": _ATARI, "view": _MINIGRID, "x": gym.spaces.Box(-1, 1, (2,))})
    encoders = build_image_encoders(space, ("frames", "view", "x"), "auto", None, "P")
    assert {key: (e.kind, e.features) for key, e in encoders.items()} == {
        "frames": ("nature", 512),
        "view": ("small", 128),
    }
    assert build_image_encoders(space, ("view",), "small", 64, "P")["view"].features == 64
    assert build_image_encoders(space, ("frames",), "flatten", None, "P") == {}


def test_a_forced_encoder_without_images_is_refused() -> None:
    """encoder 'nature' or 'small' on keys without an image is a ConfigError."""
    with pytest.raises(ConfigError, match=r"P: encoder 'small' needs an image observation key"):
        build_image_encoders(gym.spaces.Box(-1, 1, (3,)), ("obs",), "small", None, "P")


def test_observation_encoder_concatenates_images_then_the_other_keys() -> None:
    """Images' features first, then the one-hot of the other keys; no image: DiscreteOneHot."""
    space = gym.spaces.Dict({"direction": gym.spaces.Discrete(4), "image": _MINIGRID})
    keys = ("direction", "image")
    images = build_image_encoders(space, keys, "auto", 8, "P")
    encoder = ObservationEncoder(space, keys, images, "P")
    assert (encoder.layout_width, encoder.width) == (1 + 147, 8 + 4)
    flat = torch.cat((torch.tensor([[2.0]]), torch.full((1, 147), 255.0)), dim=-1)
    out = encoder(flat)
    torch.testing.assert_close(out[:, :8], images["image"](flat[:, 1:]))
    assert out[0, 8:].tolist() == [0.0, 0.0, 1.0, 0.0]
    plain = ObservationEncoder(space, ("direction",), {}, "P")
    reference = DiscreteOneHot(space, ("direction",), "P")
    assert not plain.has_images
    torch.testing.assert_close(plain(flat[:, :1]), reference(flat[:, :1]))


def test_actor_critic_shares_the_cnn_and_never_normalises_images() -> None:
    """One CNN serves actor and critic; only the Box vector key gets running statistics."""
    space = gym.spaces.Dict({"image": _MINIGRID, "x": gym.spaces.Box(-1, 1, (2,))})
    model = MLPActorCritic(
        space, gym.spaces.Discrete(3), encoder="auto", normalize_observations=True
    )
    assert model.actor_encoding.images[0] is model.critic_encoding.images[0]
    assert model.obs_normalizers is not None
    assert list(model.obs_normalizers) == ["x"]
    obs = TensorDict(
        {
            "image": torch.randint(0, 256, (6, 7, 7, 3), dtype=torch.uint8),
            "x": torch.randn(6, 2),
        },
        batch_size=[6],
    )
    model.update_normalizers(obs, dist=SingleProcess())
    out = model.act(obs)
    assert out["action"].shape == (6,)
    assert out["value"].shape == (6,)
    parameters = list(model.parameters())
    assert len(parameters) == len({id(p) for p in parameters})


def test_flatten_keeps_the_mlp_of_earlier_releases() -> None:
    """MLPActorCritic's default reads an image as plain features, with the same weights' names."""
    model = MLPActorCritic(_ATARI, gym.spaces.Discrete(6))
    first = model.actor[0]
    assert isinstance(first, nn.Linear)
    assert first.in_features == 4 * 84 * 84
    assert {name.split(".")[0] for name in model.state_dict()} == {"actor", "critic", "log_std"}
    cnn = MLPActorCritic(_ATARI, gym.spaces.Discrete(6), encoder="auto", actor_hidden=())
    encoder = cnn.actor_encoding.images[0]
    assert isinstance(encoder, ImageEncoder)
    assert isinstance(encoder.convs[0], nn.Conv2d)
    head = cnn.actor[0]
    assert isinstance(head, nn.Linear)
    assert head.in_features == 512


def test_an_unknown_encoder_or_a_bad_width_is_refused() -> None:
    """The encoder is one of the four names; image_features a positive int."""
    with pytest.raises(ConfigError, match=r"P: encoder must be one of \['auto', 'nature'"):
        build_image_encoders(_MINIGRID, ("obs",), "resnet", None, "P")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"P\.image_features must be a positive int, got 0"):
        build_image_encoders(_MINIGRID, ("obs",), "auto", 0, "P")

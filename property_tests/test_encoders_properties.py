"""Property tests: image layouts are never ambiguous, encoders read any image they accept."""

import gymnasium as gym
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from typedrl.policies import ImageEncoder, image_layout

_sides = st.integers(min_value=1, max_value=40)


@given(shape=st.tuples(_sides, _sides, _sides))
def test_a_layout_puts_few_channels_beside_two_large_sides(shape: tuple[int, int, int]) -> None:
    """hwc and chw each mean <= 4 channels at that end and the other sides >= 7; else None."""
    layout = image_layout(gym.spaces.Box(0, 255, shape, np.uint8))
    first, middle, last = shape
    hwc = last <= 4 and min(first, middle) >= 7
    chw = first <= 4 and min(middle, last) >= 7
    assert not (hwc and chw)
    assert layout == ("hwc" if hwc else "chw" if chw else None)
    assert image_layout(gym.spaces.Box(0.0, 255.0, shape, np.float32)) is None


@settings(max_examples=25, deadline=None)
@given(
    height=st.integers(min_value=7, max_value=12),
    width=st.integers(min_value=7, max_value=12),
    channels=st.integers(min_value=1, max_value=4),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_the_small_encoder_reads_bytes_in_both_layouts_alike(
    height: int, width: int, channels: int, seed: int
) -> None:
    """The same weights give the same features for an image stored HxWxC or CxHxW."""
    torch.manual_seed(seed)
    hwc = ImageEncoder((height, width, channels), "hwc", "small", features=8, where="P")
    chw = ImageEncoder((channels, height, width), "chw", "small", features=8, where="P")
    chw.load_state_dict(hwc.state_dict())
    image = torch.randint(0, 256, (2, height, width, channels)).float()
    from_hwc = hwc(image.reshape(2, -1))
    from_chw = chw(image.permute(0, 3, 1, 2).reshape(2, -1))
    torch.testing.assert_close(from_hwc, from_chw)
    assert bool(torch.isfinite(from_hwc).all())
    assert bool((from_hwc >= 0).all())

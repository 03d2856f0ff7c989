"""Tests for typedrl.policies._features."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.errors import ConfigError
from typedrl.policies import DiscreteOneHot
from typedrl.policies._features import default_keys, flat_size, layout_width

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

"""Tests for typedrl.policies._features."""

import gymnasium as gym
import pytest

from typedrl.errors import ConfigError
from typedrl.policies._features import default_keys, flat_size

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

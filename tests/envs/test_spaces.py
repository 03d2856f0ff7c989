"""Tests for typedrl.envs._spaces.ObservationConverter."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.envs._spaces import ObservationConverter
from typedrl.errors import SpecError

CPU = torch.device("cpu")


def test_batch_copies_the_source_buffer() -> None:
    """Converted tensors do not alias the env's NumPy buffer."""
    converter = ObservationConverter(gym.spaces.Box(-1, 1, (2,)), num_envs=2, device=CPU)
    source = np.zeros((2, 2), dtype=np.float32)
    obs = converter.batch(source)
    source[:] = 5.0
    assert obs["obs"].sum().item() == 0.0


def test_batch_with_rows_replaces_rows() -> None:
    """batch_with_rows swaps the given rows for single observations, leaf by leaf."""
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,)), "b": gym.spaces.Discrete(3)})
    converter = ObservationConverter(space, num_envs=3, device=CPU)
    data: dict[str, np.ndarray] = {"a": np.zeros((3, 2), np.float32), "b": np.zeros(3, np.int64)}
    obs = converter.batch_with_rows(
        data, [0, 2], [{"a": np.ones(2), "b": 2}, {"a": -np.ones(2), "b": 1}]
    )
    assert obs.batch_size == torch.Size([3])
    assert obs["b"].tolist() == [2, 0, 1]
    assert obs["a"][:, 0].tolist() == [1.0, 0.0, -1.0]
    assert obs["a"].dtype == torch.float32
    assert data["b"].tolist() == [0, 0, 0]


def test_dict_space_needs_dict_data() -> None:
    """A non-dict batch for a Dict space is reported."""
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,))})
    converter = ObservationConverter(space, num_envs=1, device=CPU)
    with pytest.raises(SpecError, match="expected a dict observation"):
        converter.batch(np.zeros((1, 2)))


def test_unsupported_space_names_the_key() -> None:
    """Unsupported leaves are reported with their position in the space."""
    space = gym.spaces.Dict({"text": gym.spaces.Text(3)})
    with pytest.raises(SpecError, match=r"observation space\['text'\]"):
        ObservationConverter(space, num_envs=1, device=CPU)


def test_batch_without_copy_shares_fresh_arrays() -> None:
    """copy=False converts arrays the caller owns in place, casting when needed."""
    converter = ObservationConverter(gym.spaces.Box(-1, 1, (2,)), num_envs=2, device=CPU)
    fresh = np.zeros((2, 2), dtype=np.float32)
    obs = converter.batch(fresh, copy=False)
    assert np.shares_memory(obs["obs"].numpy(), fresh)
    wide = np.zeros((2, 2), dtype=np.float64)
    cast = converter.batch(wide, copy=False)["obs"]
    assert cast.dtype == torch.float32
    assert not np.shares_memory(cast.numpy(), wide)


def test_batch_without_copy_keeps_dict_nesting() -> None:
    """copy=False applies to every leaf of a nested Dict space."""
    space = gym.spaces.Dict({"a": gym.spaces.Dict({"b": gym.spaces.Discrete(3)})})
    converter = ObservationConverter(space, num_envs=2, device=CPU)
    obs = converter.batch({"a": {"b": np.array([1, 2])}}, copy=False)
    assert obs["a", "b"].tolist() == [1, 2]
    assert obs["a"].batch_size == torch.Size([2])


def test_batch_with_rows_aliases_neither_batch_nor_items() -> None:
    """The terminal batch is built from copies of the batch and of the row items."""
    converter = ObservationConverter(gym.spaces.Box(-9, 9, (2,)), num_envs=2, device=CPU)
    data = np.zeros((2, 2), dtype=np.float32)
    item = np.ones(2, dtype=np.float32)
    obs = converter.batch_with_rows(data, [1], [item])
    data[:] = 5.0
    item[:] = 7.0
    assert obs["obs"].tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_batch_with_rows_needs_one_item_per_row() -> None:
    """Rows and items must pair up."""
    converter = ObservationConverter(gym.spaces.Box(-1, 1, (2,)), num_envs=2, device=CPU)
    with pytest.raises(ValueError, match="2 rows but 1 items"):
        converter.batch_with_rows(np.zeros((2, 2), np.float32), [0, 1], [np.ones(2)])

"""Tests for typedrl._tensor_checks."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl._tensor_checks import ActionChecker, action_dtype_for, check_action
from typedrl.errors import SpecError

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("space", "action"),
    [
        (gym.spaces.Box(-1, 1, (2,), np.float32), torch.zeros(3, 2)),
        (gym.spaces.Discrete(4), torch.zeros(3, dtype=torch.int64)),
        (gym.spaces.MultiDiscrete([2, 3]), torch.zeros(3, 2, dtype=torch.int32)),
        (gym.spaces.MultiBinary(2), torch.zeros(3, 2, dtype=torch.bool)),
    ],
)
def test_check_action_accepts(space: gym.Space[Any], action: torch.Tensor) -> None:
    """Well-formed action batches pass and are returned unchanged."""
    assert check_action(action, num_envs=3, space=space, device=CPU, where="t") is action


@pytest.mark.parametrize(
    ("space", "action", "message"),
    [
        (gym.spaces.Box(-1, 1, (2,)), [0.0, 0.0], "must be a torch.Tensor"),
        (gym.spaces.Box(-1, 1, (2,)), torch.zeros(3), r"shape \[3, 2\].*got \[3\]"),
        (gym.spaces.Box(-1, 1, (2,)), torch.zeros(3, 2, dtype=torch.int64), "floating point"),
        (gym.spaces.Discrete(2), torch.zeros(3), "integer dtype, got torch.float32"),
        (gym.spaces.Discrete(2), torch.zeros(3, 1, dtype=torch.int64), r"shape \[3\]"),
    ],
)
def test_check_action_rejects(space: gym.Space[Any], action: object, message: str) -> None:
    """Wrong type, shape or dtype raise a SpecError naming expected and actual."""
    with pytest.raises(SpecError, match=message):
        check_action(action, num_envs=3, space=space, device=CPU, where="t")


def test_check_action_rejects_wrong_device() -> None:
    """An action on another device is rejected (meta stands in for an accelerator)."""
    action = torch.zeros(3, 2, device="meta")
    with pytest.raises(SpecError, match="action is on meta"):
        check_action(action, num_envs=3, space=gym.spaces.Box(-1, 1, (2,)), device=CPU, where="t")


def test_action_dtype_for() -> None:
    """Box actions travel as floats, the discrete families as int64."""
    assert action_dtype_for(gym.spaces.Box(-1, 1, (1,)), torch.float64) == torch.float64
    assert action_dtype_for(gym.spaces.MultiDiscrete([2, 2])) == torch.int64
    with pytest.raises(SpecError, match="unsupported action space"):
        action_dtype_for(gym.spaces.Text(5))


def _checker(space: gym.Space[Any], device: torch.device = CPU) -> ActionChecker:
    return ActionChecker(num_envs=3, space=space, device=device, where="t")


@pytest.mark.parametrize(
    ("space", "action"),
    [
        (gym.spaces.Box(-1, 1, (2,), np.float32), torch.zeros(3, 2)),
        (gym.spaces.Box(-1, 1, (2,), np.float32), torch.zeros(3, 2, dtype=torch.float16)),
        (gym.spaces.Discrete(4), torch.zeros(3, dtype=torch.int64)),
        (gym.spaces.Discrete(4), torch.zeros(3, dtype=torch.uint8)),
        (gym.spaces.MultiDiscrete([2, 3]), torch.zeros(3, 2, dtype=torch.int32)),
        (gym.spaces.MultiBinary(2), torch.zeros(3, 2, dtype=torch.bool)),
        (gym.spaces.Box(-1, 1, (2,)), torch.nn.Parameter(torch.zeros(3, 2))),
    ],
)
def test_action_checker_accepts(space: gym.Space[Any], action: torch.Tensor) -> None:
    """The bound checker accepts what check_action accepts and returns it unchanged."""
    assert _checker(space)(action) is action


@pytest.mark.parametrize(
    ("space", "action", "message"),
    [
        (gym.spaces.Box(-1, 1, (2,)), [0.0, 0.0], "t: action must be a torch.Tensor"),
        (gym.spaces.Box(-1, 1, (2,)), torch.zeros(3), r"shape \[3, 2\].*got \[3\]"),
        (gym.spaces.Box(-1, 1, (2,)), torch.zeros(3, 2, dtype=torch.int64), "floating point"),
        (gym.spaces.Discrete(2), torch.zeros(3), "integer dtype, got torch.float32"),
        (gym.spaces.Discrete(2), torch.zeros(3, dtype=torch.bool), "integer dtype, got torch.bool"),
        (gym.spaces.MultiBinary(2), torch.zeros(3, 2), "integer dtype, got torch.float32"),
        (gym.spaces.Discrete(2), torch.zeros(3, 1, dtype=torch.int64), r"shape \[3\]"),
    ],
)
def test_action_checker_rejects_like_check_action(
    space: gym.Space[Any], action: object, message: str
) -> None:
    """Rejected actions raise the SpecError check_action raises, message included."""
    with pytest.raises(SpecError, match=message):
        _checker(space)(action)


def test_action_checker_rejects_wrong_device() -> None:
    """The device is part of the fast test (meta stands in for an accelerator)."""
    space = gym.spaces.Box(-1, 1, (2,))
    with pytest.raises(SpecError, match="action is on meta"):
        _checker(space)(torch.zeros(3, 2, device="meta"))
    meta = torch.zeros(3, 2, device="meta")
    assert _checker(space, torch.device("meta"))(meta) is meta
    with pytest.raises(SpecError, match="action is on cpu"):
        _checker(space, torch.device("meta"))(torch.zeros(3, 2))


def test_same_device_treats_an_index_free_device_as_index_zero() -> None:
    """ "cuda" and "cuda:0" are one device; types must match; every CPU is the CPU."""
    from typedrl._tensor_checks import same_device

    assert same_device("cuda", "cuda:0")
    assert same_device(torch.device("cpu"), "cpu")
    assert not same_device("cuda:1", "cuda")
    assert not same_device("cpu", "cuda:0")

"""Tests for typedrl.types: the public shape aliases."""

import torch
from tensordict import TensorDict

from typedrl import types

_PUBLIC_NAMES = {
    "Action",
    "BatchAction",
    "BatchIndices",
    "BatchScalar",
    "ContinuousAction",
    "DiscreteAction",
    "Done",
    "EnvScalar",
    "ObjectiveScale",
    "Obs",
    "ObsMask",
    "ObsVector",
    "Reward",
    "RolloutFlag",
    "RolloutScalar",
    "Valid",
}


def test_public_names_exist() -> None:
    """typedrl.types exports every shape alias, and each name resolves."""
    assert set(types.__all__) == _PUBLIC_NAMES
    assert [name for name in types.__all__ if not hasattr(types, name)] == []


def test_aliases_describe_their_axes() -> None:
    """Each alias accepts its documented rank and dtype class and refuses others."""
    assert isinstance(torch.zeros(3), types.Reward)
    assert not isinstance(torch.zeros(3, 1), types.Reward)
    assert isinstance(torch.zeros(3, dtype=torch.bool), types.Done)
    assert not isinstance(torch.zeros(3), types.Done)
    assert isinstance(torch.zeros(4, 3), types.RolloutScalar)
    assert isinstance(torch.zeros(4, 3, dtype=torch.bool), types.RolloutFlag)
    assert isinstance(torch.zeros(5, dtype=torch.int64), types.BatchIndices)
    assert not isinstance(torch.zeros(5, dtype=torch.int32), types.BatchIndices)
    assert isinstance(torch.zeros(3, 2, 2, dtype=torch.uint8), types.Action)
    assert types.Obs is TensorDict

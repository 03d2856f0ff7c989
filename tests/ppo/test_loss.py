"""Tests for typedrl.ppo._algorithm's loss: the minibatch selection of an epoch's samples."""

import pytest
import torch
from tensordict import TensorDict

from typedrl.ppo._algorithm import EpochData


def _epoch(obs: TensorDict, *, with_valid: bool) -> EpochData:
    rows = obs.batch_size[0]
    generator = torch.Generator().manual_seed(0)
    return EpochData(
        obs=obs,
        action=torch.randint(0, 3, (rows,), generator=generator),
        log_prob=torch.randn(rows, generator=generator),
        value=torch.randn(rows, generator=generator),
        valid=torch.rand(rows, generator=generator) > 0.2 if with_valid else None,
        advantage=torch.randn(rows, generator=generator),
        returns=torch.randn(rows, generator=generator),
    )


def _flat_obs(rows: int) -> TensorDict:
    return TensorDict(
        {"obs": torch.randn(rows, 4), "pixels": torch.randint(0, 255, (rows, 2, 3, 3))},
        batch_size=[rows],
        device="cpu",
    )


def _nested_obs(rows: int) -> TensorDict:
    return TensorDict(
        {"robot": {"joint": torch.randn(rows, 2)}, "goal": torch.randn(rows, 3)},
        batch_size=[rows],
        device="cpu",
    )


def _deviceless_obs(rows: int) -> TensorDict:
    return TensorDict({"obs": torch.randn(rows, 4)}, batch_size=[rows])


@pytest.mark.parametrize("make_obs", [_flat_obs, _nested_obs, _deviceless_obs])
@pytest.mark.parametrize("with_valid", [True, False])
def test_select_takes_exactly_the_rows_advanced_indexing_takes(
    make_obs: object, with_valid: bool
) -> None:
    """Every field, every observation leaf (flat, nested, without a device) and the mask."""
    assert callable(make_obs)
    epoch = _epoch(make_obs(50), with_valid=with_valid)
    indices = torch.tensor([7, 0, 49, 7, 23])
    batch = epoch.select(indices)
    assert batch.obs.batch_size == torch.Size([5])
    assert batch.obs.device == epoch.obs.device
    assert (batch.obs == epoch.obs[indices]).all()
    assert set(batch.obs.keys(include_nested=True, leaves_only=True)) == set(
        epoch.obs.keys(include_nested=True, leaves_only=True)
    )
    for name in ("action", "log_prob", "value", "advantage", "returns"):
        assert torch.equal(getattr(batch, name), getattr(epoch, name)[indices]), name
    if with_valid:
        assert epoch.valid is not None
        assert batch.valid is not None
        assert torch.equal(batch.valid, epoch.valid[indices])
    else:
        assert batch.valid is None


def test_selected_rows_are_copies_not_views() -> None:
    """Writing into a minibatch leaves the epoch as it was."""
    epoch = _epoch(_flat_obs(10), with_valid=False)
    before = epoch.obs["obs"].clone()
    batch = epoch.select(torch.arange(3))
    batch.obs["obs"].fill_(7.0)
    batch.advantage.fill_(7.0)
    assert torch.equal(epoch.obs["obs"], before)
    assert not (epoch.advantage == 7.0).any()

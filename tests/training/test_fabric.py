"""Tests for typedrl.training._fabric, and the two-rank launcher the agent's DDP tests share."""

import os
from datetime import timedelta

import pytest
import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies.ddp import DDPStrategy
from torch import nn

from typedrl.errors import ConfigError
from typedrl.training._fabric import (
    check_accelerator,
    default_fabric,
    setup_module_and_optimizer,
)


def launch_two_rank_fabric(rank: int, port: int) -> Fabric:
    """Join a two-rank gloo group as ``rank`` through Fabric (processes started by the caller)."""
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "GROUP_RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "TORCHELASTIC_RUN_ID": "typedrl-test",
        }
    )
    torch.set_num_threads(1)
    strategy = DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=45))
    fabric = Fabric(accelerator="cpu", devices=2, strategy=strategy)
    fabric.launch()
    return fabric


def test_default_fabric_is_a_launched_single_process() -> None:
    """default_fabric gives one launched process on CPU (or one GPU)."""
    fabric = default_fabric()
    assert fabric.world_size == 1
    assert fabric.global_rank == 0
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert fabric.device.type == expected


class _TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.body(x)
        return out

    def doubled(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.body(x)
        return 2.0 * out


def test_setup_module_and_optimizer_keeps_methods_and_steps() -> None:
    """The wrapped module forwards attribute access and marked methods; the optimizer steps."""
    fabric = Fabric(accelerator="cpu", devices=1)
    fabric.launch()
    module = _TwoHeads()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    wrapped, wrapped_optimizer = setup_module_and_optimizer(
        fabric, module, optimizer, forward_methods=("doubled",)
    )
    x = torch.ones(3, 2)
    assert torch.equal(wrapped.doubled(x), 2.0 * module.body(x))
    before = module.body.weight.detach().clone()
    fabric.backward(wrapped.doubled(x).sum())
    wrapped_optimizer.step()
    assert not torch.equal(before, module.body.weight)
    assert wrapped_optimizer.param_groups[0]["lr"] == 0.1


def test_check_accelerator_counts_the_gpus_torch_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    """ "cuda" asking for more devices than torch sees is a ConfigError; "cpu" is never refused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_accelerator("cuda", 1)
    check_accelerator("cpu", 4)
    with pytest.raises(ConfigError, match=r"expected 2 CUDA device\(s\), torch sees 1"):
        check_accelerator("cuda", 2)

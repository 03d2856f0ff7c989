"""Tests for typedrl.agents._fabric, and the two-rank launcher the agent's DDP tests share."""

import multiprocessing
import os
import socket
from datetime import timedelta
from typing import Any

import pytest
import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies.ddp import DDPStrategy
from torch import nn

from typedrl.agents._fabric import default_fabric, setup_module_and_optimizer

JOIN_TIMEOUT_S = 60.0


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


def _run_and_tear_down(target: Any, rank: int, port: int, *args: Any) -> None:
    """Run ``target`` on this rank, then destroy the process group before the process exits.

    A gloo group still alive at interpreter exit can abort the process
    ("terminate called without an active exception"), which would read as a failure.
    """
    try:
        target(rank, port, *args)
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def run_two_ranks(target: Any, *args: Any) -> None:
    """Run ``target(rank, port, *args)`` on two spawned processes; fail on error or timeout."""
    context = multiprocessing.get_context("spawn")
    port = free_port()
    processes = [
        context.Process(target=_run_and_tear_down, args=(target, rank, port, *args), daemon=True)
        for rank in (0, 1)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join(JOIN_TIMEOUT_S)
        hung = [rank for rank, process in enumerate(processes) if process.is_alive()]
        if hung:
            pytest.fail(f"ranks {hung} did not finish within {JOIN_TIMEOUT_S} s")
        codes = [process.exitcode for process in processes]
        if codes != [0, 0]:
            pytest.fail(f"ranks exited with codes {codes}")
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(5.0)
            process.close()


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

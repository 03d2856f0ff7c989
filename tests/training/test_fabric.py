"""Tests for typedrl.training._fabric, and the two-rank launcher the agent's DDP tests share."""

import os
from datetime import timedelta

import pytest
import torch
from lightning_fabric import Fabric
from lightning_fabric.strategies.ddp import DDPStrategy
from torch import nn

from typedrl.errors import ConfigError
from typedrl.training._fabric import (
    Launch,
    check_accelerator,
    default_fabric,
    fabric_from_environment,
    read_launch,
    setup_module_and_optimizer,
)


def launch_two_rank_fabric(
    rank: int, port: int, *, timeout: timedelta = timedelta(seconds=45)
) -> Fabric:
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
    strategy = DDPStrategy(process_group_backend="gloo", timeout=timeout)
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


_SLURM_TWO_NODES = {
    "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "2",
    "SLURM_NNODES": "2",
    "SLURM_PROCID": "3",
}


def test_read_launch_takes_torchrun_and_srun_worlds() -> None:
    """torchrun's and srun's variables give the world size, processes per node, nodes and rank."""
    torchrun = {
        "TORCHELASTIC_RUN_ID": "job",
        "RANK": "2",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_WORLD_SIZE": "2",
    }
    assert read_launch(torchrun) == Launch(
        launcher="torchrun",
        world_size=4,
        processes_per_node=2,
        num_nodes=2,
        global_rank=2,
        described="WORLD_SIZE=4, LOCAL_WORLD_SIZE=2, GROUP_WORLD_SIZE=2",
    )
    slurm = read_launch(_SLURM_TWO_NODES)
    assert (slurm.launcher, slurm.world_size, slurm.processes_per_node) == ("srun", 4, 2)
    assert (slurm.num_nodes, slurm.global_rank) == (2, 3)
    # torchrun inside a SLURM allocation is torchrun's world, as Lightning decides.
    assert read_launch({**_SLURM_TWO_NODES, **torchrun}).launcher == "torchrun"
    assert read_launch({**_SLURM_TWO_NODES, "SLURM_JOB_NAME": "interactive"}).launcher == "none"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"SLURM_NTASKS": "2", "SLURM_PROCID": "0"},
            "srun: SLURM_NTASKS=2 without SLURM_NTASKS_PER_NODE; ask for the tasks per node",
        ),
        (
            {**_SLURM_TWO_NODES, "SLURM_NNODES": "3"},
            "srun: 4 process(es) are not 3 node(s) of 2 (SLURM_NTASKS=4, "
            "SLURM_NTASKS_PER_NODE=2, SLURM_NNODES=3); launch the same number",
        ),
        (
            {"TORCHELASTIC_RUN_ID": "job", "WORLD_SIZE": "two"},
            "torchrun: expected WORLD_SIZE to be a non-negative integer, got 'two'",
        ),
    ],
)
def test_read_launch_refuses_a_launch_it_cannot_read(environ: dict[str, str], message: str) -> None:
    """Missing, non-integer or uneven launch variables are one ConfigError naming them."""
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_launch(environ)


def test_fabric_from_environment_refuses_what_the_launch_contradicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """devices or num_nodes other than torchrun's are refused before anything connects."""
    for key, value in {
        "TORCHELASTIC_RUN_ID": "job",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
    }.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=r"--devices 1: torchrun launched 2 process\(es\) per"):
        fabric_from_environment(devices=1)
    with pytest.raises(ConfigError, match=r"--num-nodes 2: torchrun launched 1 node\(s\)"):
        fabric_from_environment(num_nodes=2)


def test_leaving_without_a_group_does_nothing() -> None:
    """A single process, or a group already left: no barrier, no destroy, no error."""
    from typedrl.training import _fabric, leave_process_group

    assert not torch.distributed.is_initialized()
    leave_process_group(default_fabric())
    assert _fabric._FINISHED_WORK == []
    _fabric._destroy_if_initialized()  # the NCCL exit hook after leave_process_group
    assert not torch.distributed.is_initialized()

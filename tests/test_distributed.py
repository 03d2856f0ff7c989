"""Tests for typedrl.distributed: the three implementations and agree_on."""

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist
from lightning_fabric import Fabric
from lightning_fabric.strategies.ddp import DDPStrategy
from torch import Tensor

from tests.multiprocess import free_port, run_two_ranks
from typedrl.distributed import (
    Distributed,
    FabricDistributed,
    SingleProcess,
    TorchDistributed,
    agree_on,
    collective_failure,
    collective_timeout,
    raise_together,
)
from typedrl.errors import ConfigError, DistributedError


class _CannedWorld:
    """A Distributed double whose all_gather (and all_gather_object) return preset rows in turn."""

    def __init__(self, gathers: Sequence[list[Any]], objects: Sequence[list[Any]] = ()) -> None:
        self._gathers = list(gathers)
        self._objects = list(objects)
        self._world_size = len(self._gathers[0])

    @property
    def world_size(self) -> int:
        return self._world_size

    @property
    def rank(self) -> int:
        return 0

    @property
    def is_main(self) -> bool:
        return True

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def all_reduce_sum(self, tensor: Tensor) -> Tensor:
        return tensor * self.world_size

    def all_gather(self, tensor: Tensor) -> Tensor:
        rows = self._gathers.pop(0)
        return torch.tensor(rows, dtype=tensor.dtype).reshape(len(rows), *tensor.shape)

    def all_gather_object(self, obj: object) -> list[Any]:
        return self._objects.pop(0) if self._objects else [obj] * self.world_size

    def broadcast(self, tensor: Tensor, src: int = 0) -> Tensor:
        return tensor.clone()

    def barrier(self) -> None:
        pass


# ---------------------------------------------------------------- SingleProcess


def test_single_process_is_a_world_of_one() -> None:
    """Rank 0 of 1, main, on the device given; satisfies the protocol."""
    dist = SingleProcess(device="meta")
    assert (dist.world_size, dist.rank, dist.is_main) == (1, 0, True)
    assert dist.device == torch.device("meta")
    assert isinstance(dist, Distributed)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.float32, torch.bool])
def test_single_process_collectives_are_copies(dtype: torch.dtype) -> None:
    """Collectives return new tensors with the input's dtype and values."""
    dist = SingleProcess()
    tensor = torch.tensor([[1, 0], [3, 4]]).to(dtype)
    for result in (dist.all_reduce_sum(tensor), dist.broadcast(tensor)):
        assert result.dtype == dtype
        assert torch.equal(result, tensor)
        assert result.data_ptr() != tensor.data_ptr()
    gathered = dist.all_gather(tensor)
    assert gathered.shape == (1, 2, 2)
    assert torch.equal(gathered[0], tensor)
    assert gathered.data_ptr() != tensor.data_ptr()
    dist.barrier()


def test_single_process_rejects_other_broadcast_source() -> None:
    """Only rank 0 exists."""
    with pytest.raises(DistributedError, match=r"rank in \[0, 1\), got src=1"):
        SingleProcess().broadcast(torch.zeros(1), src=1)


# ---------------------------------------------------------------- TorchDistributed


def test_torch_distributed_needs_a_process_group() -> None:
    """Without init_process_group the error says what to do."""
    with pytest.raises(DistributedError, match="init_process_group"):
        TorchDistributed()


@pytest.fixture
def world_of_one() -> Iterator[None]:
    torch_dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        torch_dist.destroy_process_group()


@pytest.mark.usefixtures("world_of_one")
def test_torch_distributed_in_a_group_of_one() -> None:
    """On a one-rank gloo group every collective keeps values, dtype and the input."""
    dist = TorchDistributed()
    assert isinstance(dist, Distributed)
    assert (dist.world_size, dist.rank, dist.is_main, dist.device) == (
        1,
        0,
        True,
        torch.device("cpu"),
    )
    tensor = torch.tensor([2, 5], dtype=torch.int64)
    total = dist.all_reduce_sum(tensor)
    assert total.dtype == torch.int64
    assert total.tolist() == [2, 5]
    assert total.data_ptr() != tensor.data_ptr()
    assert dist.all_gather(tensor.double()).tolist() == [[2.0, 5.0]]
    assert dist.broadcast(tensor).tolist() == [2, 5]
    dist.barrier()
    agree_on("num_minibatches", 3, dist)
    with pytest.raises(DistributedError, match="src=1"):
        dist.broadcast(tensor, src=1)


# ---------------------------------------------------------------- FabricDistributed


def test_fabric_distributed_single_device() -> None:
    """With one device Fabric's collectives are identities; the wrapper adds the gather axis."""
    dist = FabricDistributed(Fabric(accelerator="cpu", devices=1))
    assert isinstance(dist, Distributed)
    assert (dist.world_size, dist.rank, dist.is_main) == (1, 0, True)
    assert dist.device == torch.device("cpu")
    tensor = torch.tensor([1.5, -2.0], dtype=torch.float64)
    total = dist.all_reduce_sum(tensor)
    assert total.dtype == torch.float64
    assert torch.equal(total, tensor)
    assert total.data_ptr() != tensor.data_ptr()
    assert dist.all_gather(torch.tensor(7)).tolist() == [7]
    assert dist.all_gather(tensor).shape == (1, 2)
    assert torch.equal(dist.broadcast(tensor), tensor)
    dist.barrier()
    with pytest.raises(DistributedError, match="src=3"):
        dist.broadcast(tensor, src=3)


def _fabric_worker(fabric: Fabric) -> dict[str, Any]:
    dist = FabricDistributed(fabric)
    rank = dist.rank
    total = dist.all_reduce_sum(torch.tensor([rank + 1], dtype=torch.int64))
    gathered = dist.all_gather(torch.tensor([rank, 10 * rank], dtype=torch.float64))
    sent = dist.broadcast(torch.tensor([rank + 100]), src=1)
    try:
        agree_on("rollout length", 8 + rank, dist)
        message = ""
    except DistributedError as error:
        message = str(error)
    dist.barrier()
    world_size = dist.world_size
    # Tear the group down here: a gloo group still alive at interpreter exit can abort
    # the spawned process ("terminate called without an active exception").
    torch_dist.destroy_process_group()
    return {
        "world_size": world_size,
        "total": (total.dtype, total.tolist()),
        "gathered": (gathered.dtype, gathered.tolist()),
        "sent": sent.tolist(),
        "message": message,
    }


@pytest.mark.distributed
def test_fabric_distributed_on_two_ddp_spawn_ranks() -> None:
    """Through Fabric (ddp_spawn, gloo): sum, gather in rank order, broadcast, agree_on."""
    strategy = DDPStrategy(start_method="spawn", timeout=timedelta(seconds=60))
    fabric = Fabric(accelerator="cpu", devices=2, strategy=strategy)
    result = fabric.launch(_fabric_worker)
    assert result == {
        "world_size": 2,
        "total": (torch.int64, [3]),
        "gathered": (torch.float64, [[0.0, 0.0], [1.0, 10.0]]),
        "sent": [101],
        "message": "ranks disagree on rollout length (rank 0: 8, rank 1: 9); "
        "it must be identical on every rank",
    }


# ---------------------------------------------------------------- agree_on


def test_agree_on_accepts_equal_values() -> None:
    """Equal ints and shapes pass silently."""
    agree_on("num_minibatches", 4, _CannedWorld([[[4], [4], [4]]]))
    agree_on("shape", (2, 3), _CannedWorld([[[2], [2]], [[2, 3], [2, 3]]]))
    agree_on("shape", (), SingleProcess())


def test_agree_on_names_every_rank_value() -> None:
    """A mismatch lists each rank's value."""
    with pytest.raises(DistributedError) as error:
        agree_on("num_minibatches", 4, _CannedWorld([[[4], [5], [4]]]))
    assert str(error.value) == (
        "ranks disagree on num_minibatches (rank 0: 4, rank 1: 5, rank 2: 4); "
        "it must be identical on every rank"
    )


def test_agree_on_shapes_of_different_lengths() -> None:
    """Shapes of different lengths are padded for the gather and reported exactly."""
    world = _CannedWorld([[[2], [1]], [[3, 4], [3, 0]]])
    with pytest.raises(DistributedError, match=r"rank 0: \(3, 4\), rank 1: \(3,\)"):
        agree_on("obs shape", (3, 4), world)


# ---------------------------------------------------------------- two gloo ranks


def _torch_worker(rank: int, port: int, out_dir: str) -> None:
    torch_dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=60),
    )
    try:
        dist = TorchDistributed()
        results: dict[str, Any] = {"rank": dist.rank, "is_main": dist.is_main}
        local = torch.tensor([rank + 1, 2], dtype=torch.int64)
        results["sum"] = dist.all_reduce_sum(local)
        results["local_after_sum"] = local
        results["gather"] = dist.all_gather(torch.full((2,), float(rank), dtype=torch.float64))
        results["broadcast"] = dist.broadcast(torch.tensor([rank * 10.0]), src=1)
        agree_on("num_minibatches", 6, dist)
        errors = []
        for name, value in (("num_minibatches", 6 + rank), ("obs shape", (4,) * (rank + 1))):
            try:
                agree_on(name, value, dist)
                errors.append("")
            except DistributedError as error:
                errors.append(str(error))
        results["errors"] = errors
        # The group still works after the errors: nothing is left half-done.
        dist.barrier()
        results["after"] = dist.all_reduce_sum(torch.ones(1))
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        torch_dist.destroy_process_group()


@pytest.mark.distributed
def test_torch_distributed_on_two_gloo_ranks(tmp_path: Path) -> None:
    """Real collectives on 2 ranks; agree_on raises the same error on both, without a hang."""
    run_two_ranks(_torch_worker, str(tmp_path))
    results = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    for rank, result in enumerate(results):
        assert result["rank"] == rank
        assert result["is_main"] == (rank == 0)
        assert result["sum"].dtype == torch.int64
        assert result["sum"].tolist() == [3, 4]
        assert result["local_after_sum"].tolist() == [rank + 1, 2]
        assert result["gather"].dtype == torch.float64
        assert result["gather"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
        assert result["broadcast"].tolist() == [10.0]
        assert result["after"].tolist() == [2.0]
    assert results[0]["errors"] == results[1]["errors"]
    assert results[0]["errors"] == [
        "ranks disagree on num_minibatches (rank 0: 6, rank 1: 7); "
        "it must be identical on every rank",
        "ranks disagree on obs shape (rank 0: (4,), rank 1: (4, 4)); "
        "it must be identical on every rank",
    ]


def test_raise_together_raises_on_every_rank() -> None:
    """A failure on one rank raises there, and on the others as a DistributedError repeating it."""
    raise_together(None, "check", _CannedWorld([[[0], [0]]]))
    world = _CannedWorld([[[0], [1], [1]]], objects=[[None, "EnvError: bad obs", "X: y"]])
    with pytest.raises(DistributedError) as caught:
        raise_together(None, "check", world)
    assert str(caught.value) == (
        "check failed on rank 1 (and on rank(s) [2]), every rank stops: EnvError: bad obs"
    )
    own = ConfigError("bad numbers")
    with pytest.raises(ConfigError, match="bad numbers"):
        raise_together(own, "check", _CannedWorld([[[1], [0]]]))


@pytest.mark.parametrize(
    ("value", "seconds"), [(None, 600.0), ("", 600.0), ("30", 30.0), (" 2.5 ", 2.5)]
)
def test_collective_timeout_reads_its_variable(value: str | None, seconds: float) -> None:
    """TYPEDRL_COLLECTIVE_TIMEOUT in seconds; unset or empty: 600 s."""
    environ = {} if value is None else {"TYPEDRL_COLLECTIVE_TIMEOUT": value}
    assert collective_timeout(environ) == timedelta(seconds=seconds)


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_collective_timeout_refuses_a_bad_value(value: str) -> None:
    """Anything but a positive, finite number of seconds is one ConfigError line."""
    with pytest.raises(ConfigError) as caught:
        collective_timeout({"TYPEDRL_COLLECTIVE_TIMEOUT": value})
    assert str(caught.value) == (
        f"TYPEDRL_COLLECTIVE_TIMEOUT must be a positive number of seconds, got {value!r}; "
        "unset it for the default (600 s)"
    )


def test_collective_failure_names_the_lost_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """gloo's lost-peer errors become one line; other errors and a world of one stay as they are."""
    monkeypatch.setenv("TYPEDRL_COLLECTIVE_TIMEOUT", "20")
    closed = RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:5. Check logs.\nx")
    lost = collective_failure(closed, _CannedWorld([[[0], [0]]]))
    assert str(lost) == (
        "rank 0 lost rank 1: a collective failed ([pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:5. Check logs.); the rank died, or hung past the collective timeout of "
        "20 s (TYPEDRL_COLLECTIVE_TIMEOUT). Resume from the run's last.ckpt"
    )
    timed_out = RuntimeError("Timed out waiting 20000ms for recv operation to complete")
    three = collective_failure(timed_out, _CannedWorld([[[0], [0], [0]]]))
    assert str(three).startswith(
        "rank 0 lost another of the 3 ranks (the launcher's log names it): a collective failed"
    )
    assert collective_failure(RuntimeError("shape mismatch"), _CannedWorld([[[0], [0]]])) is None
    assert collective_failure(closed, SingleProcess()) is None
    assert collective_failure(DistributedError("timed out"), _CannedWorld([[[0], [0]]])) is None


def test_all_gather_object_single_process() -> None:
    """One rank gathers a one-item list."""
    assert SingleProcess().all_gather_object({"a": 1}) == [{"a": 1}]

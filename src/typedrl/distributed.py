"""The one typed wrapper around collective operations.

Every collective typedrl runs (metric reductions, normaliser synchronisation,
start-up invariant checks) goes through a :class:`Distributed` object, so the
same code runs in one process without a process group, under a process group
managed by hand, or under Lightning Fabric.

The protocol is deliberately small. Each member is enough for one job:

=================== ==========================================================
member              used for
=================== ==========================================================
``world_size``      sizes of gathered results, averaging
``rank``            labelling per-rank values in error messages, sharding
``is_main``         rank-0-only side effects (logging, checkpoint writing)
``device``          where tensors handed to a collective must live
``all_reduce_sum``  summing counters and meters over ranks
``all_gather``      exact per-rank values (statistics merged in rank order,
                    invariant checks that report every rank's value)
``broadcast``       making rank 0's tensor (a seed, a decision) everyone's
``barrier``         waiting for every rank (around file-system effects)
=================== ==========================================================

Rules shared by every implementation:

- A collective must be called by every rank, in the same order, with tensors of
  the same shape and dtype; otherwise ranks wait on each other forever. Check
  values that decide whether a collective runs (for example the number of
  minibatches) with :func:`agree_on` first: it raises
  :class:`~typedrl.errors.DistributedError` on every rank instead of hanging.
- Inputs are never modified; results are new tensors with the input's dtype.
- Results are identical on every rank.

Implementations: :class:`SingleProcess` (world of one, no process group),
:class:`TorchDistributed` (the default group of :mod:`torch.distributed`,
initialised by the caller) and :class:`FabricDistributed` (a launched
:class:`lightning_fabric.Fabric`).
"""

import datetime
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, cast, final, runtime_checkable

import torch
import torch.distributed as torch_dist
from jaxtyping import Shaped
from lightning_fabric import Fabric
from torch import Tensor

from typedrl.errors import ConfigError, DistributedError, TypedRLError

__all__ = [
    "COLLECTIVE_TIMEOUT_ENV",
    "DEFAULT_COLLECTIVE_TIMEOUT_S",
    "Distributed",
    "FabricDistributed",
    "SingleProcess",
    "TorchDistributed",
    "agree_on",
    "collective_failure",
    "collective_timeout",
    "raise_together",
]

COLLECTIVE_TIMEOUT_ENV: Final = "TYPEDRL_COLLECTIVE_TIMEOUT"
"""The environment variable that sets the collective timeout, in seconds."""
DEFAULT_COLLECTIVE_TIMEOUT_S: Final = 600
"""How long a rank waits in one collective for the others, without the variable (10 min)."""

# What gloo's and NCCL's errors say when a peer is gone or never answers.
_LOST_PEER_SIGNS: Final = (
    "connection closed by peer",
    "connection reset by peer",
    "timed out",
    "broken pipe",
    "connection refused",
)

_Any = Shaped[Tensor, "*shape"]
_Gathered = Shaped[Tensor, "world_size *shape"]


@runtime_checkable
class Distributed(Protocol):
    """Collective operations over the ranks of one training run.

    See the module docstring for the rules every implementation follows.
    """

    @property
    def world_size(self) -> int:
        """Number of ranks (processes); 1 without a process group."""
        ...

    @property
    def rank(self) -> int:
        """Index of this rank, in ``[0, world_size)``."""
        ...

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0."""
        ...

    @property
    def device(self) -> torch.device:
        """Device on which tensors passed to the collectives must live."""
        ...

    def all_reduce_sum(self, tensor: _Any) -> _Any:
        """Return the element-wise sum of ``tensor`` over all ranks."""
        ...

    def all_gather(self, tensor: _Any) -> _Gathered:
        """Return every rank's ``tensor`` stacked in rank order: ``[world_size, *shape]``."""
        ...

    def broadcast(self, tensor: _Any, src: int = 0) -> _Any:
        """Return rank ``src``'s ``tensor`` on every rank."""
        ...

    def barrier(self) -> None:
        """Block until every rank has called :meth:`barrier`."""
        ...

    def all_gather_object(self, obj: object) -> list[Any]:
        """Every rank's picklable ``obj``, in rank order (per-rank state, not hot loops)."""
        ...


def _check_src(src: int, world_size: int) -> None:
    if not 0 <= src < world_size:
        raise DistributedError(
            f"broadcast source must be a rank in [0, {world_size}), got src={src}"
        )


@final
class SingleProcess:
    """A world of one rank: every collective is the identity (on a copy).

    Lets code written against :class:`Distributed` run without a process group.

    Args:
        device: The device reported by :attr:`device` (where helpers such as
            :func:`agree_on` create their tensors).

    Example:
        >>> import torch
        >>> dist = SingleProcess()
        >>> dist.world_size, dist.rank, dist.is_main
        (1, 0, True)
        >>> dist.all_gather(torch.tensor([1, 2])).tolist()
        [[1, 2]]
        >>> dist.all_reduce_sum(torch.tensor(3.0)).item()
        3.0
    """

    def __init__(self, *, device: torch.device | str = "cpu") -> None:
        self.world_size: Final = 1
        """Always 1."""
        self.rank: Final = 0
        """Always 0."""
        self.is_main: Final = True
        """Always ``True``."""
        self.device: Final = torch.device(device)
        """The device given at construction."""

    def all_reduce_sum(self, tensor: _Any) -> _Any:
        """Return a copy of ``tensor`` (the sum over one rank)."""
        return tensor.clone()

    def all_gather(self, tensor: _Any) -> _Gathered:
        """Return a copy of ``tensor`` with a leading axis of length 1."""
        return tensor.unsqueeze(0).clone()

    def broadcast(self, tensor: _Any, src: int = 0) -> _Any:
        """Return a copy of ``tensor``; ``src`` must be 0."""
        _check_src(src, 1)
        return tensor.clone()

    def barrier(self) -> None:
        """Return at once."""

    def all_gather_object(self, obj: object) -> list[Any]:
        """``[obj]``."""
        return [obj]


@final
class TorchDistributed:
    """Collectives over :mod:`torch.distributed`'s default (world) group.

    For code and tests that create the process group themselves with
    :func:`torch.distributed.init_process_group`. Collectives are blocking.

    Args:
        device: Where collective tensors live. ``None`` picks the current CUDA
            device for the NCCL backend and the CPU otherwise.

    Raises:
        DistributedError: If no process group is initialised.
    """

    def __init__(self, *, device: torch.device | str | None = None) -> None:
        if not (torch_dist.is_available() and torch_dist.is_initialized()):
            raise DistributedError(
                "TorchDistributed needs an initialised process group: call "
                "torch.distributed.init_process_group first, or use SingleProcess "
                "for a single process"
            )
        if device is None:
            if torch_dist.get_backend() == "nccl":
                device = torch.device("cuda", torch.cuda.current_device())
            else:
                device = torch.device("cpu")
        self.world_size: Final = torch_dist.get_world_size()
        """Size of the default process group."""
        self.rank: Final = torch_dist.get_rank()
        """This process's rank in the default group."""
        self.is_main: Final = self.rank == 0
        """Whether this is rank 0."""
        self.device: Final = torch.device(device)
        """Device of collective tensors."""

    def all_reduce_sum(self, tensor: _Any) -> _Any:
        """Sum ``tensor`` over all ranks (on a copy; the input is untouched)."""
        result = tensor.clone()
        torch_dist.all_reduce(result, op=torch_dist.ReduceOp.SUM)
        return result

    def all_gather(self, tensor: _Any) -> _Gathered:
        """Stack every rank's ``tensor`` in rank order."""
        source = tensor.contiguous()
        parts = [torch.empty_like(source) for _ in range(self.world_size)]
        torch_dist.all_gather(parts, source)
        return torch.stack(parts)

    def broadcast(self, tensor: _Any, src: int = 0) -> _Any:
        """Return rank ``src``'s ``tensor`` (every rank passes one of the same shape)."""
        _check_src(src, self.world_size)
        result = tensor.clone()
        torch_dist.broadcast(result, src=src)
        return result

    def barrier(self) -> None:
        """Wait for every rank of the default group."""
        torch_dist.barrier()

    def all_gather_object(self, obj: object) -> list[Any]:
        """Every rank's ``obj`` through :func:`torch.distributed.all_gather_object`."""
        gathered: list[Any] = [None] * self.world_size
        torch_dist.all_gather_object(gathered, obj)
        return gathered


@final
class FabricDistributed:
    """Collectives through a launched :class:`lightning_fabric.Fabric`.

    With ``world_size == 1`` (Fabric launched on one device) every collective
    is the identity on a copy, as with :class:`SingleProcess`. Fabric moves
    collective tensors to :attr:`device`; results come back there.

    Args:
        fabric: A Fabric whose strategy has been launched (its world size, rank and
            device are read here).

    Example:
        >>> import torch
        >>> from lightning_fabric import Fabric
        >>> dist = FabricDistributed(Fabric(accelerator="cpu", devices=1))
        >>> dist.world_size, dist.is_main
        (1, True)
        >>> dist.all_gather(torch.tensor([5])).tolist()
        [[5]]
    """

    def __init__(self, fabric: Fabric) -> None:
        self._fabric = fabric
        self.world_size: Final = fabric.world_size
        """Fabric's world size (all devices on all nodes)."""
        self.rank: Final = fabric.global_rank
        """Fabric's global rank."""
        self.is_main: Final = fabric.is_global_zero
        """Whether this is global rank 0."""
        self.device: Final = fabric.device
        """Fabric's device for this rank."""

    def all_reduce_sum(self, tensor: _Any) -> _Any:
        """Sum ``tensor`` over all ranks (on a copy; Fabric reduces in place)."""
        # Fabric returns the tensor it was given, reduced (typed as Any).
        return cast("Tensor", self._fabric.all_reduce(tensor.clone(), reduce_op="sum"))

    def all_gather(self, tensor: _Any) -> _Gathered:
        """Stack every rank's ``tensor`` in rank order (also with one rank)."""
        if self.world_size == 1 or not torch_dist.is_initialized():
            return tensor.unsqueeze(0).clone()
        # Fabric's own all_gather goes through a deprecated autograd collective (and
        # warns on every call); the plain collective on Fabric's group does the same.
        local = tensor.to(self.device).contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        torch_dist.all_gather(parts, local)
        return torch.stack(parts)

    def broadcast(self, tensor: _Any, src: int = 0) -> _Any:
        """Return rank ``src``'s ``tensor`` (every rank passes one of the same shape and dtype)."""
        _check_src(src, self.world_size)
        result = self._fabric.broadcast(tensor.clone(), src=src)
        if result.shape != tensor.shape or result.dtype != tensor.dtype:
            raise DistributedError(
                f"broadcast from rank {src} sent shape {list(result.shape)} and dtype "
                f"{result.dtype}, but rank {self.rank} passed shape {list(tensor.shape)} "
                f"and dtype {tensor.dtype}; every rank must pass the same shape and dtype"
            )
        # Fabric broadcasts by pickling, which keeps the sender's device.
        return result.to(device=tensor.device)

    def barrier(self) -> None:
        """Wait for every rank."""
        self._fabric.barrier()

    def all_gather_object(self, obj: object) -> list[Any]:
        """Every rank's ``obj`` through the process group Fabric launched."""
        if self.world_size == 1 or not torch_dist.is_initialized():
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        torch_dist.all_gather_object(gathered, obj)
        return gathered


def raise_together(error: TypedRLError | None, what: str, dist: Distributed) -> None:
    """Collective: if any rank failed, raise on every rank instead of leaving some waiting.

    Every rank calls it after a step that may fail on some ranks only (a check
    of its own data, a file write on rank 0). A rank that failed raises its own
    ``error``; every other rank raises :class:`~typedrl.errors.DistributedError`
    naming the first failed rank and repeating its message, so that every rank's
    log says why the job stopped. When no rank failed, it returns on every rank
    (one small all-gather; the messages travel only when a rank failed).

    Example:
        >>> raise_together(None, "the rollout check", SingleProcess())
    """
    flag = torch.tensor([0 if error is None else 1], dtype=torch.int64, device=dist.device)
    flags = [int(f) for f in dist.all_gather(flag).reshape(-1).tolist()]
    failed = [rank for rank, f in enumerate(flags) if f]
    if not failed:
        return
    # Every rank sees the same flags, so every rank takes part in this second gather.
    message = None if error is None else f"{type(error).__name__}: {error}"
    messages = dist.all_gather_object(message)
    if error is not None:
        raise error
    first = failed[0]
    others = f" (and on rank(s) {failed[1:]})" if len(failed) > 1 else ""
    raise DistributedError(
        f"{what} failed on rank {first}{others}, every rank stops: {messages[first]}"
    )


def collective_timeout(environ: Mapping[str, str] | None = None) -> datetime.timedelta:
    """How long a rank waits in one collective before it gives up on the others.

    ``TYPEDRL_COLLECTIVE_TIMEOUT`` (seconds, a positive number) when set, else
    :data:`DEFAULT_COLLECTIVE_TIMEOUT_S`. Pass it as the process group's
    timeout (``DDPStrategy(timeout=collective_timeout())``; ``typedrl train``
    does). A rank that dies closes its connections and the others fail at their
    next collective at once; the timeout bounds the wait for a rank that hangs
    or a node that drops off the network.

    Args:
        environ: Where to read the variable (default: ``os.environ``).

    Raises:
        ConfigError: The variable is not a positive number of seconds.

    Example:
        >>> collective_timeout({"TYPEDRL_COLLECTIVE_TIMEOUT": "30"})
        datetime.timedelta(seconds=30)
        >>> collective_timeout({}).total_seconds()
        600.0
    """
    text = (os.environ if environ is None else environ).get(COLLECTIVE_TIMEOUT_ENV)
    if text is None or not text.strip():
        return datetime.timedelta(seconds=DEFAULT_COLLECTIVE_TIMEOUT_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(
            f"{COLLECTIVE_TIMEOUT_ENV} must be a positive number of seconds, got {text!r}; "
            f"unset it for the default ({DEFAULT_COLLECTIVE_TIMEOUT_S} s)"
        )
    return datetime.timedelta(seconds=seconds)


def collective_failure(error: BaseException, dist: Distributed) -> DistributedError | None:
    """``error`` as one line naming the lost rank, when a collective failed for a lost peer.

    ``None`` for any other exception. gloo raises a plain ``RuntimeError`` when
    a peer closed its connections (it died) or did not answer within the
    collective timeout (it hangs, or its node is gone); torch raises
    :class:`torch.distributed.DistNetworkError` when the rendezvous store is
    gone. In a world of two the
    lost rank is the other one; in a larger world the error does not say which,
    and the launcher's log (torchrun, srun) names the worker that exited.

    Example:
        >>> collective_failure(ValueError("no"), SingleProcess()) is None
        True
    """
    if (
        dist.world_size == 1
        or not isinstance(error, RuntimeError)
        or isinstance(error, TypedRLError)
    ):
        return None
    text = str(error).strip()
    lowered = text.lower()
    if not isinstance(error, torch_dist.DistNetworkError) and not any(
        sign in lowered for sign in _LOST_PEER_SIGNS
    ):
        return None
    lost = (
        f"rank {1 - dist.rank}"
        if dist.world_size == 2
        else f"another of the {dist.world_size} ranks (the launcher's log names it)"
    )
    detail = text.splitlines()[0] if text else type(error).__name__
    timeout = collective_timeout().total_seconds()
    return DistributedError(
        f"rank {dist.rank} lost {lost}: a collective failed ({detail}); the rank died, or hung "
        f"past the collective timeout of {timeout:g} s ({COLLECTIVE_TIMEOUT_ENV}). Resume from "
        "the run's last.ckpt"
    )


def agree_on(name: str, value: int | Sequence[int], dist: Distributed) -> None:
    """Check that every rank holds the same ``value``; raise on every rank if not.

    Call it before a collective whose count or shape depends on ``value`` (the
    number of minibatches, a tensor shape): a mismatch there would make the
    ranks wait on each other forever. The values are all-gathered (one
    collective for an int, two for a sequence), so every rank sees all of them
    and raises the same error, naming each rank's value.

    Args:
        name: What the value is, for the error message.
        value: An int, or a sequence of ints such as a shape (int64 range).
        dist: The ranks to compare.

    Raises:
        DistributedError: On every rank, if any two ranks differ.

    Example:
        >>> agree_on("num_minibatches", 8, SingleProcess())
        >>> agree_on("observation shape", (4, 3), SingleProcess())
    """
    if isinstance(value, int):
        local = torch.tensor([value], dtype=torch.int64, device=dist.device)
        per_rank: list[object] = [int(v) for v in dist.all_gather(local).reshape(-1).tolist()]
    else:
        items = [int(v) for v in value]
        length = torch.tensor([len(items)], dtype=torch.int64, device=dist.device)
        lengths = [int(n) for n in dist.all_gather(length).reshape(-1).tolist()]
        # Pad to a common length so that the second gather has one shape everywhere.
        padded = torch.zeros(max(lengths), dtype=torch.int64, device=dist.device)
        padded[: len(items)] = torch.tensor(items, dtype=torch.int64, device=dist.device)
        rows = dist.all_gather(padded).tolist()
        per_rank = [tuple(int(v) for v in row[:n]) for row, n in zip(rows, lengths, strict=True)]
    if any(item != per_rank[0] for item in per_rank):
        values = ", ".join(f"rank {rank}: {item}" for rank, item in enumerate(per_rank))
        raise DistributedError(
            f"ranks disagree on {name} ({values}); it must be identical on every rank"
        )

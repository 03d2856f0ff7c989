"""Typed helpers around Lightning Fabric: building one for the launch, ``setup`` typed.

typedrl runs on the ``lightning-fabric`` distribution (import name
``lightning_fabric``), not on the ``lightning`` one: ``lightning.fabric`` is a
second copy of the same code whose import also loads PyTorch Lightning and
torchmetrics (over a second per process). :func:`require_fabric` and
:func:`is_fabric_logger` are the checks where a user's Fabric or loggers come in.

A process started by ``torchrun`` or by SLURM's ``srun`` belongs to a world
that the launcher made; :func:`fabric_from_environment` reads that world and
builds a Fabric that joins it, or (without a launcher) one that starts its
own processes on this machine.
"""

import atexit
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar, cast, final

from lightning_fabric import Fabric
from lightning_fabric.loggers.logger import Logger
from lightning_fabric.plugins.environments.cluster_environment import ClusterEnvironment
from torch import nn
from torch.optim import Optimizer

from typedrl._validation import positive_int
from typedrl.errors import ConfigError

__all__ = [
    "Launch",
    "check_accelerator",
    "default_fabric",
    "fabric_from_environment",
    "is_fabric_logger",
    "leave_process_group",
    "read_launch",
    "require_fabric",
    "setup_module_and_optimizer",
]

Launcher = Literal["torchrun", "srun", "none"]
Accelerator = Literal["cpu", "cuda", "auto"]

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def default_fabric() -> Fabric:
    """A single-process Fabric on the CPU, or on one GPU when CUDA is available."""
    import torch  # noqa: PLC0415 - keep the module import light

    accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    fabric = Fabric(accelerator=accelerator, devices=1)
    fabric.launch()
    return fabric


_LOGGER_MODULES = frozenset({"lightning_fabric.loggers.logger", "lightning.fabric.loggers.logger"})
"""Where Fabric's ``Logger`` base class lives, in either distribution."""


def require_fabric(fabric: object, owner: str) -> Fabric:
    """``fabric`` if it is a :class:`lightning_fabric.Fabric`; else a :class:`ConfigError`.

    A ``lightning.fabric.Fabric`` (from the ``lightning`` distribution) is refused
    with what to import instead: its precision plugins are other classes, so
    typedrl could not tell mixed precision from full precision through it.
    """
    if isinstance(fabric, Fabric):
        return fabric
    module = type(fabric).__module__
    if module.startswith("lightning.fabric"):
        raise ConfigError(
            f"{owner}: fabric is a lightning.fabric.Fabric (the lightning package); typedrl "
            "runs on the lightning-fabric package: build it with "
            "'from lightning_fabric import Fabric' (the same class, without PyTorch Lightning)"
        )
    raise ConfigError(
        f"{owner}: fabric must be a lightning_fabric.Fabric, got {type(fabric).__name__}"
    )


def is_fabric_logger(value: object) -> bool:
    """Whether ``value`` is a Fabric logger, from ``lightning_fabric`` or from ``lightning``.

    Fabric only calls a logger's methods, so both distributions' loggers work
    (PyTorch Lightning's ``WandbLogger`` among them). Decided from the class
    hierarchy, without importing ``lightning``.
    """
    if isinstance(value, Logger):
        return True
    return any(
        cls.__name__ == "Logger" and cls.__module__ in _LOGGER_MODULES
        for cls in type(value).__mro__
    )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """The world a process was launched into, as its launcher's variables describe it."""

    launcher: Launcher
    """``"torchrun"`` (torch elastic), ``"srun"`` (SLURM) or ``"none"`` (no launcher)."""
    world_size: int
    """Processes in the job, over all nodes (1 without a launcher)."""
    processes_per_node: int
    """Processes the launcher started on each node (1 without a launcher)."""
    num_nodes: int
    """Nodes in the job (1 without a launcher)."""
    global_rank: int
    """This process's rank in the job (0 without a launcher)."""
    described: str
    """The variables the values came from, for messages (``WORLD_SIZE=2, ...``)."""


def read_launch(environ: Mapping[str, str] | None = None) -> Launch:
    """The launch this process belongs to: torchrun first, then srun, else none.

    The order and the detection are Lightning's (``TorchElasticEnvironment``:
    ``TORCHELASTIC_RUN_ID`` is set; ``SLURMEnvironment``: ``SLURM_NTASKS`` is
    set and the job is not named ``bash`` or ``interactive``). A process that
    Fabric itself started for ``devices > 1`` has none of them: it counts as
    ``"none"``, as the process that started it does.

    Raises:
        ConfigError: A launcher's variables are missing, not integers, or
            describe nodes with different numbers of processes.

    Example:
        >>> read_launch({}).launcher
        'none'
        >>> launch = read_launch({"TORCHELASTIC_RUN_ID": "job", "RANK": "1", "WORLD_SIZE": "4",
        ...                       "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "2"})
        >>> launch.world_size, launch.processes_per_node, launch.num_nodes, launch.global_rank
        (4, 2, 2, 1)
    """
    env = os.environ if environ is None else environ
    if env.get("TORCHELASTIC_RUN_ID"):
        world = _launch_int(env, "WORLD_SIZE", "torchrun")
        per_node = _launch_int(env, "LOCAL_WORLD_SIZE", "torchrun")
        nodes = (
            _launch_int(env, "GROUP_WORLD_SIZE", "torchrun")
            if "GROUP_WORLD_SIZE" in env
            else max(world // per_node, 1)
        )
        names = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE")
        rank = _launch_int(env, "RANK", "torchrun")
        return _checked_launch(
            env, "torchrun", world=world, per_node=per_node, nodes=nodes, rank=rank, names=names
        )
    if "SLURM_NTASKS" in env and env.get("SLURM_JOB_NAME") not in ("bash", "interactive"):
        world = _launch_int(env, "SLURM_NTASKS", "srun")
        if "SLURM_NTASKS_PER_NODE" not in env and world > 1:
            raise ConfigError(
                f"srun: SLURM_NTASKS={world} without SLURM_NTASKS_PER_NODE; ask for the "
                "tasks per node (sbatch --ntasks-per-node=N --nodes=M), which Lightning needs"
            )
        per_node = _launch_int(env, "SLURM_NTASKS_PER_NODE", "srun") if world > 1 else 1
        nodes_name = "SLURM_NNODES" if "SLURM_NNODES" in env else "SLURM_JOB_NUM_NODES"
        nodes = (
            _launch_int(env, nodes_name, "srun") if nodes_name in env else max(world // per_node, 1)
        )
        names = ("SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", nodes_name)
        rank = _launch_int(env, "SLURM_PROCID", "srun")
        return _checked_launch(
            env, "srun", world=world, per_node=per_node, nodes=nodes, rank=rank, names=names
        )
    return Launch(
        launcher="none",
        world_size=1,
        processes_per_node=1,
        num_nodes=1,
        global_rank=0,
        described="no torchrun or srun variables",
    )


def _launch_int(env: Mapping[str, str], name: str, launcher: str) -> int:
    text = env.get(name)
    try:
        value = int(text) if text is not None else None
    except ValueError:
        value = None
    if value is None or value < 0:
        raise ConfigError(
            f"{launcher}: expected {name} to be a non-negative integer, got {text!r}; "
            f"start the command through {launcher} itself, which sets it"
        )
    return value


def _checked_launch(
    env: Mapping[str, str],
    launcher: Launcher,
    *,
    world: int,
    per_node: int,
    nodes: int,
    rank: int,
    names: tuple[str, ...],
) -> Launch:
    described = ", ".join(f"{name}={env[name]}" for name in names if name in env)
    if per_node < 1 or nodes < 1 or per_node * nodes != world:
        raise ConfigError(
            f"{launcher}: {world} process(es) are not {nodes} node(s) of {per_node} ({described}); "
            "launch the same number of processes on every node"
        )
    return Launch(
        launcher=launcher,
        world_size=world,
        processes_per_node=per_node,
        num_nodes=nodes,
        global_rank=rank,
        described=described,
    )


def fabric_from_environment(
    *,
    accelerator: Accelerator = "cpu",
    devices: int | None = None,
    num_nodes: int | None = None,
    cluster_environment: ClusterEnvironment | None = None,
) -> Fabric:
    """A launched Fabric that joins the world this process was started in.

    Under ``torchrun`` or ``srun``, the world size, ranks and node count come
    from the launcher (:func:`read_launch`): ``devices`` defaults to the
    processes per node and ``num_nodes`` to the nodes, and a value that
    contradicts the launch is refused before anything connects. Without a
    launcher, ``devices`` (default 1) processes run on this machine, started
    by Fabric. More than one process in all trains with DDP (the ``gloo``
    backend on the CPU, ``nccl`` on GPUs).

    Args:
        accelerator: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        devices: Processes (one device each) per node; ``None``: as launched.
        num_nodes: Nodes; ``None``: as launched.
        cluster_environment: Lightning's cluster environment for a DDP run
            (``None``: the one Lightning detects). ``typedrl train --devices N``
            passes one whose ``creates_processes_externally`` is true, having
            started the other ranks itself.

    Raises:
        ConfigError: ``devices`` or ``num_nodes`` contradicts the launch, is
            not positive, ``num_nodes > 1`` has no launcher, or ``"cuda"`` asks
            for GPUs that torch cannot see.

    Example:
        >>> fabric = fabric_from_environment(accelerator="cpu")
        >>> fabric.world_size, fabric.global_rank
        (1, 0)
    """
    launch = read_launch()
    for name, value in (("devices", devices), ("num_nodes", num_nodes)):
        if value is not None:
            positive_int("fabric_from_environment", name, value)
    per_node, nodes = _checked_against_launch(launch, devices=devices, num_nodes=num_nodes)
    check_accelerator(accelerator, per_node)
    from lightning_fabric.strategies.ddp import DDPStrategy  # noqa: PLC0415 - keep the import light

    from typedrl.distributed import collective_timeout  # noqa: PLC0415

    fabric = Fabric(
        accelerator=accelerator,
        devices=per_node,
        num_nodes=nodes,
        # A lost rank ends every rank after at most the collective timeout.
        strategy=(
            DDPStrategy(cluster_environment=cluster_environment, timeout=collective_timeout())
            if per_node * nodes > 1
            else "auto"
        ),
    )
    if launch.launcher == "torchrun" and launch.world_size > 1:
        _join_this_attempt(fabric, launch)
    fabric.launch()
    return fabric


def _join_this_attempt(fabric: Fabric, launch: Launch) -> None:
    """Start the process group on this torchrun attempt's own keys of the agent's store.

    Under ``torchrun``'s c10d rendezvous the workers of every attempt share
    the agent's TCP store, and torch keys the process group's connection
    details by group and rank only. Workers restarted after a failure
    (``--max-restarts``) can then read the details the killed attempt left
    and connect to a dead worker's port (gloo: ``connectFullMesh failed``),
    or hang. Prefixing the store with the attempt number
    (``TORCHELASTIC_RESTART_COUNT``) gives each attempt its own keys;
    Lightning then finds the group started and joins it. Nothing changes
    when the agent does not share its store
    (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``): each attempt gets a store
    of its own.
    """
    from torch import distributed as torch_dist  # noqa: PLC0415 - keep the module import light

    # Documented as torch.distributed.TCPStore and PrefixStore; the package does not mark
    # them re-exported for type checkers.
    from torch.distributed import (  # type: ignore[attr-defined]  # noqa: PLC0415
        PrefixStore,
        TCPStore,
    )

    from typedrl.distributed import collective_timeout  # noqa: PLC0415

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or torch_dist.is_initialized():
        return
    attempt = _launch_int(os.environ, "TORCHELASTIC_RESTART_COUNT", "torchrun")
    timeout = collective_timeout()
    store = TCPStore(
        host_name=_launch_text(os.environ, "MASTER_ADDR"),
        port=_launch_int(os.environ, "MASTER_PORT", "torchrun"),
        world_size=launch.world_size,
        is_master=False,
        timeout=timeout,
    )
    device = fabric.device
    backend = "nccl" if device.type == "cuda" else "gloo"
    torch_dist.init_process_group(
        backend,
        store=PrefixStore(f"typedrl/attempt_{attempt}", store),
        rank=launch.global_rank,
        world_size=launch.world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    if backend == "nccl":
        atexit.register(_destroy_if_initialized)


def _destroy_if_initialized() -> None:
    """``destroy_process_group`` unless the group is gone (:func:`leave_process_group` left it)."""
    from torch import distributed as torch_dist  # noqa: PLC0415 - keep the module import light

    if torch_dist.is_initialized():
        torch_dist.destroy_process_group()


def leave_process_group(fabric: Fabric) -> None:
    """End a distributed run in order: every rank meets at a barrier, then leaves the group.

    Call it on every rank once the run's last collective is done (``typedrl
    train`` does, after rank 0 has written its summary). Nothing happens in a
    single process. A rank whose interpreter exits while a peer still holds
    the group's connections can abort at exit (gloo's threads), after a run
    that finished.

    The barrier's work handle is kept until the process exits. Without it,
    gloo's worker thread can hold the last reference to that barrier and to
    the collectives before it, whose tensors it then frees, which needs the
    GIL; if the main thread meanwhile drops the group (freeing DDP's reducer
    frees it), the group's destructor joins that worker while holding the
    GIL, and the rank hangs after a finished run. Kept here, the works are
    freed by the main thread: at exit (before the interpreter's own teardown,
    so that gloo's connections they hold close in order), or at the next
    call, by when their worker has long let go of them.
    """
    from torch import distributed as torch_dist  # noqa: PLC0415 - keep the module import light

    if fabric.world_size > 1 and torch_dist.is_initialized():
        # As Fabric's barrier: NCCL is told this rank's device.
        nccl = torch_dist.get_backend() == "nccl" and fabric.device.index is not None
        work = torch_dist.barrier(async_op=True, device_ids=[fabric.device.index] if nccl else None)
        if work is not None:
            work.wait()
            if not _FINISHED_WORK:
                atexit.register(_FINISHED_WORK.clear)
            _FINISHED_WORK[:] = [work]
        torch_dist.destroy_process_group()


_FINISHED_WORK: list[object] = []
"""The last final barrier's work handle, alive until exit (:func:`leave_process_group`)."""


def _launch_text(env: Mapping[str, str], name: str) -> str:
    text = env.get(name)
    if not text:
        raise ConfigError(
            f"torchrun: expected {name} to be set, got {text!r}; start the command through "
            "torchrun itself, which sets it"
        )
    return text


def _checked_against_launch(
    launch: Launch, *, devices: int | None, num_nodes: int | None
) -> tuple[int, int]:
    """``(processes per node, nodes)`` for the Fabric; refuse values the launch contradicts."""
    if launch.launcher == "none":
        if num_nodes is not None and num_nodes > 1:
            raise ConfigError(
                f"--num-nodes {num_nodes}: no torchrun or srun launch found ({launch.described}); "
                f"start the command on every node through torchrun --nnodes {num_nodes} or srun"
            )
        return devices if devices is not None else 1, 1
    if devices is not None and devices != launch.processes_per_node:
        raise ConfigError(
            f"--devices {devices}: {launch.launcher} launched {launch.processes_per_node} "
            f"process(es) per node ({launch.described}); leave --devices out or pass "
            f"--devices {launch.processes_per_node}"
        )
    if num_nodes is not None and num_nodes != launch.num_nodes:
        raise ConfigError(
            f"--num-nodes {num_nodes}: {launch.launcher} launched {launch.num_nodes} node(s) "
            f"({launch.described}); leave --num-nodes out or pass --num-nodes {launch.num_nodes}"
        )
    return launch.processes_per_node, launch.num_nodes


def check_accelerator(accelerator: str, devices: int) -> None:
    """Raise :class:`~typedrl.errors.ConfigError` when ``"cuda"`` asks for GPUs torch cannot see.

    Checked before :class:`~lightning_fabric.Fabric` is built, whose own error is
    a traceback.

    Example:
        >>> check_accelerator("cpu", 2)
    """
    import torch  # noqa: PLC0415 - keep the module import light

    if accelerator != "cuda":
        return
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found < devices:
        raise ConfigError(
            f"--accelerator cuda: expected {devices} CUDA device(s), torch sees {found} "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); use "
            "--accelerator cpu, or auto to take a GPU only when there is one"
        )


def setup_module_and_optimizer(
    fabric: Fabric, module: ModuleT, optimizer: Optimizer, *, forward_methods: tuple[str, ...] = ()
) -> tuple[ModuleT, Optimizer]:
    """Set up ``module`` and ``optimizer`` with Fabric and keep their static types.

    Fabric wraps the module (DDP in multi-process runs) in an object that
    forwards attribute access to it, so the wrapper is used where the module's
    type is expected. Methods in ``forward_methods`` are routed through the
    wrapper's ``forward``, which DDP needs to synchronise their gradients.
    """
    wrapped_module, wrapped_optimizer = fabric.setup(module, optimizer)
    for name in forward_methods:
        wrapped_module.mark_forward_method(name)
    return cast("ModuleT", wrapped_module), cast("Optimizer", wrapped_optimizer)

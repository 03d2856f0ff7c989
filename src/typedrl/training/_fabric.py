"""Typed helpers around Lightning Fabric, whose ``setup`` returns ``Any``."""

from typing import TypeVar, cast

from lightning.fabric import Fabric
from torch import nn
from torch.optim import Optimizer

from typedrl.errors import ConfigError

__all__ = ["check_accelerator", "default_fabric", "setup_module_and_optimizer"]

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def default_fabric() -> Fabric:
    """A single-process Fabric on the CPU, or on one GPU when CUDA is available."""
    import torch  # noqa: PLC0415 - keep the module import light

    accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    fabric = Fabric(accelerator=accelerator, devices=1)
    fabric.launch()
    return fabric


def check_accelerator(accelerator: str, devices: int) -> None:
    """Raise :class:`~typedrl.errors.ConfigError` when ``"cuda"`` asks for GPUs torch cannot see.

    Checked before :class:`~lightning.fabric.Fabric` is built, whose own error is
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

"""Fixtures of the real Newton tests: one Ant env per test module, small and short."""

from collections.abc import Callable
from typing import TypeVar

import pytest
import torch

from typedrl.envs.newton import AntTask, NewtonVecEnv

# Warnings Newton 1.8 / Warp 1.19 raise on import and model building; the suite turns
# every other warning into an error, as the default suite does.
_UPSTREAM_WARNINGS = (
    "ignore:warp.config.quiet is deprecated:DeprecationWarning",
    "ignore:Newton shape color replacement is enabled:FutureWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    """Allow the upstream warnings listed above."""
    for line in _UPSTREAM_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


_Test = TypeVar("_Test", bound=Callable[..., object])

NEEDS_CUDA = (
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA device and a CUDA build of torch (constraints.txt pins a CPU one)",
    ),
)
"""The marks of a test, or a test's parameter, that runs on CUDA only."""

DEVICES = ("cpu", pytest.param("cuda", marks=NEEDS_CUDA))
"""Devices the device-parametrised tests run on (CUDA where one is present)."""


def needs_cuda(test: _Test) -> _Test:
    """Mark ``test`` ``gpu`` and skip it where torch sees no CUDA device."""
    for mark in NEEDS_CUDA:
        test = mark(test)
    return test


def ant(
    num_envs: int = 3, *, seed: int = 0, max_episode_steps: int = 1000, device: str = "cpu"
) -> NewtonVecEnv:
    """An Ant env of ``num_envs`` rows."""
    return NewtonVecEnv(
        task=AntTask(),
        num_envs=num_envs,
        seed=seed,
        max_episode_steps=max_episode_steps,
        device=device,
    )


def actions(num_steps: int, num_envs: int, seed: int = 0) -> torch.Tensor:
    """Actions in the middle half of the bounds, ``[num_steps, num_envs, 8]``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(num_steps, num_envs, 8, generator=generator) - 0.5

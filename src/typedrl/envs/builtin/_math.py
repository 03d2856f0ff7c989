"""Smooth helpers shared by the built-in envs' rewards and dynamics."""

import math
from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

__all__ = ["angle_normalize", "smooth_distance", "stack_columns", "uniform_between"]


def smooth_distance(
    dx: Float[Tensor, " num_envs"], dy: Float[Tensor, " num_envs"], epsilon: float
) -> Float[Tensor, " num_envs"]:
    """``sqrt(dx^2 + dy^2 + epsilon^2) - epsilon``: the planar distance, smoothed near zero.

    Unlike ``torch.linalg.vector_norm`` it has a finite gradient at ``(0, 0)``.
    """
    return torch.sqrt(dx * dx + dy * dy + epsilon * epsilon) - epsilon


def uniform_between(
    uniform: Float[Tensor, "*batch"], low: float, high: float
) -> Float[Tensor, "*batch"]:
    """Scale uniforms in ``(0, 1]`` to ``(low, high]``."""
    return low + (high - low) * uniform


def angle_normalize(angle: Float[Tensor, "*batch"]) -> Float[Tensor, "*batch"]:
    """Wrap angles to ``[-pi, pi)``; differentiable almost everywhere with slope 1."""
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi


def stack_columns(columns: Sequence[Float[Tensor, " num_envs"]]) -> Float[Tensor, "num_envs k"]:
    """Stack ``k`` per-row columns into ``[num_envs, k]``, stored column by column.

    The result is the transpose of a contiguous ``[k, num_envs]`` tensor: each
    column stays contiguous, so column-wise physics reads it at full speed, and
    stacking costs one contiguous copy instead of an interleaving one.
    """
    return torch.stack(tuple(columns), dim=0).T

"""Reset noise of the shipped tasks, from the env's counter-based uniforms."""

import math

import torch
from jaxtyping import Float
from torch import Tensor

__all__ = ["normals"]


def normals(uniform: Float[Tensor, "num_envs n"], count: int) -> Float[Tensor, "num_envs count"]:
    """``count`` standard normals per row from the first ``2 * ceil(count / 2)`` uniforms.

    The Box-Muller transform: each pair ``(u1, u2)`` gives
    ``sqrt(-2 log u1) * (cos 2 pi u2, sin 2 pi u2)``.
    """
    pairs = (count + 1) // 2
    u1, u2 = uniform[:, :pairs], uniform[:, pairs : 2 * pairs]
    # Uniforms lie in (0, 1], so the logarithm is finite.
    radius = torch.sqrt(-2.0 * torch.log(u1))
    angle = 2.0 * math.pi * u2
    return torch.cat((radius * torch.cos(angle), radius * torch.sin(angle)), dim=-1)[:, :count]

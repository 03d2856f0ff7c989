"""Action sequences for the checkers, drawn by hypothesis from the action space."""

import math
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, final

import gymnasium as gym
import numpy as np
import torch
from hypothesis import strategies as st
from torch import Tensor
from typing_extensions import TypeIs

__all__ = ["ActionSampler", "ActionSpace", "supported_action_space"]

#: Above this many numbers per rollout, hypothesis draws one pattern per step instead.
_ELEMENTWISE_BUDGET: Final = 512
_PATTERNS: Final = ("uniform", "low", "high", "edges")

# One step of a plan: every number of the action (elementwise), or a pattern and a seed.
StepPlan: TypeAlias = tuple[float, ...] | tuple[int, ...] | tuple[str, int]
Plan: TypeAlias = tuple[int, tuple[StepPlan, ...]]

ActionSpace: TypeAlias = (
    gym.spaces.Box | gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary
)
"""The action spaces the checkers draw from."""


def supported_action_space(space: object) -> TypeIs[ActionSpace]:
    """Whether the checkers can draw actions from ``space``."""
    return isinstance(
        space,
        gym.spaces.Box | gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary,
    )


def _finite_bounds(space: gym.spaces.Box) -> tuple[list[float], list[float]]:
    """Flat bounds with infinite sides replaced by a width-2 window, rounded to the space dtype."""
    low = space.low.astype(np.float64).ravel()
    high = space.high.astype(np.float64).ravel()
    low_inf, high_inf = ~np.isfinite(low), ~np.isfinite(high)
    low = np.where(low_inf & high_inf, -1.0, np.where(low_inf, high - 2.0, low))
    high = np.where(high_inf & ~low_inf, low + 2.0, np.where(high_inf, 1.0, high))
    return low.astype(space.dtype).tolist(), high.astype(space.dtype).tolist()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ActionSampler:
    """Turns an action space into hypothesis strategies and materialises their draws.

    Box actions are floats within the bounds, edges included (an infinite side
    is replaced by a window of width 2 next to the finite one, or ``[-1, 1]``);
    Discrete, MultiDiscrete and MultiBinary actions are ``int64`` codes. Small
    rollouts are drawn number by number; large ones as one pattern per step
    (uniform, all low, all high, or a mix of edges) expanded by a seeded torch
    generator, which keeps hypothesis within its buffer.
    """

    space: ActionSpace
    """The single-row action space."""

    num_envs: int
    """Rows per action."""

    device: torch.device
    """Device of the materialised actions."""

    @property
    def shape(self) -> tuple[int, ...]:
        """``(num_envs, *space.shape)``."""
        return (self.num_envs, *(self.space.shape or ()))

    @property
    def dtype(self) -> torch.dtype:
        """The space's float dtype for Box (float32 if not floating), ``int64`` otherwise."""
        if isinstance(self.space, gym.spaces.Box):
            dtype = torch.from_numpy(np.empty(0, dtype=self.space.dtype)).dtype
            return dtype if dtype.is_floating_point else torch.float32
        return torch.int64

    def _bounds(self) -> tuple[list[float], list[float]]:
        """Flat per-element bounds of one row (inclusive)."""
        space = self.space
        if isinstance(space, gym.spaces.Box):
            return _finite_bounds(space)
        if isinstance(space, gym.spaces.Discrete):
            return [float(space.start)], [float(space.start + space.n - 1)]
        if isinstance(space, gym.spaces.MultiDiscrete):
            start = space.start.ravel().astype(np.int64)
            top = start + space.nvec.ravel().astype(np.int64) - 1
            return [float(v) for v in start], [float(v) for v in top]
        size = math.prod(space.shape)
        return [0.0] * size, [1.0] * size

    def _element(self, low: float, high: float) -> st.SearchStrategy[Any]:
        if not isinstance(self.space, gym.spaces.Box):
            return st.integers(int(low), int(high))
        if low == high:
            return st.just(low)
        width = {torch.float16: 16, torch.float32: 32}.get(self.dtype, 64)
        return st.floats(low, high, width=width, allow_nan=False, allow_infinity=False)  # type: ignore[arg-type]

    def strategy(self, num_steps: int) -> st.SearchStrategy[Plan]:
        """Strategy of ``(reset_seed, per-step plans)`` for one rollout of ``num_steps``."""
        low, high = self._bounds()
        per_step = self.num_envs * len(low)
        step: st.SearchStrategy[StepPlan]
        if per_step * num_steps <= _ELEMENTWISE_BUDGET:
            elements = [
                self._element(low[i % len(low)], high[i % len(low)]) for i in range(per_step)
            ]
            step = st.tuples(*elements)
        else:
            step = st.tuples(st.sampled_from(_PATTERNS), st.integers(0, 2**31 - 1))
        steps = st.lists(step, min_size=num_steps, max_size=num_steps).map(tuple)
        return st.tuples(st.integers(0, 2**31 - 1), steps)

    def materialize(self, plan: StepPlan) -> Tensor:
        """The action tensor ``[num_envs, *shape]`` on :attr:`device` for one step's plan."""
        if len(plan) == 2 and isinstance(plan[0], str):
            values = self._expand(str(plan[0]), int(plan[1]))
        else:
            values = torch.tensor(list(plan), dtype=torch.float64)
        return values.to(self.dtype).reshape(self.shape).to(self.device)

    def _expand(self, pattern: str, seed: int) -> Tensor:
        low, high = self._row_bounds()
        unit = torch.rand(low.shape, generator=torch.Generator().manual_seed(seed), dtype=low.dtype)
        if pattern == "low":
            return low
        if pattern == "high":
            return high
        if pattern == "edges":
            return torch.where(unit < 0.5, low, high)
        if isinstance(self.space, gym.spaces.Box):
            return low + (high - low) * unit
        # Integer codes: uniform over low..high inclusive.
        return torch.minimum(torch.floor(low + (high - low + 1.0) * unit), high)

    def _row_bounds(self) -> tuple[Tensor, Tensor]:
        """Bounds of every number of an action batch, flat, float64."""
        low, high = self._bounds()
        return (
            torch.tensor(low, dtype=torch.float64).repeat(self.num_envs),
            torch.tensor(high, dtype=torch.float64).repeat(self.num_envs),
        )

    def inner(self, generator: torch.Generator) -> Tensor:
        """An action drawn uniformly from the middle half of the (finite) Box bounds."""
        low, high = self._row_bounds()
        unit = torch.rand(low.shape, generator=generator, dtype=torch.float64)
        values = low + (high - low) * (0.25 + 0.5 * unit)
        return values.to(self.dtype).reshape(self.shape).to(self.device)

    def half_widths(self) -> list[float]:
        """Half-width of the (finite) bounds of each number of one row's action."""
        low, high = self._bounds()
        return [0.5 * (h - lo) for lo, h in zip(low, high, strict=True)]

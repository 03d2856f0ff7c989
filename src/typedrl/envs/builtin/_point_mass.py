"""A damped 2-D point mass driven to a random goal."""

from typing import ClassVar, Unpack, final

import numpy as np
import torch
from jaxtyping import Float, Float64
from torch import Tensor

from typedrl.envs.builtin._base import BaseTorchVecEnv, EnvLayout, EnvOptions
from typedrl.envs.builtin._math import smooth_distance, stack_columns, uniform_between
from typedrl.envs.builtin._render import Canvas, RenderView
from typedrl.types import ContinuousAction, Done, ObsVector, Reward

__all__ = ["PointMass"]

# State layout: position (2), velocity (2), goal (2).
_State = Float[Tensor, "num_envs 6"]

_DT = 0.05
_FORCE_SCALE = 2.0
_DAMPING = 0.5
_ARENA = 1.0
_EPSILON = 0.05
_ACTION_COST = 0.01
_BORDER = 0.01
_GOAL_RADIUS = 0.06
_MASS_RADIUS = 0.05
_ARENA_BORDER_COLOR = (120, 120, 120)
_ARENA_COLOR = (235, 235, 235)
_GOAL_COLOR = (60, 160, 60)
_MASS_COLOR = (50, 90, 200)


_LAYOUT = EnvLayout(
    observation_high=(float("inf"),) * 6,
    observation_normalize_mask=(True,) * 6,
    action_space=(1.0, 1.0),
    num_initial_draws=4,
    max_episode_steps=200,
)


@final
class PointMass(BaseTorchVecEnv):
    """Drive a damped unit point mass in the plane to a goal drawn per episode.

    - state: position ``p``, velocity ``v``, goal ``g`` (each 2-D); initial
      ``p, g ~ U(-1, 1)^2``, ``v = 0``; the goal is fixed within an episode;
    - action: force ``Box(-1, 1, (2,))``, scaled by 2 (clipped to the bounds
      unless ``clip_actions=False``);
    - semi-implicit Euler, ``dt = 0.05``, damping ``0.5``:
      ``v' = v + dt (2 a - 0.5 v)``, ``p' = p + dt v'``; no walls;
    - reward (smooth everywhere)::

          r = -(sqrt(|g - p'|^2 + 0.05^2) - 0.05) - 0.01 * |a|^2

    - never terminates; time limit 200 steps;
    - observation ``(p, v, g - p)`` (6 features, all flagged for normalisation).

    :meth:`~BaseTorchVecEnv.render` draws the square ``[-1, 1]^2`` the
    positions and goals are drawn from in grey, the goal in green and the mass
    in blue (400 x 400 pixels, 20 fps).

    Args:
        num_envs: Number of rows.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is
            200 steps unless ``max_episode_steps`` says otherwise.

    Example:
        >>> import torch
        >>> env = PointMass(num_envs=2)
        >>> obs, _ = env.reset(seed=0)
        >>> toward_goal = obs["obs"][:, 4:].clamp(-1.0, 1.0).requires_grad_()
        >>> result = env.step(toward_goal)
        >>> result.reward.sum().backward()
        >>> result.obs["obs"].shape, toward_goal.grad.shape
        (torch.Size([2, 6]), torch.Size([2, 2]))
    """

    _render_view: ClassVar[RenderView | None] = RenderView(x_range=(-1.5, 1.5), control_dt=_DT)

    def __init__(self, *, num_envs: int, **options: Unpack[EnvOptions]) -> None:
        super().__init__(num_envs=num_envs, layout=_LAYOUT, **options)

    def _initial_state(self, uniform: Float[Tensor, "num_envs 4"]) -> _State:
        px, py, gx, gy = uniform_between(uniform, -_ARENA, _ARENA).unbind(-1)
        still = torch.zeros_like(px)
        return stack_columns((px, py, still, still, gx, gy))

    def _dynamics(self, state: _State, action: ContinuousAction) -> _State:
        px, py, vx, vy, gx, gy = state.unbind(-1)
        ax, ay = action.unbind(-1)
        # v' = v + dt (F a - c v); p' = p + dt v'
        next_vx = vx + _DT * (_FORCE_SCALE * ax - _DAMPING * vx)
        next_vy = vy + _DT * (_FORCE_SCALE * ay - _DAMPING * vy)
        return stack_columns((px + _DT * next_vx, py + _DT * next_vy, next_vx, next_vy, gx, gy))

    def _reward(self, state: _State, action: ContinuousAction, next_state: _State) -> Reward:
        px, py, _, _, gx, gy = next_state.unbind(-1)
        ax, ay = action.unbind(-1)
        # r = -smooth_distance(g - p') - 0.01 |a|^2
        return -smooth_distance(gx - px, gy - py, _EPSILON) - _ACTION_COST * (ax * ax + ay * ay)

    def _terminated(self, next_state: _State) -> Done:
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _observe(self, state: _State) -> ObsVector:
        px, py, vx, vy, gx, gy = state.unbind(-1)
        return stack_columns((px, py, vx, vy, gx - px, gy - py))

    def _draw(self, canvas: Canvas, obs: Float64[np.ndarray, " obs_dim"]) -> None:
        px, py, _, _, to_goal_x, to_goal_y = (float(value) for value in obs)
        outer, inner = _ARENA + _BORDER, _ARENA - _BORDER
        canvas.rectangle((-outer, -outer), (outer, outer), color=_ARENA_BORDER_COLOR)
        canvas.rectangle((-inner, -inner), (inner, inner), color=_ARENA_COLOR)
        canvas.circle((px + to_goal_x, py + to_goal_y), _GOAL_RADIUS, color=_GOAL_COLOR)
        canvas.circle((px, py), _MASS_RADIUS, color=_MASS_COLOR)

"""Gymnasium's Pendulum-v1 as a batched, differentiable torch env."""

import math
from typing import ClassVar, Unpack, final

import numpy as np
import torch
from jaxtyping import Float, Float64
from torch import Tensor

from typedrl.envs.builtin._base import BaseTorchVecEnv, EnvLayout, EnvOptions
from typedrl.envs.builtin._math import angle_normalize, stack_columns, uniform_between
from typedrl.envs.builtin._render import Canvas, RenderView
from typedrl.types import ContinuousAction, Done, ObsVector, Reward

__all__ = ["Pendulum"]

_State = Float[Tensor, "num_envs 2"]

_MAX_SPEED = 8.0
_MAX_TORQUE = 2.0
_DT = 0.05
_GRAVITY = 10.0
_MASS = 1.0
_LENGTH = 1.0
_ROD_WIDTH = 0.2
_PIVOT_RADIUS = 0.05
_ROD = (204, 77, 77)
_PIVOT = (0, 0, 0)


_LAYOUT = EnvLayout(
    observation_high=(1.0, 1.0, _MAX_SPEED),
    observation_normalize_mask=(False, False, True),
    action_space=(_MAX_TORQUE,),
    num_initial_draws=2,
    max_episode_steps=200,
)


@final
class Pendulum(BaseTorchVecEnv):
    """Swing a pendulum up and hold it: Gymnasium's ``Pendulum-v1``, batched in torch.

    Same dynamics, reward, limits and initial distribution as Gymnasium
    (``g = 10``, ``dt = 0.05``, 200-step episodes, never terminated):

    - state ``(theta, theta_dot)``, ``theta = 0`` upright; initial
      ``theta ~ U(-pi, pi)``, ``theta_dot ~ U(-1, 1)``;
    - action: torque ``Box(-2, 2, (1,))``, clipped to the bounds (as Gymnasium
      does) unless ``clip_actions=False``;
    - ``theta_dot' = clip(theta_dot + (3 g / (2 l) sin(theta) + 3 / (m l^2) u) dt, -8, 8)``,
      ``theta' = theta + theta_dot' dt``;
    - reward ``-(normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2)`` on the
      state *before* the step (``normalize`` wraps to ``[-pi, pi)``);
    - observation ``(cos theta, sin theta, theta_dot)``, ``Box([-1, -1, -8], [1, 1, 8])``;
      only ``theta_dot`` is flagged for normalisation.

    The gradient is zero where the torque or the speed is clipped.

    :meth:`~BaseTorchVecEnv.render` draws Gymnasium's picture: a red rod of
    length 1 turning about a black pivot, on white (400 x 400 pixels, 20 fps).

    Args:
        num_envs: Number of rows.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is
            200 steps (as in Gymnasium) unless ``max_episode_steps`` says
            otherwise, and clipping keeps torques in ``[-2, 2]`` (Gymnasium's
            behaviour).

    Example:
        >>> import torch
        >>> env = Pendulum(num_envs=4)
        >>> obs, _ = env.reset(seed=0)
        >>> torque = torch.zeros(4, 1, requires_grad=True)
        >>> result = env.step(torque)
        >>> result.reward.sum().backward()
        >>> obs["obs"].shape, torque.grad.shape
        (torch.Size([4, 3]), torch.Size([4, 1]))
    """

    _render_view: ClassVar[RenderView | None] = RenderView(x_range=(-2.2, 2.2), control_dt=_DT)

    def __init__(self, *, num_envs: int, **options: Unpack[EnvOptions]) -> None:
        super().__init__(num_envs=num_envs, layout=_LAYOUT, **options)

    def _initial_state(self, uniform: _State) -> _State:
        theta = uniform_between(uniform[:, 0], -math.pi, math.pi)
        theta_dot = uniform_between(uniform[:, 1], -1.0, 1.0)
        return stack_columns((theta, theta_dot))

    def _dynamics(self, state: _State, action: ContinuousAction) -> _State:
        theta, theta_dot = state.unbind(-1)
        torque = action[:, 0]
        angular_acc = (
            3.0 * _GRAVITY / (2.0 * _LENGTH) * torch.sin(theta)
            + 3.0 / (_MASS * _LENGTH**2) * torque
        )
        # Explicit Euler on the speed, clipped, then the angle from the new speed.
        next_theta_dot = torch.clamp(theta_dot + angular_acc * _DT, -_MAX_SPEED, _MAX_SPEED)
        next_theta = theta + next_theta_dot * _DT
        return stack_columns((next_theta, next_theta_dot))

    def _reward(self, state: _State, action: ContinuousAction, next_state: _State) -> Reward:
        theta, theta_dot = state.unbind(-1)
        torque = action[:, 0]
        # cost = normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2, on the pre-step state.
        cost = angle_normalize(theta) ** 2 + 0.1 * theta_dot**2 + 0.001 * torque**2
        return -cost

    def _terminated(self, next_state: _State) -> Done:
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _observe(self, state: _State) -> ObsVector:
        theta, theta_dot = state.unbind(-1)
        return stack_columns((torch.cos(theta), torch.sin(theta), theta_dot))

    def _draw(self, canvas: Canvas, obs: Float64[np.ndarray, " obs_dim"]) -> None:
        cos_theta, sin_theta = float(obs[0]), float(obs[1])
        # theta = 0 points up; a positive angle turns the rod counter-clockwise.
        end = (-_LENGTH * sin_theta, _LENGTH * cos_theta)
        canvas.segment((0.0, 0.0), end, width=_ROD_WIDTH, color=_ROD)
        canvas.circle((0.0, 0.0), _PIVOT_RADIUS, color=_PIVOT)

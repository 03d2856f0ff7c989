"""A two-link planar arm reaching for a random target."""

import math
from typing import ClassVar, Unpack, final

import numpy as np
import torch
from jaxtyping import Float, Float64
from torch import Tensor

from typedrl.envs.builtin._base import BaseTorchVecEnv, EnvLayout, EnvOptions
from typedrl.envs.builtin._math import smooth_distance, stack_columns, uniform_between
from typedrl.envs.builtin._render import Canvas, RenderView
from typedrl.types import ContinuousAction, Done, ObsVector, Reward

__all__ = ["Reacher"]

# State layout: joint angles q1, q2; joint velocities; target (x, y).
_State = Float[Tensor, "num_envs 6"]
_Row = Float[Tensor, " num_envs"]

_DT = 0.05
_LENGTH = 0.5  # both links, so the arm reaches 1.0
_MASS = 1.0  # both links, uniform rods
_COM = _LENGTH / 2
_INERTIA = _MASS * _LENGTH**2 / 12  # of a rod about its centre
_DAMPING = 0.1
_TORQUE_SCALE = 1.0
_TARGET_RADIUS = (0.2, 0.9)
_INITIAL_SPEED = 0.1
_EPSILON = 0.05
_ACTION_COST = 0.01
_LINK_WIDTH = 0.06
_JOINT_RADIUS = 0.035
_TARGET_DRAW_RADIUS = 0.04
_REACH_COLOR = (235, 235, 235)
_TARGET_COLOR = (220, 50, 50)
_LINK_COLORS = ((40, 110, 180), (70, 160, 220))
_JOINT_COLOR = (0, 0, 0)


_REACH = 2 * _LENGTH
_LAYOUT = EnvLayout(
    observation_high=(1.0,) * 4 + (_REACH, _REACH, math.inf, math.inf, 2 * _REACH, 2 * _REACH),
    observation_normalize_mask=(False,) * 4 + (True,) * 6,
    action_space=(1.0, 1.0),
    num_initial_draws=6,
    max_episode_steps=100,
)


@final
class Reacher(BaseTorchVecEnv):
    """Move a two-link planar arm's fingertip to a random target.

    The arm lies in the horizontal plane (no gravity): two uniform rods of
    length 0.5 and mass 1 with a torque at each joint and viscous joint damping
    0.1. The full rigid-body dynamics ``M(q) q'' + C(q, q') q' + 0.1 q' = tau``
    are solved in closed form (2x2 inertia matrix) and integrated with
    semi-implicit Euler, ``dt = 0.05``. Both joints turn freely.

    - action: joint torques ``Box(-1, 1, (2,))`` (clipped to the bounds unless
      ``clip_actions=False``);
    - initial state: ``q ~ U(-pi, pi)^2``, ``q' ~ U(-0.1, 0.1)^2``; target at
      radius ``sqrt(U(0.2^2, 0.9^2))`` (uniform over the annulus, always
      reachable) and angle ``U(-pi, pi)``;
    - reward of the step that reaches fingertip ``f'`` (smooth everywhere)::

          r = -(sqrt(|f' - target|^2 + 0.05^2) - 0.05) - 0.01 * |a|^2

    - never terminates; time limit 100 steps;
    - observation (10 features): ``cos q1, cos q2, sin q1, sin q2, target_x,
      target_y, q1', q2', f_x - target_x, f_y - target_y``; cosines and sines
      are not flagged for normalisation.

    :meth:`~BaseTorchVecEnv.render` draws the disc the arm reaches in grey,
    the target in red, the two links in blue and the joints in black
    (400 x 400 pixels, 20 fps).

    Args:
        num_envs: Number of rows.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is
            100 steps unless ``max_episode_steps`` says otherwise.

    Example:
        >>> import torch
        >>> env = Reacher(num_envs=2)
        >>> obs, _ = env.reset(seed=0)
        >>> torques = torch.zeros(2, 2, requires_grad=True)
        >>> result = env.step(torques)
        >>> result.reward.sum().backward()
        >>> obs["obs"].shape, torques.grad.shape
        (torch.Size([2, 10]), torch.Size([2, 2]))
    """

    _render_view: ClassVar[RenderView | None] = RenderView(x_range=(-1.2, 1.2), control_dt=_DT)

    def __init__(self, *, num_envs: int, **options: Unpack[EnvOptions]) -> None:
        super().__init__(num_envs=num_envs, layout=_LAYOUT, **options)

    def _initial_state(self, uniform: _State) -> _State:
        u_q1, u_q2, u_dq1, u_dq2, u_radius, u_bearing = uniform.unbind(-1)
        low, high = _TARGET_RADIUS
        radius = torch.sqrt(uniform_between(u_radius, low * low, high * high))
        bearing = uniform_between(u_bearing, -math.pi, math.pi)
        return stack_columns(
            (
                uniform_between(u_q1, -math.pi, math.pi),
                uniform_between(u_q2, -math.pi, math.pi),
                uniform_between(u_dq1, -_INITIAL_SPEED, _INITIAL_SPEED),
                uniform_between(u_dq2, -_INITIAL_SPEED, _INITIAL_SPEED),
                radius * torch.cos(bearing),
                radius * torch.sin(bearing),
            )
        )

    def _dynamics(self, state: _State, action: ContinuousAction) -> _State:
        q1, q2, dq1, dq2, target_x, target_y = state.unbind(-1)
        a1, a2 = action.unbind(-1)
        tau1 = _TORQUE_SCALE * a1 - _DAMPING * dq1
        tau2 = _TORQUE_SCALE * a2 - _DAMPING * dq2
        cos2 = torch.cos(q2)
        coupling = _MASS * _LENGTH * _COM  # m2 l1 lc2
        # Inertia matrix M(q) of two uniform rods.
        m11 = 2 * _INERTIA + _MASS * _COM**2 + _MASS * (_LENGTH**2 + _COM**2) + 2 * coupling * cos2
        m12 = _INERTIA + _MASS * _COM**2 + coupling * cos2
        m22 = _INERTIA + _MASS * _COM**2
        # Coriolis and centrifugal terms, with h = m2 l1 lc2 sin(q2).
        h = coupling * torch.sin(q2)
        rhs1 = tau1 + h * (2 * dq1 * dq2 + dq2 * dq2)
        rhs2 = tau2 - h * dq1 * dq1
        # Solve M q'' = rhs in closed form; det(M) > 0 for every q2.
        det = m11 * m22 - m12 * m12
        ddq1 = (m22 * rhs1 - m12 * rhs2) / det
        ddq2 = (m11 * rhs2 - m12 * rhs1) / det
        # Semi-implicit Euler: velocities first, angles from the new velocities.
        next_dq1 = dq1 + _DT * ddq1
        next_dq2 = dq2 + _DT * ddq2
        return stack_columns(
            (q1 + _DT * next_dq1, q2 + _DT * next_dq2, next_dq1, next_dq2, target_x, target_y)
        )

    def _reward(self, state: _State, action: ContinuousAction, next_state: _State) -> Reward:
        q1, q2, _, _, target_x, target_y = next_state.unbind(-1)
        tip_x, tip_y = _fingertip(q1, q2)
        a1, a2 = action.unbind(-1)
        # r = -smooth_distance(f' - target) - 0.01 |a|^2
        distance = smooth_distance(tip_x - target_x, tip_y - target_y, _EPSILON)
        return -distance - _ACTION_COST * (a1 * a1 + a2 * a2)

    def _terminated(self, next_state: _State) -> Done:
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _observe(self, state: _State) -> ObsVector:
        q1, q2, dq1, dq2, target_x, target_y = state.unbind(-1)
        tip_x, tip_y = _fingertip(q1, q2)
        return stack_columns(
            (
                torch.cos(q1),
                torch.cos(q2),
                torch.sin(q1),
                torch.sin(q2),
                target_x,
                target_y,
                dq1,
                dq2,
                tip_x - target_x,
                tip_y - target_y,
            )
        )

    def _draw(self, canvas: Canvas, obs: Float64[np.ndarray, " obs_dim"]) -> None:
        cos1, cos2, sin1, sin2, target_x, target_y = (float(value) for value in obs[:6])
        # cos(q1 + q2) and sin(q1 + q2) from the angles' cosines and sines.
        cos12 = cos1 * cos2 - sin1 * sin2
        sin12 = sin1 * cos2 + cos1 * sin2
        elbow = (_LENGTH * cos1, _LENGTH * sin1)
        tip = (elbow[0] + _LENGTH * cos12, elbow[1] + _LENGTH * sin12)
        canvas.circle((0.0, 0.0), 2 * _LENGTH, color=_REACH_COLOR)
        canvas.circle((target_x, target_y), _TARGET_DRAW_RADIUS, color=_TARGET_COLOR)
        canvas.segment((0.0, 0.0), elbow, width=_LINK_WIDTH, color=_LINK_COLORS[0])
        canvas.segment(elbow, tip, width=_LINK_WIDTH, color=_LINK_COLORS[1])
        for joint in ((0.0, 0.0), elbow, tip):
            canvas.circle(joint, _JOINT_RADIUS, color=_JOINT_COLOR)


def _fingertip(q1: _Row, q2: _Row) -> tuple[_Row, _Row]:
    """Fingertip position ``l1 (cos q1, sin q1) + l2 (cos(q1 + q2), sin(q1 + q2))``."""
    outer = q1 + q2
    return (
        _LENGTH * (torch.cos(q1) + torch.cos(outer)),
        _LENGTH * (torch.sin(q1) + torch.sin(outer)),
    )

"""Gymnasium's CartPole-v1 as a batched, differentiable torch env (discrete or continuous force)."""

import dataclasses
import math
from typing import ClassVar, Literal, Unpack, final

import numpy as np
import torch
from jaxtyping import Float, Float64
from torch import Tensor

from typedrl.envs.builtin import _cartpole_physics as physics
from typedrl.envs.builtin._base import BaseTorchVecEnv, EnvLayout, EnvOptions
from typedrl.envs.builtin._cartpole_render import VIEW, draw_cart_pole
from typedrl.envs.builtin._math import uniform_between
from typedrl.envs.builtin._render import Canvas, RenderView
from typedrl.types import Action, Done, ObsVector, Reward

__all__ = ["CartPole"]

_State = Float[Tensor, "num_envs 4"]
# Integer dtypes index_select takes as indices.
_INDEX_DTYPES = (torch.int32, torch.int64)


_DISCRETE_LAYOUT = EnvLayout(
    observation_high=(physics.X_THRESHOLD * 2, math.inf, physics.THETA_THRESHOLD * 2, math.inf),
    observation_normalize_mask=(True, True, True, True),
    action_space=2,
    num_initial_draws=4,
    max_episode_steps=500,
)
_CONTINUOUS_LAYOUT = dataclasses.replace(_DISCRETE_LAYOUT, action_space=(1.0,))


@final
class CartPole(BaseTorchVecEnv):
    """Balance a pole on a cart: Gymnasium's ``CartPole-v1``, batched in torch.

    Dynamics (explicit Euler, ``tau = 0.02``), termination (``|x| > 2.4`` or
    ``|theta| > 12 degrees``), initial distribution (every state component
    ``~ U(-0.05, 0.05)``), observation ``(x, x_dot, theta, theta_dot)`` and the
    500-step time limit are Gymnasium's. ``action_mode`` picks the action space
    and the reward:

    - ``"discrete"`` (default, for PPO): ``Discrete(2)``, int64 actions of shape
      ``[num_envs]``; ``1`` (any value ``> 0``) pushes right with 10 N, ``0``
      (any value ``<= 0``) pushes left; reward ``1`` every step. Identical to
      Gymnasium's ``CartPole-v1`` step for step. The step is *not*
      differentiable with respect to the action: gradients flow through the
      state only, and the reward is a constant.
    - ``"continuous"`` (for analytic policy gradients): ``Box(-1, 1, (1,))``,
      force ``10 * a`` N (actions clipped to the bounds unless
      ``clip_actions=False``); smooth reward of the step that reaches ``s'``::

          r = cos(theta') - 0.1 * (x' / 2.4)**2 - 0.01 * a**2

      which is at most ``1`` (upright, centred, no force) and differentiable in
      the action and the state. Termination stays Gymnasium's.

    :meth:`~BaseTorchVecEnv.render` draws the rail with its ends at
    ``|x| = 2.4`` marked in red, the black cart and the pole (600 x 400
    pixels, 50 fps).

    Args:
        num_envs: Number of rows.
        action_mode: ``"discrete"`` or ``"continuous"``.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is
            500 steps (as in Gymnasium) unless ``max_episode_steps`` says
            otherwise.

    Example:
        >>> import torch
        >>> env = CartPole(num_envs=3)
        >>> obs, _ = env.reset(seed=0)
        >>> result = env.step(torch.tensor([0, 1, 1]))
        >>> result.obs["obs"].shape, result.reward.tolist()
        (torch.Size([3, 4]), [1.0, 1.0, 1.0])
        >>> env = CartPole(num_envs=3, action_mode="continuous")
        >>> _ = env.reset(seed=0)
        >>> force = torch.zeros(3, 1, requires_grad=True)
        >>> env.step(force).reward.sum().backward()
        >>> force.grad.shape
        torch.Size([3, 1])
    """

    _render_view: ClassVar[RenderView | None] = VIEW

    def __init__(
        self,
        *,
        num_envs: int,
        action_mode: Literal["discrete", "continuous"] = "discrete",
        **options: Unpack[EnvOptions],
    ) -> None:
        self._continuous = action_mode == "continuous"
        layout = _CONTINUOUS_LAYOUT if self._continuous else _DISCRETE_LAYOUT
        super().__init__(num_envs=num_envs, layout=layout, **options)
        # Push left (action 0) or right (action 1), divided by the total mass
        # (what the equations use).
        specific_push = physics.FORCE_MAG / physics.TOTAL_MASS
        self._pushes = torch.tensor(
            (-specific_push, specific_push), dtype=self.dtype, device=self.device
        )
        # Termination bounds of |x| and |theta| (state columns 0 and 2).
        self._bounds = torch.tensor(
            (physics.X_THRESHOLD, physics.THETA_THRESHOLD), dtype=self.dtype, device=self.device
        )

    @property
    def action_mode(self) -> Literal["discrete", "continuous"]:
        """``"discrete"`` (``Discrete(2)``) or ``"continuous"`` (``Box(-1, 1, (1,))``)."""
        return "continuous" if self._continuous else "discrete"

    def _initial_state(self, uniform: _State) -> _State:
        return uniform_between(uniform, -0.05, 0.05)

    def _dynamics(self, state: _State, action: Action) -> _State:
        _, x_dot, theta, theta_dot = state.unbind(-1)
        if self._continuous:
            specific_force = action[:, 0] * (physics.FORCE_MAG / physics.TOTAL_MASS)
        else:
            # clamp: any action > 0 pushes right, any action <= 0 left.
            side = action.clamp(0, 1)
            if side.dtype not in _INDEX_DTYPES:
                side = side.to(torch.int64)
            specific_force = self._pushes.index_select(0, side)
        x_acc, theta_acc = physics.specific_accelerations(
            specific_force, torch.cos(theta), torch.sin(theta), theta_dot
        )
        # Explicit Euler: positions advance with the old velocities. One op on all
        # columns: state + tau * (x_dot, x_acc, theta_dot, theta_acc), column by column.
        derivative = torch.stack((x_dot, x_acc, theta_dot, theta_acc))
        return torch.add(state.T, derivative, alpha=physics.TAU).T

    def _reward(self, state: _State, action: Action, next_state: _State) -> Reward:
        if not self._continuous:
            return torch.ones(self.num_envs, dtype=self.dtype, device=self.device)
        x = next_state[:, 0]
        theta = next_state[:, 2]
        force = action[:, 0]
        # r = cos(theta') - 0.1 (x' / 2.4)^2 - 0.01 a^2
        return torch.cos(theta) - 0.1 * (x / physics.X_THRESHOLD) ** 2 - 0.01 * force * force

    def _terminated(self, next_state: _State) -> Done:
        # |x| > 2.4 or |theta| > 12 degrees, both columns at once.
        beyond = next_state[:, ::2].abs() > self._bounds
        return beyond[:, 0] | beyond[:, 1]

    def _observe(self, state: _State) -> ObsVector:
        # A copy, so that in-place edits of an observation never reach the env's state.
        return state.clone()

    def _draw(self, canvas: Canvas, obs: Float64[np.ndarray, " obs_dim"]) -> None:
        x, _, theta, _ = (float(value) for value in obs)
        draw_cart_pole(canvas, x, math.cos(theta), math.sin(theta))

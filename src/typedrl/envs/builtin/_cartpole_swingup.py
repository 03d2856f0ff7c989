"""Cart-pole swing-up: the pole starts hanging down and must be swung upright."""

import math
from typing import Literal, final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl import _validation
from typedrl._types import ContinuousAction, Done, ObsVector, Reward
from typedrl.envs.builtin import _cartpole_physics as physics
from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.envs.builtin._math import stack_columns, uniform_between

__all__ = ["CartPoleSwingUp"]

_State = Float[Tensor, "num_envs 4"]
_INITIAL_NOISE = 0.05


@final
class CartPoleSwingUp(BaseTorchVecEnv):
    """Swing the pole up from hanging down and balance it, with a continuous force.

    The cart and pole are Gymnasium's ``CartPole-v1`` system (same masses,
    lengths and ``tau = 0.02``), integrated with semi-implicit Euler (velocities
    first, then positions with the new velocities), which stays stable through
    full turns of the pole. ``theta = 0`` is upright, ``theta = pi`` hanging.

    - action: ``Box(-1, 1, (1,))``, force ``10 * a`` N on the cart (clipped to
      the bounds unless ``clip_actions=False``);
    - initial state: ``x, x_dot, theta_dot ~ U(-0.05, 0.05)``,
      ``theta ~ pi + U(-0.05, 0.05)``;
    - reward of the step that reaches ``s'`` (smooth, at most ``1``)::

          r = 0.5 * (1 + cos(theta')) * (1 - 0.5 * (x' / 2.4)**2) - 0.01 * a**2

      the first factor rewards upright-ness, the second centring;
    - no angle termination (the pole may turn freely); the cart's track is
      bounded by *termination*: the episode terminates when ``|x'| > 2.4``;
    - observation ``(x, x_dot, cos theta, sin theta, theta_dot)``; cosine and
      sine are not flagged for normalisation;
    - time limit: 500 steps.

    Args:
        num_envs: Number of rows.
        max_episode_steps: Time limit.
        clip_actions: Clip actions to ``[-1, 1]``.
        seed: Seed of the first unseeded :meth:`~BaseTorchVecEnv.reset`.
        dtype: ``"float32"`` or ``"float64"``.
        device: Device of every tensor.

    Example:
        >>> import torch
        >>> env = CartPoleSwingUp(num_envs=2)
        >>> obs, _ = env.reset(seed=0)
        >>> bool((obs["obs"][:, 2] < -0.99).all())  # cos(theta): hanging down
        True
        >>> result = env.step(torch.ones(2, 1))
        >>> result.reward.shape
        torch.Size([2])
    """

    @_validation.no_type_check
    def __init__(
        self,
        *,
        num_envs: int,
        max_episode_steps: int = 500,
        clip_actions: bool = True,
        seed: int | None = None,
        dtype: Literal["float32", "float64"] = "float32",
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__(
            num_envs=num_envs,
            max_episode_steps=max_episode_steps,
            observation_high=(physics.X_THRESHOLD * 2, math.inf, 1.0, 1.0, math.inf),
            observation_normalize_mask=(True, True, False, False, True),
            action_space=(1.0,),
            num_initial_draws=4,
            clip_actions=clip_actions,
            seed=seed,
            dtype=dtype,
            device=device,
        )

    def _initial_state(self, uniform: _State) -> _State:
        noise = uniform_between(uniform, -_INITIAL_NOISE, _INITIAL_NOISE)
        x, x_dot, theta, theta_dot = noise.unbind(-1)
        return stack_columns((x, x_dot, theta + math.pi, theta_dot))

    def _dynamics(self, state: _State, action: ContinuousAction) -> _State:
        x, x_dot, theta, theta_dot = state.unbind(-1)
        force = physics.FORCE_MAG * action[:, 0]
        x_acc, theta_acc = physics.accelerations(
            force, torch.cos(theta), torch.sin(theta), theta_dot
        )
        # Semi-implicit Euler: velocities first, positions from the new velocities.
        next_x_dot = x_dot + physics.TAU * x_acc
        next_theta_dot = theta_dot + physics.TAU * theta_acc
        return stack_columns(
            (
                x + physics.TAU * next_x_dot,
                next_x_dot,
                theta + physics.TAU * next_theta_dot,
                next_theta_dot,
            )
        )

    def _reward(self, state: _State, action: ContinuousAction, next_state: _State) -> Reward:
        x = next_state[:, 0]
        theta = next_state[:, 2]
        force = action[:, 0]
        # r = 0.5 (1 + cos theta') (1 - 0.5 (x' / 2.4)^2) - 0.01 a^2
        upright = 0.5 * (1.0 + torch.cos(theta))
        centred = 1.0 - 0.5 * (x / physics.X_THRESHOLD) ** 2
        return upright * centred - 0.01 * force * force

    def _terminated(self, next_state: _State) -> Done:
        return next_state[:, 0].abs() > physics.X_THRESHOLD

    def _observe(self, state: _State) -> ObsVector:
        x, x_dot, theta, theta_dot = state.unbind(-1)
        return stack_columns((x, x_dot, torch.cos(theta), torch.sin(theta), theta_dot))

"""Cart-pole swing-up: the pole starts hanging down and must be swung upright."""

import math
from typing import Any, ClassVar, Unpack, cast, final

import numpy as np
import torch
from jaxtyping import Float, Float64
from torch import Tensor

from typedrl._results import StepResult
from typedrl._validation import describe
from typedrl.envs.builtin import _cartpole_physics as physics
from typedrl.envs.builtin._base import BaseTorchVecEnv, EnvLayout, EnvOptions
from typedrl.envs.builtin._cartpole_render import VIEW, draw_cart_pole
from typedrl.envs.builtin._math import stack_columns, uniform_between
from typedrl.envs.builtin._render import Canvas, RenderView
from typedrl.errors import CheckpointError
from typedrl.types import Action, ContinuousAction, Done, Obs, ObsVector, Reward

__all__ = ["CartPoleSwingUp"]

_State = Float[Tensor, "num_envs 4"]
_INITIAL_NOISE = 0.05
UPRIGHT_DEGREES = 12.0
"""The pole counts as upright within this angle of vertical (``info["is_success"]``)."""
_COS_UPRIGHT = math.cos(math.radians(UPRIGHT_DEGREES))


_LAYOUT = EnvLayout(
    observation_high=(physics.X_THRESHOLD * 2, math.inf, 1.0, 1.0, math.inf),
    observation_normalize_mask=(True, True, False, False, True),
    action_space=(1.0,),
    num_initial_draws=4,
    max_episode_steps=500,
)


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
    - time limit: 500 steps;
    - ``info["is_success"]`` (``[num_envs]`` bools, every step): true for the rows
      whose episode ends by the time limit with the pole upright (within
      ``UPRIGHT_DEGREES`` = 12 degrees of vertical) at every step of its
      last half; :class:`~typedrl.evaluation.EpisodeEvaluator` reports their
      share as ``success_rate``.

    :meth:`~BaseTorchVecEnv.render` draws the rail with its ends (where the
    episode terminates) marked in red, the black cart and the pole (600 x 400
    pixels, 50 fps).

    Args:
        num_envs: Number of rows.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is
            500 steps unless ``max_episode_steps`` says otherwise.

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

    _render_view: ClassVar[RenderView | None] = VIEW

    def __init__(self, *, num_envs: int, **options: Unpack[EnvOptions]) -> None:
        super().__init__(num_envs=num_envs, layout=_LAYOUT, **options)

        self._upright_run = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Start a new episode in every row (see :meth:`BaseTorchVecEnv.reset`)."""
        result = super().reset(seed=seed, options=options)
        self._upright_run = torch.zeros_like(self._upright_run)
        return result

    def step(self, action: Action) -> StepResult:
        """Advance every row by one step (see :meth:`BaseTorchVecEnv.step`).

        The info holds ``"is_success"``: the rows whose episode ended by the
        time limit with the pole upright at every step of its last half.
        """
        started = self._started.clone()
        result = super().step(action)
        # The base env always returns its terminal observations.
        final_obs = cast("Obs", result.final_obs)
        with torch.no_grad():
            upright = final_obs["obs"][:, 2] >= _COS_UPRIGHT
            run = torch.where(upright, self._upright_run + 1, 0)
            length = self._steps - started
            success = result.truncated & ~result.terminated & (2 * run >= length)
            self._upright_run = torch.where(result.done, 0, run)
        return StepResult.from_trusted(
            result.obs,
            result.reward,
            result.terminated,
            result.truncated,
            {"is_success": success},
            final_obs=final_obs,
            valid=result.valid,
        )

    def state_dict(self) -> dict[str, Any]:
        """The env's dynamic state, with each row's count of consecutive upright steps."""
        return {**super().state_dict(), "upright_run": self._upright_run.clone()}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`; raise CheckpointError if it does not fit this env."""
        rest = dict(state_dict)
        run = rest.pop("upright_run", None)
        if not isinstance(run, Tensor) or run.shape != (self.num_envs,) or run.dtype != torch.int64:
            raise CheckpointError(
                f"CartPoleSwingUp.load_state_dict: 'upright_run' must be an int64 tensor of "
                f"shape [{self.num_envs}], got {describe(run)}"
            )
        super().load_state_dict(rest)
        self._upright_run = run.to(self.device).clone()

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

    def _draw(self, canvas: Canvas, obs: Float64[np.ndarray, " obs_dim"]) -> None:
        x, _, cos_theta, sin_theta, _ = (float(value) for value in obs)
        draw_cart_pole(canvas, x, cos_theta, sin_theta)

"""Cart-pole swing-up on a MuJoCo cart-pole model."""

import math
from importlib import resources
from pathlib import Path
from typing import final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl._validation import positive_float
from typedrl.envs.builtin._math import stack_columns, uniform_between
from typedrl.envs.mujoco._task import MujocoState, MujocoTask, MujocoTaskSpec
from typedrl.types import Done, ObsVector, Reward

__all__ = ["CARTPOLE_XML", "CartPoleSwingUpTask"]

CARTPOLE_XML: Path = Path(str(resources.files("typedrl.envs.mujoco") / "assets" / "cartpole.xml"))
"""The shipped cart-pole MJCF: a 1 kg cart on a rail, a 0.1 kg, 1 m pole, a motor of gear 10."""

_INITIAL_NOISE = 0.05


@final
class CartPoleSwingUpTask(MujocoTask):
    """Swing the pole up from hanging down and balance it, on the cart centre.

    The model is :data:`CARTPOLE_XML` (timestep 0.02 s, one physics step per
    env step, no constraints, so the solver is skipped): the cart and pole of
    Gymnasium's ``CartPole-v1`` (a 1 kg cart, a uniform 0.1 kg, 1 m pole, force
    ``10 * a`` N), so the task matches the built-in
    :class:`~typedrl.envs.CartPoleSwingUp`, integrated by MuJoCo instead. Joint ``slider`` moves
    the cart along ``x``, joint ``hinge`` turns the pole; ``theta = 0`` is
    upright, ``theta = pi`` hanging.

    - action: ``Box(-1, 1, (1,))``, the motor's control (force ``10 * a`` N);
    - initial state: ``x, x_dot, theta_dot ~ U(-0.05, 0.05)``,
      ``theta ~ pi + U(-0.05, 0.05)``;
    - reward (smooth, at most 1)::

          r = 0.5 * (1 + cos theta') * (1 - 0.5 * (x' / x_limit)**2) - 0.01 * a**2

    - termination when the cart leaves the rail, ``|x'| > x_limit``;
    - observation ``(x, x_dot, cos theta, sin theta, theta_dot)``; cosine and
      sine are not flagged for normalisation;
    - time limit: 500 steps (10 s).

    Args:
        x_limit: Half-length of the rail, in metres (2.4, as in Gymnasium).
    """

    def __init__(self, *, x_limit: float = 2.4) -> None:
        self._x_limit = positive_float(type(self).__name__, "x_limit", x_limit)
        self._spec = MujocoTaskSpec(
            model_path=CARTPOLE_XML,
            max_episode_steps=500,
            observation_high=(2.0 * self._x_limit, math.inf, 1.0, 1.0, math.inf),
            observation_normalize_mask=(True, True, False, False, True),
            num_initial_draws=4,
        )

    @property
    def spec(self) -> MujocoTaskSpec:
        """The cart-pole model, one physics step per env step, 5 observation features."""
        return self._spec

    def initial_state(
        self, uniform: Float[Tensor, "num_envs 4"], *, qpos0: Float[Tensor, " nq"], na: int
    ) -> MujocoState:
        """Hanging down, with small uniform noise on every coordinate."""
        noise = uniform_between(uniform, -_INITIAL_NOISE, _INITIAL_NOISE)
        x, theta, x_dot, theta_dot = noise.unbind(-1)
        qpos = stack_columns((qpos0[0] + x, qpos0[1] + math.pi + theta))
        return MujocoState(qpos=qpos, qvel=stack_columns((x_dot, theta_dot)), act=qpos[:, :0])

    def observe(self, state: MujocoState) -> ObsVector:
        """``(x, x_dot, cos theta, sin theta, theta_dot)``."""
        theta = state.qpos[:, 1]
        return stack_columns(
            (
                state.qpos[:, 0],
                state.qvel[:, 0],
                torch.cos(theta),
                torch.sin(theta),
                state.qvel[:, 1],
            )
        )

    def reward(
        self,
        state: MujocoState,
        action: Float[Tensor, "num_envs 1"],
        next_state: MujocoState,
        *,
        dt: float,
    ) -> Reward:
        """Upright-ness times centring, minus a small control cost."""
        x = next_state.qpos[:, 0]
        theta = next_state.qpos[:, 1]
        force = action[:, 0]
        # r = 0.5 (1 + cos theta') (1 - 0.5 (x' / x_limit)^2) - 0.01 a^2
        upright = 0.5 * (1.0 + torch.cos(theta))
        centred = 1.0 - 0.5 * (x / self._x_limit) ** 2
        return upright * centred - 0.01 * force * force

    def terminated(self, next_state: MujocoState) -> Done:
        """The cart left the rail."""
        return next_state.qpos[:, 0].abs() > self._x_limit
